"""Judging a candidate at one stage: build the request, run the harness, record the evidence."""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from harness.models import (
    ArmKind,
    ArmSpec,
    ConfigResult,
    DevicePeaks,
    EvaluationRequest,
    EvaluationResult,
    RatioStats,
    TimingPlan,
)
from harness.runner import RunnerSettings, run_evaluation
from harness.trials import correctness_trials, new_salt, recheck_trials
from kernels.workload import TrialSpec, Workload
from ledger import FingerprintRecord, MeasurementRecord, Record
from orchestrator.device_wait import wait_for_device
from orchestrator.events import ConfigSummary, EvaluationSummary, EventKind, Stage
from orchestrator.judge_watch import REPORT_EVERY_S, JudgeWatch
from orchestrator.workspace import materialize

BASELINE_ARM = "baseline"
REFERENCE_SHA = "reference"


@dataclass(frozen=True)
class Judging:
    """What every evaluation of a run shares."""

    workload: Workload
    device: str
    repo: git.Repo | None
    evals_dir: Path
    runner: RunnerSettings
    torch_threads: int | None
    runnable_ids: tuple[str, ...]
    device_peaks: DevicePeaks | None = None
    # Where waits for the device lock are reported as they happen (None: waits are silent).
    notice: Callable[[str], None] | None = None
    # How often a judge still running is reported through `notice` (the first after as long).
    watch_every_s: float = REPORT_EVERY_S
    # How judge subprocesses find the workload: its registry name, or the 'module:factory'
    # of a plug-in (None: the workload's name).
    workload_spec: str | None = None
    # Where judges run when not on this host (a Ray actor): the request and the local work dir
    # in, the result out, the judge's files copied back into the work dir (None: here).
    remote: Callable[[EvaluationRequest, Path], EvaluationResult] | None = None

    @property
    def slot_name(self) -> str:
        """The device slot this judging measures on (the run's device without slots)."""
        return self.runner.slot.name if self.runner.slot is not None else self.device

    @property
    def work_suffix(self) -> str:
        """Appended to the names of per-device work dirs ('' without device slots)."""
        slot = self.runner.slot
        return "" if slot is None else "-" + slot.name.replace(":", "-")

    @property
    def workload_ref(self) -> str:
        """What a judge request names the workload by."""
        return self.workload_spec or self.workload.name


def judge(
    judging: Judging, request: EvaluationRequest, work: Path, what: str | None = None
) -> EvaluationResult:
    """Run one judge subprocess; a wait for the device lock is reported first and, when the
    judging has a notice, a long judge every `watch_every_s` as `what` (e.g. 'sweep of SHA')."""
    if judging.remote is not None:
        return judging.remote(request, work)
    runner = judging.runner
    if judging.notice is None:
        return run_evaluation(request, work, runner)
    waited = wait_for_device(runner, request.device, judging.notice)
    if waited:  # the judge waits only for what is left of the lock timeout
        left = max(1.0, runner.lock_timeout_s - waited)
        runner = runner.model_copy(update={"lock_timeout_s": left})
    label = what or f"judging {request.evaluation_id}"
    configs = len(request.config_ids)
    with JudgeWatch(label, judging.notice, configs, judging.watch_every_s) as watch:
        return run_evaluation(request, work, runner, watch.progress)


@dataclass(frozen=True)
class StageRequest:
    """One stage of one candidate: which arms, configs and timing."""

    step: int
    sha: str
    stage: Stage
    arms: dict[str, str]
    config_ids: list[str]
    timing: TimingPlan | None
    config_weights: dict[str, float]
    attempt: int = 0  # > 0: measured again (an earlier sweep tainted, an earlier screen cut)
    time_limit_s: float | None = None  # the stage's own cap (None: the runner's)
    # Inputs judged besides the fresh ones: those that demoted frontiers (state.regression_trials)
    regression_trials: tuple[TrialSpec, ...] = ()

    @property
    def name(self) -> str:
        """Work directory name and evaluation-id suffix of this stage (unique per attempt)."""
        suffix = f"-{self.attempt + 1}" if self.attempt else ""
        return f"{self.stage.value}{suffix}"


def commit_arm(judging: Judging, name: str, sha: str, work: Path) -> ArmSpec:
    """An arm running the candidate file of commit `sha`, materialized under `work`."""
    assert judging.repo is not None, "arms from commits need the run's repository"
    tree = materialize(judging.repo, sha, work / "arms" / name)
    return ArmSpec(
        name=name,
        kind=ArmKind.MODULE,
        module_path=str(tree / judging.workload.candidate_file),
        entry_point=judging.workload.static_policy.entry_point,
        commit_sha=sha,
    )


def _with_regressions(trials: list[TrialSpec], job: StageRequest) -> list[TrialSpec]:
    """The stage's trials, then the regression inputs none of them repeats."""
    return [*trials, *(t for t in job.regression_trials if t not in trials)]


