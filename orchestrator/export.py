"""`ratchet checkout` and `ratchet export`: a candidate's exact tree, or a standalone submission."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import git
from pydantic import BaseModel, Field

from harness.static_checks import check_sources
from kernels.candidate_tree import CandidateTreeError, bundle_sources, write_tree
from kernels.workload import HARMLESS_STDLIB, StaticPolicy, Workload
from ledger import Ledger
from orchestrator.events import EvaluationSummary, Stage
from orchestrator.inherited import RegressionStatus, regression_status
from orchestrator.state import CandidateView, SearchState, derive_state
from orchestrator.workspace import RunPaths, open_repository, read_sources, resolve_sha
from search import Verdict

ENVIRONMENT_FILE = "RATCHET_ENVIRONMENT.json"
SUBMISSION_FILE = "submission.py"
SUBMISSION_PACKAGE = "submission"
MANIFEST_FILE = "manifest.json"
# What a standalone submission may import: torch, triton and the harmless standard library, the
# same as a candidate may during the search (a frontier the run accepted must export).
STANDALONE_IMPORTS = ("torch", "triton", *HARMLESS_STDLIB)


class ExportError(RuntimeError):
    """The candidate cannot be checked out or exported as asked."""


class SubmissionForm(enum.StrEnum):
    """How the submission is shipped."""

    BUNDLE = "bundle"  # one file: the candidate's modules concatenated (or its only module)
    PACKAGE = "package"  # a directory of the candidate's modules, entry module inside


class ConfigResultRow(BaseModel):
    """One config's measured result in the manifest."""

    speedup: float | None = Field(description="Paired median ratio baseline/candidate.")
    ci_low: float | None = Field(description="Lower end of its 95% CI.")
    ci_high: float | None = Field(description="Upper end of its 95% CI.")
    failed_elements: int = Field(description="Failing elements over all correctness trials.")
    total_elements: int = Field(description="Elements compared.")
    max_abs_error: float | None = Field(description="Largest |out - ref| seen.")
    tolerance_used: float | None = Field(
        default=None,
        description="The largest share of its tolerance any element used, over all trials "
        "(below 1 passes; near 1, a pass a fresh input may undo; None: not reported).",
    )


class ExportManifest(BaseModel):
    """manifest.json: ties the submission to its commit, lineage, ledger and results."""

    commit: str = Field(description="Candidate commit sha.")
    tree: str = Field(description="Its git tree sha.")
    workload: str = Field(description="Workload name.")
    entry_point: str = Field(description="Class to instantiate from the entry module.")
    form: SubmissionForm = Field(description="One bundled file, or a package directory.")
    entry_module: str = Field(
        description="Path of the module defining entry_point, relative to the export directory."
    )
    files: list[str] = Field(description="Every file of the submission, relative to the export.")
    form_note: str = Field(description="Why this form (what stopped bundling, if anything).")
    declared_lineage: list[str] = Field(description="Declared parents up to the seed.")
    verdict: str | None = Field(description="The candidate's verdict.")
    objective: float | None = Field(description="Objective vs the baseline.")
    objective_kind: str | None = Field(description="Which aggregate the objective is.")
    baseline: str | None = Field(description="What the baseline is, exactly.")
    device: str | None = Field(description="Device the results were measured on.")
    config_set: str | None = Field(description="Config set of the results.")
    per_config: dict[str, ConfigResultRow] = Field(description="Per-config results.")
    environment: dict[str, Any] = Field(description="Environment fingerprint of the sweep.")
    ledger_head_seq: int = Field(description="Ledger entries at export time.")
    ledger_head_hash: str = Field(description="Ledger head hash at export time.")
    ledger_head: str = Field(
        description="The two as SEQ:HASH: `ratchet ledger verify --expect-head` with it proves "
        "a ledger still holds the history this export came from."
    )
    feasibility: str = Field(
        default="none required",
        description="passed, failed or unchecked on the config set's feasibility configs "
        "(exported as the frontier only when passed), or 'none required'.",
    )
    feasibility_configs: list[str] = Field(
        default_factory=list, description="The feasibility configs of the run's config set."
    )
    regression_inputs: str = Field(
        default="none recorded",
        description="On the inputs that demoted earlier frontiers of the run: passed, failed, "
        "unanswered (its checks found no judge: it stands unchecked on them), not judged "
        "(exported only with --unchecked), or none recorded.",
    )
    exported_at: str = Field(description="UTC time of the export.")
    ratchet_version: str = Field(description="Version of Ratchet that exported it.")


def _candidate(state: SearchState, repo: git.Repo, prefix: str | None) -> CandidateView:
    if prefix is None:
        if state.frontier_sha is None:
            raise ExportError("the run has no frontier yet; pass --sha")
        return state.candidates[state.frontier_sha]
    sha = resolve_sha(repo, list(state.candidates), prefix)
    return state.candidates[sha]


