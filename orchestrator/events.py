"""Typed payloads of the orchestrator's ledger events and verdict details."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernels.workload import TrialSpec
from ledger import EventRecord


class EventKind(enum.StrEnum):
    """Kinds of generic ledger events the orchestrator writes."""

    RUN_STARTED = "run_started"
    IDEA_REGISTERED = "idea_registered"
    STEP_STARTED = "step_started"
    EXPANSION_FAILED = "expansion_failed"
    STATIC_CHECKED = "static_checked"
    EVALUATION = "evaluation"
    RUN_STOPPED = "run_stopped"
    DEVICE_QUALIFIED = "device_qualified"
    DEVICE_NO_RUN = "device_no_run"
    NOISE_FLOOR = "noise_floor"
    LLM_CALL = "llm_call"
    RESEARCH = "research"
    INSPECTION = "inspection"
    VERIFICATION = "verification"
    FRONTIER_DEMOTED = "frontier_demoted"
    LESSON = "lesson"
    FEASIBILITY = "feasibility"
    INHERITED_CHECK = "inherited_check"


class Stage(enum.StrEnum):
    """Pipeline stages of one candidate."""

    STATIC = "static"
    SCREEN = "screen"
    SWEEP = "sweep"


class Payload(BaseModel):
    """Base of event payloads: frozen, serialized into the ledger as JSON."""

    model_config = ConfigDict(frozen=True)

    def to_event(self, kind: EventKind) -> EventRecord:
        """The ledger record carrying this payload."""
        return EventRecord(kind=kind.value, payload=self.model_dump(mode="json"))


class RunStarted(Payload):
    """A run (or a resumption of it) began with these choices."""

    workload: str = Field(description="Workload name.")
    device: str = Field(description="Resolved device ('cpu', 'cuda').")
    config_set: str = Field(description="Config set searched.")
    config_ids: list[str] = Field(description="Configs of the full sweep.")
    screening_ids: list[str] = Field(description="Configs of the screen.")
    baseline: str = Field(description="What the speed baseline is, exactly.")
    seed: int = Field(description="Seed of the search's random choices.")
    settings: dict[str, Any] = Field(description="The full settings of the invocation.")
    resumed: bool = Field(description="True when the run dir already held a ledger.")


class IdeaRegistered(Payload):
    """An idea from the workload's starter library, as it was when the run began."""

    idea_id: str = Field(description="Stable idea id (the library slug).")
    text: str = Field(description="The idea in words.")
    source: str = Field(description="'library', 'researcher' or 'inspector'.")
    quality: float = Field(description="Rubric score q.")
    uncertainty: float = Field(description="Rubric uncertainty H.")
    targets: dict[str, str | None] = Field(description="Tunable settings the idea asks for.")
    devices: list[str] = Field(description="Device kinds where the idea can matter.")
    headroom: bool = Field(
        default=False,
        description="It trades speed for numerical headroom: a repair step may draw it "
        "(False in ledgers written before repairs existed).",
    )


class AgentRun(Payload):
    """The researcher or the inspector ran (ideas it proposed are idea_registered events)."""

    step: int = Field(description="Next step number when it ran.")
    last_message_seq: int = Field(description="Newest message it had seen (LITERATURE).")
    ideas: int = Field(description="Ideas registered.")
    error: str | None = Field(default=None, description="Why it produced nothing.")


class Verification(Payload):
    """The verifier's attack on a new frontier: a fresh replication with two controls."""

    sha: str = Field(description="The frontier candidate checked.")
    against: str = Field(description="The frontier it had replaced.")
    verdict: str = Field(description="confirmed, refuted or inconclusive.")
    reason: str = Field(description="Why, with the numbers.")
    replication: dict[str, float] | None = Field(description="Candidate vs previous frontier.")
    aa_control: dict[str, float] | None = Field(description="Candidate vs identical copy.")
    positive_control: dict[str, float] | None = Field(description="Candidate vs planted slowdown.")
    evaluation_outcome: str = Field(description="Judge outcome of the verification run.")


class LLMCallEvent(Payload):
    """One provider call: template hash, model, tokens, cost and wall time."""

    step: int = Field(description="Step it belongs to.")
    role: str = Field(description="expander, researcher or inspector.")
    backend: str = Field(description="anthropic, openai or replay.")
    model: str = Field(description="Model asked.")
    template_hash: str = Field(description="sha256 of the prompt template.")
    input_tokens: int = Field(description="Prompt tokens billed (prompt cache excluded).")
    output_tokens: int = Field(description="Completion tokens billed.")
    cache_read_tokens: int = Field(default=0, description="Prompt tokens read from the cache.")
    cache_write_tokens: int = Field(default=0, description="Prompt tokens written to the cache.")
    usd: float = Field(description="Cost of the call.")
    wall_s: float = Field(description="Wall time.")
    outcome: str = Field(description="'ok' or 'error'.")
    error: str | None = Field(default=None, description="Provider error after retries.")


