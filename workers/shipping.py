"""What moves between hosts, by value: arm source trees, judge artifacts, git bundles."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from harness.models import EvaluationRequest

# The judge's files a worker sends back into the run's evaluation dir.
ARTIFACTS = ("request.json", "result.json", "judge.log")
# What a worker and the orchestrator must run byte for byte the same: the judge and the
# workloads (a judge of another version would measure by other rules).
JUDGE_PACKAGES = ("harness", "kernels")


class ShippedArms(BaseModel):
    """The arms of a request as files, so a host without the run's repository can judge."""

    files: dict[str, dict[str, bytes]] = Field(
        description="Arm name -> path relative to the arm's tree -> content."
    )
    entries: dict[str, str] = Field(
        description="Arm name -> the candidate module's path relative to the arm's tree."
    )


def code_digest(root: Path) -> str:
    """A hash of the judge's sources under `root` (the project checkout of a host)."""
    digest = hashlib.sha256()
    for package in JUDGE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _arm_root(module_path: Path, work: Path, arm: str) -> Path:
    root = work / "arms" / arm
    return root if module_path.is_relative_to(root) else module_path.parent


def pack_arms(request: EvaluationRequest, work: Path) -> ShippedArms:
    """Every module arm's tree (materialized under work/arms/NAME) as files."""
    files: dict[str, dict[str, bytes]] = {}
    entries: dict[str, str] = {}
    for arm in request.arms:
        if arm.module_path is None:
            continue
        module = Path(arm.module_path)
        root = _arm_root(module, work, arm.name)
        files[arm.name] = {
            str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts
        }
        entries[arm.name] = str(module.relative_to(root))
    return ShippedArms(files=files, entries=entries)


def unpack_arms(request: EvaluationRequest, shipped: ShippedArms, work: Path) -> EvaluationRequest:
    """Write the shipped trees under work/arms/NAME and point the request's arms at them."""
    arms = []
    for arm in request.arms:
        if arm.name not in shipped.files:
            arms.append(arm)
            continue
        root = work / "arms" / arm.name
        for relative, content in shipped.files[arm.name].items():
            target = root / relative
            if not target.resolve().is_relative_to(root.resolve()):
                raise ValueError(f"arm {arm.name}: {relative!r} leaves the arm's tree")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        module = str(root / shipped.entries[arm.name])
        arms.append(arm.model_copy(update={"module_path": module}))
    return request.model_copy(update={"arms": arms})


def read_artifacts(work: Path) -> dict[str, bytes]:
    """The judge's files of a work dir that exist."""
    return {name: (work / name).read_bytes() for name in ARTIFACTS if (work / name).is_file()}


def write_artifacts(work: Path, artifacts: dict[str, bytes]) -> None:
    """The judge's files, as a worker sent them, into the run's work dir."""
    work.mkdir(parents=True, exist_ok=True)
    for name, content in artifacts.items():
        if name in ARTIFACTS:
            (work / name).write_bytes(content)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip()}")
    return done.stdout


def bundle_refs(repo: Path, refs: list[str]) -> bytes:
    """A git bundle of `refs` (and everything they reach), as bytes."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "refs.bundle"
        _git(repo, "bundle", "create", str(path), *refs)
        return path.read_bytes()


def fetch_bundle(repo: Path, bundle: bytes, refspec: str) -> None:
    """Fetch `refspec` from a bundle's bytes into the repository at `repo`."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "in.bundle"
        path.write_bytes(bundle)
        # --update-head-ok: a fresh clone's unborn HEAD may name a branch the bundle brings.
        _git(repo, "fetch", "--quiet", "--update-head-ok", str(path), refspec)


def clone_bundle(bundle: bytes, into: Path) -> Path:
    """A repository at `into` holding every branch of the bundle."""
    into.mkdir(parents=True, exist_ok=True)
    _git(into, "init", "--quiet")
    fetch_bundle(into, bundle, "refs/heads/*:refs/heads/*")
    return into