def _sweep_for(ledger: Ledger, sha: str) -> EvaluationSummary | None:
    """The candidate's last full sweep (earlier ones were tainted and measured again)."""
    found = None
    for stored in ledger.events(kind="evaluation"):
        summary = EvaluationSummary.model_validate(stored.record.payload)
        if summary.sha == sha and summary.stage is Stage.SWEEP:
            found = summary
    return found


def check_measured_tree(repo: git.Repo, sha: str, tree_sha: str) -> None:
    """Refuse when git no longer gives, for this commit, the tree the ledger measured (a
    `git replace`, a rewritten or pruned repository): only measured code is shipped."""
    try:
        got = str(repo.git.rev_parse(f"{sha}^{{tree}}"))
    except git.GitCommandError:
        raise ExportError(
            f"commit {sha[:12]} is no longer in the run's repository (a deleted branch and a "
            f"git gc?); the ledger measured tree {tree_sha[:12]}, which git cannot give back. "
            "Nothing was written"
        ) from None
    if got != tree_sha:
        raise ExportError(
            f"git gives tree {got[:12]} for commit {sha[:12]}, but the ledger measured tree "
            f"{tree_sha[:12]} (a `git replace` or a rewritten repository?): refusing to ship "
            "code that was never measured. Nothing was written"
        )


def checkout_candidate(run_dir: Path, ledger: Ledger, prefix: str, into: Path | None) -> Path:
    """A git worktree of the candidate's exact commit, with its environment fingerprint beside."""
    paths = RunPaths(run_dir.resolve())
    repo = open_repository(paths)
    state = derive_state(ledger)
    sha = resolve_sha(repo, list(state.candidates), prefix)
    check_measured_tree(repo, sha, state.candidates[sha].tree_sha)
    target = (into or paths.root / "checkouts" / sha[:12]).resolve()
    if target.exists() and not target.is_dir():
        raise ExportError(f"--into {target} is a file; pass a directory (new or empty)")
    if target.exists() and any(target.iterdir()):
        raise ExportError(f"{target} exists and is not empty; choose another --into")
    if target.exists():
        target.rmdir()
    repo.git.worktree("add", "--detach", str(target), sha)
    exclude = Path(repo.git_dir) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text() if exclude.exists() else ""
    if ENVIRONMENT_FILE not in existing.split():
        exclude.write_text(existing + f"\n{ENVIRONMENT_FILE}\n")
    sweep = _sweep_for(ledger, sha)
    fingerprint: dict[str, Any] = {}
    if sweep and sweep.fingerprint_id:
        stored = ledger.fingerprint(sweep.fingerprint_id)
        fingerprint = stored.record.content if stored else {}
    (target / ENVIRONMENT_FILE).write_text(
        json.dumps({"commit": sha, "environment": fingerprint}, indent=2, sort_keys=True)
    )
    return target


def _per_config(sweep: EvaluationSummary | None) -> dict[str, ConfigResultRow]:
    rows = {}
    for config in sweep.configs if sweep else []:
        base = next((r for r in config.ratios if r.get("other") == "baseline"), None)
        rows[config.config_id] = ConfigResultRow(
            speedup=base["median"] if base else None,
            ci_low=base["ci_low"] if base else None,
            ci_high=base["ci_high"] if base else None,
            failed_elements=config.failed_elements,
            total_elements=config.total_elements,
            max_abs_error=config.max_abs_error,
            tolerance_used=config.tolerance_used,
        )
    return rows


def _version() -> str:
    try:
        return metadata.version("ratchet")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Submission:
    """The files to write, by path relative to the export directory."""

    form: SubmissionForm
    files: dict[str, str]
    entry_module: str
    note: str


def build_submission(sources: dict[str, str], workload: Workload) -> Submission:
    """One standalone file where the tree bundles, else the tree as a package; either way
    importing nothing but torch/triton (and the tree's own modules)."""
    entry = workload.candidate_file
    policy = StaticPolicy(
        entry_point=workload.static_policy.entry_point,
        allowed_imports=STANDALONE_IMPORTS,
        shape_constants=workload.static_policy.shape_constants,
    )
    report = check_sources(sources, policy, entry)
    if not report.passed:
        raise ExportError(f"the candidate is not a standalone submission:\n{report.summary()}")
    if set(sources) == {entry}:
        return Submission(
            SubmissionForm.BUNDLE,
            {SUBMISSION_FILE: sources[entry]},
            SUBMISSION_FILE,
            "a single module",
        )
    try:
        bundled = bundle_sources(sources, entry)
    except CandidateTreeError as exc:
        files = {f"{SUBMISSION_PACKAGE}/{path}": text for path, text in sources.items()}
        entry_module = f"{SUBMISSION_PACKAGE}/{entry}"
        return Submission(SubmissionForm.PACKAGE, files, entry_module, f"not bundled: {exc}")
    report = check_sources({SUBMISSION_FILE: bundled}, policy, SUBMISSION_FILE)
    if not report.passed:
        raise ExportError(f"the bundled submission fails the static checks:\n{report.summary()}")
    note = f"{len(sources)} modules bundled into one file: {', '.join(sorted(sources))}"
    return Submission(SubmissionForm.BUNDLE, {SUBMISSION_FILE: bundled}, SUBMISSION_FILE, note)


