"""The judge's typed boundary: evaluation requests, outcomes and structured results."""

from __future__ import annotations

import enum
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernels.workload import TrialSpec

# Lines of the judge's log that report progress (what it is doing, never a verdict).
PROGRESS_PREFIX = "[ratchet-judge] "


class Outcome(enum.StrEnum):
    """What happened to one evaluation (never an exception: exceptions are infrastructure)."""

    PASSED = "passed"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    NO_RESULT = "no_result"
    NO_RUN = "no_run"
    STATIC_REJECTED = "static_rejected"
    REJECTED = "rejected"


class RejectReason(enum.StrEnum):
    """Why the judge refused a candidate: one precise cause, never a guess."""

    STATIC_CHECK = "static_check"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    NO_RESULT = "no_result"
    NO_RUN = "no_run"
    OUTPUT_TYPE = "output_type"
    INPUT_MUTATION = "input_mutation"
    UNWRITTEN_OUTPUT = "unwritten_output"
    NON_FINITE_OUTPUT = "non_finite_output"
    WRONG_OUTPUT = "wrong_output"
    OUTPUT_ALIASING = "output_aliasing"
    TIMED_OUTPUT_WRONG = "timed_output_wrong"
    TIMER_TAMPERING = "timer_tampering"
    BACKGROUND_THREAD = "background_thread"
    SIDE_STREAM_WORK = "side_stream_work"
    IMPLAUSIBLE_TIME = "implausible_time"
    OUTLIVING_PROCESS = "outliving_process"  # a process it started outlived the evaluation
    MEMORY_LIMIT = "memory_limit"  # its processes went over the judge's memory bound
    HARNESS_SIGNALLED = "harness_signalled"  # the judge's supervisor was killed


class EvaluationMode(enum.StrEnum):
    """What the judge process is asked to do."""

    EVALUATE = "evaluate"
    QUALIFY = "qualify"
    PROFILE = "profile"  # the judged arm's top kernels on one config; no verdict, no timing


class DevicePeaks(BaseModel):
    """Ceilings measured on the device by qualification (the roofline's denominators)."""

    model_config = ConfigDict(frozen=True)

    matmul_flops_per_s: float = Field(gt=0, description="Fastest dense matmul rate measured.")
    copy_bytes_per_s: float = Field(gt=0, description="Copy bandwidth (bytes read + written).")


class DeviceSlot(BaseModel):
    """One device a run evaluates on: a GPU of the host, or a CPU slot (a set of cores)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(
        description="What measurements record and the device lock is keyed by: 'cpu', "
        "'cpu:N' (a CPU slot), or 'cuda:N' (the N-th GPU visible to the run)."
    )
    kind: Literal["cpu", "cuda"] = Field(description="The device kind the judge runs on.")
    cpus: tuple[int, ...] = Field(
        default=(),
        description="Cores the judge's processes are pinned to (empty: not pinned).",
    )
    visible_gpu: str | None = Field(
        default=None,
        description="CUDA_VISIBLE_DEVICES of the judge (the GPU as the host numbers it, an "
        "index or a UUID): the judge sees only this GPU, as 'cuda' (None: not narrowed).",
    )


class ArmKind(enum.StrEnum):
    """Where an arm's code comes from."""

    REFERENCE = "reference"
    MODULE = "module"