class FrontierDemoted(Payload):
    """A frontier whose claim did not replicate; the previous frontier stands again."""

    sha: str = Field(description="The demoted candidate.")
    reason: str = Field(description="Why.")


class InheritedCheck(Payload):
    """A child failed configs its change cannot reach (it runs its parent's code there): the
    parent judged on the very inputs that failed."""

    step: int = Field(description="The child's step.")
    child_sha: str = Field(description="The failed child.")
    parent_sha: str = Field(description="Its parent, judged here.")
    configs: list[str] = Field(
        description="The failed configs the child's change cannot reach (a recheck: the "
        "configs the frontier failed, or every one it was judged on when it passed)."
    )
    trials: list[TrialSpec] = Field(description="The inputs that failed there, as drawn.")
    outcome: str = Field(description="Harness outcome of the parent's judge run.")
    parent_failed: bool = Field(
        description="The parent failed them too (wrong there, or its code raised, did not "
        "compile, returned nothing or was refused on them): the failure is its."
    )
    message: str = Field(description="Harness message of the parent's run.")
    recheck_of: list[int] = Field(
        default_factory=list,
        description="Empty: a child's inherited check. Otherwise parent_sha is the frontier, "
        "judged on the inputs that demoted earlier frontiers at these steps' checks (a "
        "frontier that stands again, or a later one, may run the same failing code).",
    )
    infrastructure: bool = Field(
        default=False,
        description="The judge's run said nothing of the judged candidate (no run, the "
        "judge's own step failed, or it timed out): the check runs again, at most "
        "orchestrator.state.CHECK_ATTEMPTS times in all, and is never held against it.",
    )


class StepStarted(Payload):
    """The samplers chose a parent and an idea for a step."""

    step: int = Field(description="Step number (1-based; 0 is the seed).")
    parent_sha: str = Field(description="Declared parent commit.")
    idea_id: str = Field(description="Idea to implement.")
    parent_theta: float | None = Field(description="Candidate sampler draw (None if forced).")
    idea_theta: float = Field(description="Idea sampler draw (posterior mean if forced).")
    idea_forced: bool = Field(description="True when a fresh human idea jumped the queue.")
    parent_forced: bool = Field(description="True when a REDIRECT chose the parent.")
    composition: dict[str, Any] | None = Field(
        default=None,
        description="A composition step's plan (search.DispatchPlan as JSON): the parent is "
        "the frontier and the composer builds the dispatching candidate; None: an expansion.",
    )
    repair_of: str | None = Field(
        default=None,
        description="A repair step's starting point: the candidate that missed the tolerance "
        "narrowly, whose code the expander changes with a headroom idea; the step's declared "
        "parent is that candidate's parent, so the repair is judged against measured code. "
        "None: the expansion starts from the parent.",
    )


class ExpansionFailed(Payload):
    """The expander produced no commit for a step."""

    step: int = Field(description="Step number.")
    parent_sha: str = Field(description="Declared parent commit.")
    idea_id: str = Field(description="Idea that was tried.")
    outcome: str = Field(description="Expander outcome (an ExpansionOutcome value).")
    message: str = Field(description="Why nothing was committed.")
    infrastructure: bool = Field(
        default=False,
        description="No change, provider error, malformed replies...: never scored against "
        "the idea or the parent's clade.",
    )
    retries_left: int = Field(
        default=0, description="Expansions of this step still to try (0: the step is skipped)."
    )


class LessonNoted(Payload):
    """A lesson an agent noted during an expansion (the run's lessons log)."""

    step: int = Field(description="Step of the expansion.")
    parent_sha: str = Field(description="Parent it worked on.")
    idea_id: str = Field(description="Idea it implemented.")
    agent: str = Field(description="Which agent noted it.")
    text: str = Field(description="The lesson.")


class StaticChecked(Payload):
    """Static checks of a candidate's source."""

    step: int = Field(description="Step number.")
    sha: str = Field(description="Candidate commit.")
    passed: bool = Field(description="No findings.")
    findings: list[dict[str, Any]] = Field(description="Each finding: rule, file, line, message.")


class ConfigSummary(BaseModel):
    """Per-config digest of an evaluation (raw samples live in measurement rows)."""

    model_config = ConfigDict(frozen=True)

    config_id: str = Field(description="Config id.")
    correct: bool = Field(description="All trials passed.")
    trials: int = Field(description="Trials run.")
    failed_elements: int = Field(description="Failing elements over all trials.")
    total_elements: int = Field(description="Elements compared over all trials.")
    max_abs_error: float | None = Field(description="Largest |out - ref| seen.")
    tolerance_used: float | None = Field(
        default=None,
        description="The largest share of its tolerance any element used, over all trials "
        "(below 1 passes; near 1, a pass a fresh input may undo; None: not reported).",
    )
    problem: str | None = Field(description="First non-numeric problem (shape, mutation...).")
    ratios: list[dict[str, Any]] = Field(description="Paired ratios of the judged arm.")
    settings_read: list[str] | None = Field(
        default=None,
        description="Tunables the judged candidate's code read here, by its own recorder "
        "(None: not reported, or recorded before runs kept them).",
    )
    failed_trial: TrialSpec | None = Field(
        default=None,
        description="How the inputs of the first failing trial were drawn (None: none failed, "
        "or recorded before runs kept it): the failure can be reproduced on any arm.",
    )