def _feasibility(
    state: SearchState, workload: Workload, sha: str, unchecked: bool
) -> tuple[str, list[str]]:
    """What the candidate did on the feasibility configs; an error unless it passed them or
    the user asked for an unchecked export."""
    config_set = state.run.config_set if state.run else None
    if config_set is None or config_set not in workload.config_sets:
        return "none required", []
    configs = list(workload.config_set(config_set).feasibility_ids)
    if not configs:
        return "none required", []
    passed = state.feasibility.get(sha)
    status = "unchecked" if passed is None else ("passed" if passed else "failed")
    if status != "passed" and not unchecked:
        raise ExportError(
            f"candidate {sha[:10]} is {status} on the feasibility configs {configs} of config "
            f"set {config_set}: it is not exported as the frontier. A run checks its frontier "
            "when it stops (run again to resume and check); or pass --unchecked to export it "
            f"anyway, marked '{status}' in the manifest"
        )
    return status, configs


def _regression_inputs(state: SearchState, sha: str, unchecked: bool) -> str:
    """What the candidate did on the inputs that demoted earlier frontiers; an error when it
    failed them or was never judged on them, unless the user asked for an unchecked export."""
    status = regression_status(state, sha)
    if unchecked or status not in (RegressionStatus.FAILED, RegressionStatus.NOT_JUDGED):
        return status.value
    if status is RegressionStatus.FAILED:
        what = (
            f"candidate {sha[:10]} failed the inputs that demoted earlier frontiers of this run "
            "(its inherited check in the ledger): export the run's frontier instead"
        )
    else:
        what = (
            f"candidate {sha[:10]} was not judged on the inputs that demoted earlier frontiers "
            "of this run: a run judges its frontier on them before it stops (run again to "
            "resume and check)"
        )
    raise ExportError(
        f"{what}; or pass --unchecked to export it anyway, marked '{status.value}' in the manifest"
    )


def export_candidate(
    run_dir: Path,
    ledger: Ledger,
    workload: Workload,
    prefix: str | None,
    out: Path,
    *,
    unchecked: bool = False,
) -> ExportManifest:
    """Write the submission (standalone: torch/triton only; submission.py, or a submission/
    package when the tree cannot be bundled) and manifest.json into `out`."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; pass a directory (new or empty)")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; choose another --out")
    repo = open_repository(RunPaths(run_dir.resolve()))
    state = derive_state(ledger)
    cand = _candidate(state, repo, prefix)
    if cand.verdict not in (Verdict.PROMOTED, Verdict.REJECTED, Verdict.INCONCLUSIVE):
        raise ExportError(
            f"candidate {cand.sha[:10]} was judged {cand.verdict}: it has no full-sweep result "
            "to ship; export the frontier or another candidate that passed the sweep"
        )
    check_measured_tree(repo, cand.sha, cand.tree_sha)
    regression_inputs = _regression_inputs(state, cand.sha, unchecked)
    feasibility, feasibility_configs = _feasibility(state, workload, cand.sha, unchecked)
    submission = build_submission(read_sources(repo, cand.sha), workload)
    sweep = _sweep_for(ledger, cand.sha)
    fingerprint: dict[str, Any] = {}
    if sweep and sweep.fingerprint_id:
        stored = ledger.fingerprint(sweep.fingerprint_id)
        fingerprint = stored.record.content if stored else {}
    head_seq, head_hash = ledger.head()
    manifest = ExportManifest(
        commit=cand.sha,
        tree=cand.tree_sha,
        workload=workload.name,
        entry_point=workload.static_policy.entry_point,
        form=submission.form,
        entry_module=submission.entry_module,
        files=sorted(submission.files),
        form_note=submission.note,
        declared_lineage=state.ancestry(cand.sha),
        verdict=cand.verdict.value if cand.verdict else None,
        objective=cand.objective,
        objective_kind=cand.details.get("objective_kind"),
        baseline=state.run.baseline if state.run else None,
        device=state.run.device if state.run else None,
        config_set=state.run.config_set if state.run else None,
        per_config=_per_config(sweep),
        environment=fingerprint,
        ledger_head_seq=head_seq,
        ledger_head_hash=head_hash,
        ledger_head=f"{head_seq}:{head_hash}",
        feasibility=feasibility,
        feasibility_configs=feasibility_configs,
        regression_inputs=regression_inputs,
        exported_at=datetime.now(UTC).isoformat(timespec="seconds"),
        ratchet_version=_version(),
    )
    out.mkdir(parents=True, exist_ok=True)
    write_tree(submission.files, out)
    (out / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return manifest
