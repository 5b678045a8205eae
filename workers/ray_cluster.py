"""Ray actors that judge on a device of any host of the cluster, and Ray tasks that expand.

What travels, and how: a judge request goes to an actor with its arms' source trees by value
(the actor's host needs the project installed, not the run's repository; its judge sources
must hash the same as the orchestrator's, checked when the actor starts); the judge's files
come back with the result. An expansion goes to a task as a git bundle of the run's branches
and comes back as a bundle of the one branch it committed. Nothing of Ray enters a judge's
process: the actor starts the judge as the harness always does, a fresh subprocess.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agents.expander import ExpansionRequest, ExpansionResult
from agents.offline import OfflineExpander
from harness.models import DeviceSlot, EvaluationRequest, EvaluationResult
from harness.runner import RunnerSettings, run_evaluation
from workers.shipping import (
    ShippedArms,
    clone_bundle,
    code_digest,
    read_artifacts,
    unpack_arms,
)

# The project checkout of this host: what the judge subprocess puts on its path.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class RayClusterError(RuntimeError):
    """The Ray cluster cannot be reached, or cannot give the run what it needs."""


class JudgeSettings(BaseModel):
    """What a remote judge takes from the run's settings (the rest is the host's own)."""

    timeout_s: float = Field(description="Wall-clock cap per evaluation.")
    lock_timeout_s: float = Field(description="Wait for the device lock.")
    lock_dir: str = Field(description="Directory of the device lock files on the worker host.")
    triton_interpret: bool = Field(default=False, description="Triton's interpreter on CPU.")


class RemoteJudged(BaseModel):
    """An actor's answer: the result, and the judge's files for the run's evaluation dir."""

    result: EvaluationResult = Field(description="The judge's structured result.")
    artifacts: dict[str, bytes] = Field(description="request.json, result.json, judge.log.")
    host: str = Field(description="The host that judged.")


class EvaluationActor:
    """One device of one host: judges requests there, one at a time, in fresh subprocesses."""

    def __init__(self, settings: JudgeSettings, slot: DeviceSlot) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="ratchet-actor-"))
        self.slot = slot
        self.runner = RunnerSettings(
            timeout_s=settings.timeout_s,
            lock_timeout_s=settings.lock_timeout_s,
            lock_dir=Path(settings.lock_dir),
            code_root=PROJECT_ROOT,
            compile_cache_dir=self.scratch / "compile-cache",
            triton_interpret=settings.triton_interpret,
            slot=slot,
        )

    def describe(self) -> dict[str, str]:
        """The host, the judge's source hash, and what the device is here."""
        return {
            "host": os.uname().nodename,
            "code": code_digest(PROJECT_ROOT),
            "slot": self.slot.name,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }

    def judge(self, request_json: str, arms_json: str, name: str) -> str:
        """Unpack the arms, run the judge, return a RemoteJudged as JSON."""
        work = self.scratch / "evals" / name
        request = EvaluationRequest.model_validate_json(request_json)
        request = unpack_arms(request, ShippedArms.model_validate_json(arms_json), work)
        result = run_evaluation(request, work, self.runner)
        judged = RemoteJudged(
            result=result, artifacts=read_artifacts(work), host=os.uname().nodename
        )
        return judged.model_dump_json()


def expand_remotely(bundle: bytes, request_json: str) -> tuple[str, bytes | None]:
    """A Ray task: the offline expander on a clone of the run's branches; returns the
    result as JSON and a bundle of the branch it committed (None when it committed none)."""
    from workers.shipping import bundle_refs

    with tempfile.TemporaryDirectory(prefix="ratchet-expand-") as scratch:
        repo = clone_bundle(bundle, Path(scratch) / "repo")
        request = ExpansionRequest.model_validate_json(request_json).model_copy(
            update={"repo_path": repo, "worktree_root": Path(scratch) / "worktrees"}
        )
        result = OfflineExpander().expand(request)
        if result.sha is None:
            return result.model_dump_json(), None
        return result.model_dump_json(), bundle_refs(repo, [f"refs/heads/{request.branch}"])


def ray_options(slot: DeviceSlot) -> dict[str, Any]:
    """Resources an actor of this device takes: a whole GPU, or one CPU."""
    return {"num_gpus": 1, "num_cpus": 0} if slot.kind == "cuda" else {"num_cpus": 1}