class ArmSpec(BaseModel):
    """One implementation taking part in an evaluation."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Arm name: 'candidate', 'parent', 'frontier', 'baseline'...")
    kind: ArmKind = Field(description="The workload reference, or a candidate module on disk.")
    module_path: str | None = Field(
        default=None, description="Absolute path of the candidate module (kind=module)."
    )
    entry_point: str | None = Field(
        default=None, description="Class to instantiate from the module (kind=module)."
    )
    commit_sha: str | None = Field(default=None, description="Commit the code came from.")

    @model_validator(mode="after")
    def _module_arms_name_a_file(self) -> ArmSpec:
        if self.kind is ArmKind.MODULE and not (self.module_path and self.entry_point):
            raise ValueError(f"arm {self.name!r}: a module arm needs module_path and entry_point")
        return self


class TimingPlan(BaseModel):
    """How long and how finely to time (interleaved ABBA rounds, stop on precision)."""

    model_config = ConfigDict(frozen=True)

    warmup_calls: int = Field(default=3, ge=1, description="Untimed calls per arm first.")
    target_block_s: float = Field(
        default=0.005, gt=0, description="Each timed block runs enough calls to last this long."
    )
    min_rounds: int = Field(default=6, ge=3, description="Rounds before stopping is considered.")
    max_rounds: int = Field(default=40, ge=3, description="Hard cap on rounds per config.")
    budget_s: float = Field(default=3.0, gt=0, description="Timing wall-time cap per config.")
    target_half_width: float = Field(
        default=0.02, gt=0, description="Stop once every CI half-width (log-ratio) is below this."
    )
    reference_half_width: float | None = Field(
        default=None,
        gt=0,
        description="CI half-width (log-ratio) at which the workload reference's comparison is "
        "precise enough: the reference then leaves the rotation and the decision arms go on "
        "alone to target_half_width. None: the reference is held to target_half_width too.",
    )
    bootstrap_resamples: int = Field(default=2000, ge=100, description="Bootstrap resamples.")
    per_call_threshold_s: float = Field(
        default=1e-4,
        gt=0,
        description="Calls that cost at least this long inside a calibration block get one "
        "event pair each (with an L2 flush before each on GPU); cheaper calls are batched per "
        "event pair.",
    )
    l2_flush: bool = Field(default=True, description="Flush L2 before per-call timed calls.")
    spot_checks: int = Field(
        default=3, ge=1, description="Timed calls of the judged arm whose output is re-checked."
    )
    max_input_sets: int = Field(
        default=64,
        ge=2,
        description="Distinct input sets of a batched block, and so its most calls: every "
        "call of a block sees inputs no other call of it saw.",
    )


class EvaluationRequest(BaseModel):
    """Everything the judge subprocess needs; written to disk by the parent."""

    evaluation_id: str = Field(description="Unique id, e.g. '<sha>:sweep'.")
    workload: str = Field(description="Workload registry name or 'module:factory' plug-in.")
    device: str = Field(description="'cpu' or 'cuda' / 'cuda:N'.")
    config_ids: list[str] = Field(min_length=1, description="Configurations to evaluate.")
    arms: list[ArmSpec] = Field(min_length=1, description="Implementations taking part.")
    judged_arm: str = Field(default="candidate", description="The arm whose correctness is gated.")
    trials: list[TrialSpec] = Field(min_length=1, description="Correctness trials per config.")
    timing: TimingPlan | None = Field(default=None, description="None: correctness only.")
    config_weights: dict[str, float] = Field(
        default_factory=dict, description="Weights of configs in the aggregate (default 1)."
    )
    seed: int = Field(default=0, description="Seed for round order and the bootstrap.")
    inference_mode_check: bool = Field(
        default=True,
        description="Also build and call the judged arm under torch.inference_mode() on each "
        "timed config's first trial (a frontier must serve there).",
    )
    torch_threads: int | None = Field(default=None, description="CPU intra-op threads.")
    deadline_s: float | None = Field(
        default=None, description="The judge kills itself after this long (parent-independent)."
    )
    time_limit_s: float | None = Field(
        default=None,
        gt=0,
        description="This evaluation's own wall-clock cap, when shorter than the runner's "
        "(None: the runner's); past it the judge is killed and the outcome is TIMEOUT.",
    )
    mode: EvaluationMode = Field(default=EvaluationMode.EVALUATE, description="What to do.")
    recheck_trials: list[TrialSpec] = Field(
        default_factory=list,
        description="Fresh inputs the judged arm must still get right after it was timed.",
    )
    device_peaks: DevicePeaks | None = Field(
        default=None, description="Measured ceilings; times below the roofline are rejected."
    )
    oracle_config_ids: list[str] = Field(
        default_factory=list,
        description="Configs the reference cannot run: checked against the workload's "
        "memory-bounded oracle and reported as feasibility, never timed against a baseline.",
    )
    time_past_failures: bool = Field(
        default=False,
        description="Time the configs the judged arm got right even when it failed others, "
        "and go on after a config fails its re-check: where a variant is correct and fast is "
        "the evidence a dispatch composition reads. The outcome stays INCORRECT, the failing "
        "configs are never timed or credited, and spot-check or integrity failures still end "
        "the evaluation at once.",
    )

    @model_validator(mode="after")
    def _arms_are_consistent(self) -> EvaluationRequest:
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must be unique, got {names}")
        if self.judged_arm not in names:
            raise ValueError(f"judged arm {self.judged_arm!r} is not among the arms {names}")
        return self


class ProfileRow(BaseModel):
    """One operator or kernel of a profiled arm, summed over the profiled calls."""

    name: str = Field(description="Kernel or operator name as the profiler reports it.")
    calls: int = Field(description="Times it ran over the profiled calls.")
    device_us: float = Field(description="Total self time on the device (CPU time on a CPU).")
    share: float = Field(description="Fraction of the profiled device time.")


def share_text(share: float) -> str:
    """A share of the tolerance as a percentage: 0.045%, 98.5%, 105.0%. Cut, never rounded,
    to one decimal from 1% up, so a pass (below 1) never reads as 100%; two significant
    digits below 1%, where a fixed decimal would show an exact-looking 0%."""
    if share < 0.01:
        return f"{share * 100:.2g}%"
    return f"{math.floor(share * 1000) / 10:.1f}%"


class TrialResult(BaseModel):
    """Correctness of one trial on one config."""

    trial: TrialSpec = Field(description="How the inputs were drawn.")
    passed: bool = Field(description="True only with zero failing elements and no problem.")
    failed_elements: int = Field(description="Elements outside the tolerance (or non-finite).")
    total_elements: int = Field(description="Elements compared.")
    max_abs_error: float | None = Field(description="Largest |out - ref| over finite elements.")
    tolerance_used: float | None = Field(
        default=None,
        description="The worst finite element's |out - ref| over what the tolerance allows "
        "it, max(atol, rtol * |ref|): below 1 passes; near 1, a pass a fresh input may undo "
        "(None: nothing compared, or recorded before judges reported it).",
    )
    problem: str | None = Field(
        default=None, description="Why it failed before comparison (shape, dtype, mutation...)."
    )
    reason: RejectReason | None = Field(default=None, description="Cause when it failed.")
    phase: str = Field(default="gate", description="gate, aliasing, spot_check or recheck.")
    call_s: float | None = Field(
        default=None,
        description="Wall seconds of the judged call, the device synchronized before and "
        "after (None: not measured).",
    )
    peak_bytes: float | None = Field(
        default=None,
        description="Device memory the judged call needed at its peak: its inputs plus what it "
        "allocated beyond what was held at its start, weights excluded (None off CUDA).",
    )


class ArmTiming(BaseModel):
    """Raw timing of one arm on one config."""

    arm: str = Field(description="Arm name.")
    calls_per_block: int = Field(description="Calls timed together per sample.")
    samples_ns: list[float] = Field(description="Per-call time of each block, in order (ns).")
    median_ns: float = Field(description="Median of samples_ns.")
    protocol: str = Field(
        default="", description="How its blocks were timed: 'batched-N' or 'per-call[+l2flush]'."
    )


class RatioStats(BaseModel):
    """Paired speed ratio other_time / arm_time (>1: the arm is faster) with a bootstrap CI."""

    arm: str = Field(description="The arm being judged (usually 'candidate').")
    other: str = Field(description="The arm it is compared with.")
    median: float = Field(description="exp(median of paired per-round log ratios).")
    ci_low: float = Field(description="Lower end of the 95% bootstrap CI.")
    ci_high: float = Field(description="Upper end of the 95% bootstrap CI.")
    rounds: int = Field(description="Paired rounds behind the estimate.")


class ConfigResult(BaseModel):
    """Everything measured on one configuration."""

    config_id: str = Field(description="Configuration id.")
    trials: list[TrialResult] = Field(default_factory=list, description="Correctness trials.")
    timings: list[ArmTiming] = Field(default_factory=list, description="Per-arm raw timing.")
    ratios: list[RatioStats] = Field(default_factory=list, description="Paired comparisons.")
    rounds: int = Field(default=0, description="ABBA rounds timed.")
    protocol: str = Field(default="", description="'batched' or 'per-call' (+ L2 flush).")
    floor_ns: float | None = Field(default=None, description="Roofline floor of one call.")
    host_over_device: float | None = Field(
        default=None, description="Median host/event time ratio of the judged arm (CUDA)."
    )
    feasibility: dict[str, float] | None = Field(
        default=None, description="Oracle configs: peak memory bytes, latency s, elements."
    )
    settings_read: list[str] | None = Field(
        default=None,
        description="The tunables the judged arm's code read on this config, as its own "
        "recorder reports them after the trials (the failing one included; None: not "
        "reported). Advisory: it narrows which configs a later screen of a change measures "
        "and which headroom ideas a repair of a miss there may draw, nothing else.",
    )
    phase_s: dict[str, float] = Field(
        default_factory=dict,
        description="Wall seconds per judging phase of this config (harness.stage_clock."
        "JudgePhase values: building, trials, warm-up, timed rounds, re-check).",
    )

    @property
    def correct(self) -> bool:
        """All trials passed (and there was at least one)."""
        return bool(self.trials) and all(t.passed for t in self.trials)

    @property
    def tolerance_used(self) -> float | None:
        """The largest share of its tolerance any element used over the trials (None: no
        trial reported one)."""
        shares = [t.tolerance_used for t in self.trials if t.tolerance_used is not None]
        return max(shares) if shares else None


class EvaluationResult(BaseModel):
    """The judge's structured answer; anything missing or malformed is a failed experiment."""

    evaluation_id: str = Field(description="Echo of the request id.")
    nonce: str = Field(description="Echo of the secret the parent passed on stdin.")
    outcome: Outcome = Field(description="What happened.")
    message: str = Field(default="", description="Human explanation, traceback tail on errors.")
    isolation: str | None = Field(
        default=None,
        description="How the judge was kept from its launcher: 'pid-namespace' (it could see "
        "and signal nothing outside) or 'subreaper' (its own session under a sub-reaper).",
    )
    configs: list[ConfigResult] = Field(default_factory=list, description="Per-config results.")
    aggregates: list[RatioStats] = Field(
        default_factory=list, description="Weighted geometric mean over configs of each ratio."
    )
    fingerprint: dict[str, object] = Field(
        default_factory=dict, description="Environment the numbers were measured in."
    )
    protocol: str = Field(default="", description="Timing protocol that produced the rows.")
    timer_resolution_ns: float | None = Field(default=None, description="Measured timer tick.")
    wall_s: float = Field(default=0.0, description="Wall time of the judge process.")
    phase_s: dict[str, float] = Field(
        default_factory=dict,
        description="Wall seconds of the judge process outside every config, by phase "
        "(harness.stage_clock.ProcessPhase: interpreter start, opening, loading the arms).",
    )
    reason: RejectReason | None = Field(default=None, description="Why it was rejected.")
    tainted: bool = Field(
        default=False, description="Contention or throttling seen: never used for promotion."
    )
    taint: list[str] = Field(default_factory=list, description="What tainted the measurement.")
    environment: dict[str, object] = Field(
        default_factory=dict, description="Clocks, load and processes before and after timing."
    )
    profile: list[ProfileRow] = Field(
        default_factory=list, description="Top operators by device time (mode=profile)."
    )
    qualification: dict[str, object] | None = Field(
        default=None, description="Measured device properties (mode=qualify)."
    )

    @property
    def judge_failed(self) -> bool:
        """The judge's own step failed (no result, tainted): infrastructure that says nothing
        of the candidate. A rejection timed under contention is tainted too, but it stays a
        rejection."""
        return self.outcome is Outcome.NO_RESULT and self.tainted

    def config(self, config_id: str) -> ConfigResult | None:
        """The result for one config, if measured."""
        return next((c for c in self.configs if c.config_id == config_id), None)

    def aggregate(self, other: str) -> RatioStats | None:
        """The aggregate ratio of the judged arm against another arm."""
        return next((a for a in self.aggregates if a.other == other), None)