def build_request(judging: Judging, job: StageRequest) -> EvaluationRequest:
    """Materialize every arm's tree and describe the evaluation for the judge."""
    work = judging.evals_dir / f"step-{job.step:05d}-{job.name}"
    arms = [
        ArmSpec(name=name, kind=ArmKind.REFERENCE, commit_sha=REFERENCE_SHA)
        if sha == REFERENCE_SHA
        else commit_arm(judging, name, sha, work)
        for name, sha in job.arms.items()
    ]
    salt = new_salt()
    oracle_ids = [c for c in job.config_ids if c not in judging.runnable_ids]
    return EvaluationRequest(
        evaluation_id=f"{job.sha}:{job.name}",
        workload=judging.workload_ref,
        device=judging.device,
        config_ids=job.config_ids,
        arms=arms,
        judged_arm="candidate",
        trials=_with_regressions(correctness_trials(judging.workload.official_trials, salt), job),
        recheck_trials=recheck_trials(salt) if job.timing else [],
        oracle_config_ids=oracle_ids,
        device_peaks=judging.device_peaks,
        timing=job.timing,
        config_weights=job.config_weights,
        # A sweep's per-config timings of a variant that fails elsewhere are what a dispatch
        # composition serves it by; a screen stops at the first failure (it is cheap to redo).
        time_past_failures=job.stage is Stage.SWEEP,
        time_limit_s=job.time_limit_s,
        seed=secrets.randbelow(2**31),
        torch_threads=judging.torch_threads,
    )


def judge_stage(judging: Judging, job: StageRequest) -> tuple[EvaluationRequest, EvaluationResult]:
    """Run the judge subprocess for one stage."""
    request = build_request(judging, job)
    work = judging.evals_dir / f"step-{job.step:05d}-{job.name}"
    what = f"{job.stage.value} of {job.sha[:10]} (step {job.step})"
    return request, judge(judging, request, work, what)


def ratio_dict(stats: RatioStats | None) -> dict[str, float] | None:
    """A ratio as a plain dict for the ledger."""
    if stats is None:
        return None
    return {"median": stats.median, "ci_low": stats.ci_low, "ci_high": stats.ci_high}


def tolerance_used(result: EvaluationResult) -> dict[str, float]:
    """Per config, the largest share of its tolerance any element used over the trials."""
    used = {config.config_id: config.tolerance_used for config in result.configs}
    return {config_id: share for config_id, share in used.items() if share is not None}


def _summarize(config: ConfigResult) -> ConfigSummary:
    failed = sum(t.failed_elements for t in config.trials)
    errors = [t.max_abs_error for t in config.trials if t.max_abs_error is not None]
    return ConfigSummary(
        config_id=config.config_id,
        correct=config.correct,
        trials=len(config.trials),
        failed_elements=failed,
        total_elements=sum(t.total_elements for t in config.trials),
        max_abs_error=max(errors) if errors else None,
        tolerance_used=config.tolerance_used,
        problem=next((t.problem for t in config.trials if t.problem), None),
        ratios=[r.model_dump(mode="json") for r in config.ratios],
        settings_read=config.settings_read,
        failed_trial=next((t.trial for t in config.trials if not t.passed), None),
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def evaluation_records(
    job: StageRequest,
    request: EvaluationRequest,
    result: EvaluationResult,
    device_slot: str | None = None,
    superseded_by: str | None = None,
) -> list[Record]:
    """Fingerprint, summary event and one measurement row per (config, arm)."""
    records: list[Record] = []
    fingerprint_id = None
    if result.fingerprint:
        fingerprint = FingerprintRecord.from_content(dict(result.fingerprint))
        fingerprint_id = fingerprint.fingerprint_id
        records.append(fingerprint)
    summary = EvaluationSummary(
        step=job.step,
        sha=job.sha,
        evaluation_id=request.evaluation_id,
        stage=job.stage,
        outcome=result.outcome.value,
        message=result.message[-4000:],
        wall_s=result.wall_s,
        protocol=result.protocol,
        fingerprint_id=fingerprint_id,
        timer_resolution_ns=_finite(result.timer_resolution_ns),
        arms=job.arms,
        configs=[_summarize(c) for c in result.configs],
        aggregates=[a.model_dump(mode="json") for a in result.aggregates],
        trial_seeds=[t.seed for t in request.trials],
        taint=list(result.taint) if result.tainted else [],
        device_slot=device_slot,
        superseded_by=superseded_by,
    )
    records.append(summary.to_event(EventKind.EVALUATION))
    for config in result.configs:
        for timing in config.timings:
            records.append(
                MeasurementRecord(
                    evaluation_id=request.evaluation_id,
                    commit_sha=job.arms[timing.arm],
                    config_id=config.config_id,
                    arm=timing.arm,
                    stage=job.stage.value,
                    samples_ns=timing.samples_ns,
                    median_ns=timing.median_ns,
                    fingerprint_id=fingerprint_id or "",
                    protocol=result.protocol,
                    extra={
                        "calls_per_block": timing.calls_per_block,
                        "rounds": config.rounds,
                        "device": device_slot or request.device,
                    },
                )
            )
    return records