def probe_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, naming the fix, when nothing listens at HOST:PORT."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayClusterError(
            f"--ray {address!r} is not HOST:PORT, auto or local; e.g. --ray 127.0.0.1:6379"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayClusterError(
            f"cannot join the Ray cluster at {address!r}: nothing answers there ({exc}); start "
            "one with `ray start --head --node-ip-address 127.0.0.1` or pass --ray local"
        ) from exc


class RemoteDevice:
    """The orchestrator's handle on one actor: judges a request there, as if here."""

    def __init__(self, actor: Any, info: dict[str, str], index: int) -> None:
        self.actor = actor
        self.info = info
        self.index = index

    @property
    def name(self) -> str:
        """What measurements record: the worker, its host and its device there."""
        return f"ray{self.index}@{self.info['host']}:{self.info['slot']}"

    def judge(self, request: EvaluationRequest, work: Path) -> EvaluationResult:
        """Ship the arms, judge on the actor, write the judge's files back into `work`."""
        import ray

        from workers.shipping import pack_arms, write_artifacts

        shipped = pack_arms(request, work)
        answer = ray.get(
            self.actor.judge.remote(request.model_dump_json(), shipped.model_dump_json(), work.name)
        )
        judged = RemoteJudged.model_validate_json(answer)
        write_artifacts(work, judged.artifacts)
        return judged.result


class RayCluster:
    """A connection to a Ray cluster: its devices as actors, expansions as tasks."""

    def __init__(self, address: str) -> None:
        import ray

        if address not in ("local", "auto"):
            probe_address(address)  # Ray itself retries an absent cluster for minutes
        try:
            if address == "local":
                # A private cluster on this host, every service on loopback.
                ray.init(
                    _node_ip_address="127.0.0.1",
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                # A driver on a loopback cluster must say so, or Ray looks for its node
                # under the host's outward address and never finds it.
                loopback = address.split(":")[0] in ("127.0.0.1", "localhost")
                ray.init(
                    address=address,
                    log_to_driver=False,
                    configure_logging=False,
                    _node_ip_address="127.0.0.1" if loopback else None,
                )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayClusterError(
                f"cannot join the Ray cluster at {address!r}: {exc}; start one with "
                "`ray start --head --node-ip-address 127.0.0.1` or pass --ray local"
            ) from exc
        self.ray = ray

    def device_count(self, kind: str) -> int:
        """GPUs of the cluster (kind cuda), or its CPUs (kind cpu: one device each)."""
        resources = self.ray.cluster_resources()
        return int(resources.get("GPU" if kind == "cuda" else "CPU", 0))

    def start_devices(self, kind: str, settings: JudgeSettings, count: int) -> list[RemoteDevice]:
        """One actor per device, placed by Ray; each checks its judge sources against ours."""
        actor_class = self.ray.remote(EvaluationActor)
        cores = os.cpu_count() or 1
        handles: list[Any] = []
        for index in range(count):
            slot = (
                DeviceSlot(name="cuda:0", kind="cuda")
                if kind == "cuda"
                else DeviceSlot(name=f"cpu:{index % cores}", kind="cpu", cpus=(index % cores,))
            )
            handles.append(actor_class.options(**ray_options(slot)).remote(settings, slot))
        infos = self.ray.get([handle.describe.remote() for handle in handles])
        ours = code_digest(PROJECT_ROOT)
        for info in infos:
            if info["code"] != ours:
                raise RayClusterError(
                    f"the worker on {info['host']} runs judge sources {info['code']}, this host "
                    f"{ours}: install this project's version there (harness/ and kernels/ must "
                    "be the same) and start again"
                )
        return [
            RemoteDevice(h, info, i) for i, (h, info) in enumerate(zip(handles, infos, strict=True))
        ]

    def expand(self, request: ExpansionRequest) -> ExpansionResult:
        """The offline expander as a Ray task on the run's branches; its commit fetched back
        into the run's repository under the step's branch."""
        from workers.shipping import bundle_refs, fetch_bundle

        bundle = bundle_refs(request.repo_path, ["--all"])
        task = self.ray.remote(expand_remotely).options(num_cpus=0)
        result_json, branch = self.ray.get(task.remote(bundle, request.model_dump_json()))
        result = ExpansionResult.model_validate_json(result_json)
        if branch is not None:
            fetch_bundle(
                request.repo_path,
                branch,
                f"refs/heads/{request.branch}:refs/heads/{request.branch}",
            )
        return result

    def shutdown(self) -> None:
        """Leave the cluster (a private one ends with it)."""
        self.ray.shutdown()