class EvaluationSummary(Payload):
    """One judge run of one candidate at one stage."""

    step: int = Field(description="Step number.")
    sha: str = Field(description="Candidate commit.")
    evaluation_id: str = Field(description="Evaluation id (keys the measurement rows).")
    stage: Stage = Field(description="screen or sweep.")
    outcome: str = Field(description="Harness outcome.")
    message: str = Field(description="Harness message (traceback tail on errors).")
    wall_s: float = Field(description="Wall time of the judge process.")
    protocol: str = Field(description="Timing protocol.")
    fingerprint_id: str | None = Field(description="Environment fingerprint id.")
    timer_resolution_ns: float | None = Field(description="Measured timer tick.")
    arms: dict[str, str] = Field(description="Arm name -> commit sha ('reference' for baseline).")
    configs: list[ConfigSummary] = Field(description="Per-config digest.")
    aggregates: list[dict[str, Any]] = Field(description="Geometric-mean ratios over configs.")
    trial_seeds: list[int] = Field(description="Seeds of the correctness trials (salt included).")
    taint: list[str] = Field(
        default_factory=list, description="Contention or throttling seen while timed (if any)."
    )
    device_slot: str | None = Field(
        default=None,
        description="The device that measured every arm of it ('cpu', 'cpu:N', 'cuda:N'; None: "
        "the run's one device, recorded before runs had several).",
    )
    superseded_by: str | None = Field(
        default=None,
        description="The frontier that replaced the one this sweep measured against while it "
        "ran: the evidence is kept, no verdict is drawn from it, the step measures again.",
    )


class FeasibilityChecked(Payload):
    """A frontier judged on the config set's feasibility configs (correctness only)."""

    sha: str = Field(description="The frontier checked.")
    configs: list[str] = Field(description="Feasibility configs it was judged on.")
    passed: bool = Field(description="Correct on every one of them.")
    outcome: str = Field(description="Harness outcome.")
    message: str = Field(
        description="Harness message (why it failed, if it did): its first line and its last "
        "lines, where the exception is."
    )
    infrastructure: bool = Field(
        default=False,
        description="The judge's own work failed (e.g. its poison fill ran out of memory): "
        "says nothing of the frontier, which stays unchecked and is checked again next stop.",
    )
    wall_s: float = Field(description="Wall time of the judge process.")
    elements: int = Field(description="Output elements compared, all trials.")
    failed_elements: int = Field(description="Of which outside the tolerance.")
    tolerance_used: float | None = Field(
        default=None,
        description="The largest share of its tolerance any element used (None: nothing "
        "compared, or recorded before judges reported it).",
    )


class RunStopped(Payload):
    """A run invocation ended cleanly."""

    reason: str = Field(description="Why it stopped (budget, candidates, interrupt).")
    steps_this_invocation: int = Field(description="Steps completed by this invocation.")
    elapsed_s: float = Field(description="Wall time of this invocation.")


class VerdictDetails(BaseModel):
    """What a verdict was decided on (stored in the verdict record's details)."""

    model_config = ConfigDict(frozen=True)

    step: int = Field(description="Step number.")
    success: bool = Field(description="Correct and measurably faster than its parent.")
    vs_parent: dict[str, float] | None = Field(default=None, description="Ratio vs parent.")
    vs_frontier: dict[str, float] | None = Field(default=None, description="Ratio vs frontier.")
    vs_baseline: dict[str, float] | None = Field(default=None, description="Ratio vs baseline.")
    frontier_before: str | None = Field(default=None, description="Frontier at decision time.")
    per_config_speedup: dict[str, float] = Field(
        default_factory=dict, description="Uncapped per-config speedup over the baseline."
    )
    per_config_tolerance_used: dict[str, float] = Field(
        default_factory=dict,
        description="Per config, the largest share of its tolerance any element used over "
        "the trials (below 1 passes; near 1, a pass a fresh input may undo).",
    )
    capped_configs: list[str] = Field(default_factory=list, description="Where a cap bound.")
    objective_kind: str | None = Field(default=None, description="Aggregate used.")
    noise_floor: float | None = Field(default=None, description="Floor used by the rule.")
    taint: list[str] = Field(default_factory=list, description="Contention seen while timed.")
    reject_reason: str | None = Field(default=None, description="The judge's rejection cause.")
    scope: list[str] | None = Field(
        default=None,
        description="The configs the verdict read, when the candidate's code differs from the "
        "frontier's only there (the rest run the same code); None: all of them.",
    )
    scope_vs_parent: dict[str, float] | None = Field(
        default=None, description="Ratio vs parent over its scope, when the verdict was scoped."
    )
    scope_vs_frontier: dict[str, float] | None = Field(
        default=None, description="Ratio vs frontier over the scope the verdict read."
    )
