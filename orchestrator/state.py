"""Search state derived from the ledger alone, so a restarted run resumes exactly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.expander import ExpansionOutcome
from harness.models import Outcome
from kernels.workload import TrialSpec
from ledger import EventRecord, Ledger, StoredEvent, StoredMessage
from orchestrator.events import (
    EvaluationSummary,
    EventKind,
    ExpansionFailed,
    IdeaRegistered,
    InheritedCheck,
    LessonNoted,
    RunStarted,
    Stage,
    StaticChecked,
    StepStarted,
)
from orchestrator.idea_credit import credit_composed_parts
from orchestrator.messages import MessageKind
from search import IdeaArm, LineageNode, NodeOutcome, Verdict

EXPANDABLE = frozenset({Verdict.PROMOTED, Verdict.REJECTED, Verdict.INCONCLUSIVE})
# Judge runs of one inherited check or recheck whose outcome said nothing of the candidate
# (infrastructure) before its inputs count as checked: a frontier must not stand unchecked
# on a flaky run, nor the loop retry a device that never answers.
CHECK_ATTEMPTS = 2
# Inputs that demoted frontiers, judged in every later screen and sweep besides the fresh ones:
# the newest this many (each costs one more trial per config judged).
REGRESSION_TRIALS = 4


@dataclass
class CandidateView:
    """A candidate with its verdict, as the samplers and the CLI see it."""

    sha: str
    tree_sha: str
    parent_sha: str | None
    step: int
    idea_id: str | None
    agent: str
    message: str
    verdict: Verdict | None = None
    reason: str = ""
    verdict_stage: str | None = None
    success: bool = False
    objective: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def tainted(self) -> bool:
        """Its verdict came from a sweep measured under contention: nothing was learnt."""
        return bool(self.details.get("taint")) and not self.success

    @property
    def timed_out(self) -> bool:
        """Its judge ran out of time (the stage's budget share, or the runner's cap): an
        infrastructure outcome that says nothing of the candidate, its idea or its clade
        (product.md). Runs 10 and 12 on the H200 charged split-fp32-fused-operands with two
        screens cut at 78 s while Triton still compiled."""
        return (
            self.verdict is Verdict.FAILED_RUN
            and self.details.get("reject_reason") == Outcome.TIMEOUT.value
        )

    @property
    def expandable(self) -> bool:
        """Correct and fully measured: it may be chosen as a parent."""
        return self.verdict in EXPANDABLE and self.verdict_stage == Stage.SWEEP


@dataclass
class IdeaView:
    """An idea arm with its outcomes so far."""

    idea_id: str
    text: str
    source: str
    quality: float
    uncertainty: float
    targets: dict[str, str | None]
    devices: list[str]
    order: int
    author: str = "library"
    headroom: bool = False
    retracted: bool = False
    successes: int = 0
    failures: int = 0

    @property
    def trials(self) -> int:
        """Experiments that used the idea."""
        return self.successes + self.failures


@dataclass
class StepView:
    """Where one step of the pipeline stands."""

    started: StepStarted
    sha: str | None = None
    expansion_failed: ExpansionFailed | None = None
    expansion_attempts: int = 0
    static: StaticChecked | None = None
    screen: EvaluationSummary | None = None
    sweep: EvaluationSummary | None = None
    tainted_sweeps: int = 0
    timed_out_screens: int = 0
    superseded_sweeps: int = 0
    verdict: Verdict | None = None

    @property
    def closed(self) -> bool:
        """Nothing left to do for this step (an infrastructure failure with retries left
        leaves it open: the expansion runs again)."""
        failed = self.expansion_failed
        if failed is not None and self.sha is None:
            return not (infrastructure_failure(failed) and failed.retries_left > 0)
        return self.verdict is not None


@dataclass
class Redirect:
    """A REDIRECT in force: config focus for the screen and/or a forced parent."""

    configs: list[str] | None
    parent: str | None
    until_step: int


@dataclass
class SearchState:
    """Everything the loop decides from; rebuilt from the ledger at every step."""

    run: RunStarted | None = None
    candidates: dict[str, CandidateView] = field(default_factory=dict)
    ideas: dict[str, IdeaView] = field(default_factory=dict)
    steps: dict[int, StepView] = field(default_factory=dict)
    frontier_sha: str | None = None
    constraint_messages: dict[int, str] = field(default_factory=dict)
    retracted: dict[int, int] = field(default_factory=dict)
    config_weights: dict[str, float] = field(default_factory=dict)
    redirect: Redirect | None = None
    literature: list[str] = field(default_factory=list)
    literature_log: list[tuple[int, str]] = field(default_factory=list)
    seed_sha: str | None = None
    qualification: dict[str, Any] | None = None
    noise_floors: dict[str, dict[str, Any]] = field(default_factory=dict)
    demoted: set[str] = field(default_factory=set)
    verifications: dict[str, str] = field(default_factory=dict)
    feasibility: dict[str, bool] = field(default_factory=dict)
    no_change: dict[str, set[str]] = field(default_factory=dict)
    # Steps whose inherited failures were checked; children whose every failure was the
    # parent's (it failed the same inputs with the same code).
    inherited_checked: set[int] = field(default_factory=set)
    inherited_failures: set[str] = field(default_factory=set)
    # A parent that failed its child's inputs -> (the child's step, per config the check
    # covered, the share of its tolerance the child used there: with the parent's code).
    inherited_misses: dict[str, tuple[int, dict[str, float | None]]] = field(default_factory=dict)
    # The inputs that demoted a frontier (its check's step -> the demoted frontier, configs,
    # trials), and per frontier the steps whose inputs it was judged on since.
    demotion_inputs: dict[int, tuple[str, list[str], list[TrialSpec]]] = field(default_factory=dict)
    rechecked: dict[str, set[int]] = field(default_factory=dict)
    # (judged sha, the steps checked) -> its check's runs that ended in infrastructure.
    unanswered_checks: dict[tuple[str, tuple[int, ...]], int] = field(default_factory=dict)
    # sha -> config -> the tunables its code read there (every evaluation's report, failing
    # configs included: a repair reads where its miss failed).
    settings_read: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    lessons: list[LessonNoted] = field(default_factory=list)
    research_seen_seq: int = 0
    research_step: int = 0
    inspected: bool = False
    latest_message_seq: int = 0
    llm_usd: float = 0.0
    llm_calls: int = 0

    @property
    def constraints(self) -> list[str]:
        """CONSTRAINTs in force (retracted ones left out)."""
        return list(self.constraint_messages.values())

    def regression_trials(self) -> tuple[TrialSpec, ...]:
        """The inputs that demoted frontiers, newest first, each once (at most
        REGRESSION_TRIALS): a candidate carrying code known to fail them fails its screen or
        sweep, where fresh inputs alone miss it one time in many (run 20 promoted such
        config-6 code again after three demotions)."""
        kept: dict[str, TrialSpec] = {}
        for step in sorted(self.demotion_inputs, reverse=True):
            for trial in self.demotion_inputs[step][2]:
                kept.setdefault(trial.model_dump_json(), trial)
        return tuple(kept.values())[:REGRESSION_TRIALS]

    def pending_verification(self) -> tuple[str, str] | None:
        """(frontier, the frontier it replaced) when the current frontier was never verified."""
        sha = self.frontier_sha
        if sha is None or sha in self.verifications or sha == self.seed_sha:
            return None
        before = self.candidates[sha].details.get("frontier_before")
        return (sha, str(before)) if before else None

    def literature_since_research(self) -> list[str]:
        """LITERATURE messages the researcher has not seen."""
        return [text for seq, text in self.literature_log if seq > self.research_seen_seq]

    def noise_floor(
        self, config_set: str, fingerprint_id: str | None = None, slot: str | None = None
    ) -> float | None:
        """The calibrated floor of a config set (on this fingerprint, when one is given) and
        device slot (None: the run's one device, without --devices)."""
        entry = self.noise_floors.get(_floor_key(config_set, slot))
        if entry is None or (fingerprint_id and entry["fingerprint_id"] != fingerprint_id):
            return None
        return float(entry["floor"])

    @property
    def open_steps(self) -> list[StepView]:
        """Steps started but not finished, oldest first (several when devices run at once)."""
        return [s for s in self.steps.values() if not s.closed]

    @property
    def open_step(self) -> StepView | None:
        """The newest step started but not finished (a serial run has at most one)."""
        pending = self.open_steps
        return pending[-1] if pending else None

    @property
    def next_step(self) -> int:
        """Number of the next step to start."""
        return max(self.steps, default=0) + 1

    def exhausted_parents(self, device_kind: str) -> set[str]:
        """Candidates on which every idea usable on the device ended with no change: the
        expander has nothing new to make there."""
        ideas = {arm.idea_id for arm in self.idea_arms(device_kind)}
        return {sha for sha, tried in self.no_change.items() if ideas and ideas <= tried}

    def failed_shares(self, sha: str) -> dict[str, float | None]:
        """Per config the candidate failed, the share of its tolerance its worst element used
        (a frontier demoted for failing its child's inputs: the child's, where it ran the
        frontier's code); empty when it failed none."""
        if sha in self.demoted and sha in self.inherited_misses:
            return dict(self.inherited_misses[sha][1])
        cand = self.candidates.get(sha)
        step = self.steps.get(cand.step) if cand is not None else None
        judged = (step.sweep or step.screen) if step is not None else None
        if judged is None:
            return {}
        return {c.config_id: c.tolerance_used for c in judged.configs if not c.correct}

    def ancestry(self, sha: str | None) -> list[str]:
        """The candidate, its parent, and so on to the seed (stops at a candidate the run
        does not know, and never loops)."""
        chain: list[str] = []
        while sha is not None and sha in self.candidates and sha not in chain:
            chain.append(sha)
            sha = self.candidates[sha].parent_sha
        return chain

    def lineage(self, exhausted: frozenset[str] = frozenset()) -> list[LineageNode]:
        """Declared parent graph with outcomes, plus failed expansions as failure leaves
        (infrastructure failures are no leaves: they say nothing about the clade); exhausted
        candidates, and frontiers demoted for failing inputs (a child would run the failing
        code there; a repair starts from a correct ancestor), are not expandable."""
        nodes = []
        failing = self.demoted & set(self.inherited_misses)
        for cand in self.candidates.values():
            if cand.parent_sha is None or cand.verdict is None or cand.tainted or cand.timed_out:
                outcome = NodeOutcome.UNTRIED
            else:
                outcome = NodeOutcome.SUCCESS if cand.success else NodeOutcome.FAILURE
            nodes.append(
                LineageNode(
                    node_id=cand.sha,
                    parent_id=cand.parent_sha,
                    expandable=cand.expandable and cand.sha not in exhausted | failing,
                    outcome=outcome,
                    objective=cand.objective,
                )
            )
        for number, step in self.steps.items():
            failed = step.expansion_failed
            if failed is not None and step.sha is None and not infrastructure_failure(failed):
                nodes.append(
                    LineageNode(
                        node_id=f"expansion-failed-{number}",
                        parent_id=step.started.parent_sha,
                        expandable=False,
                        outcome=NodeOutcome.FAILURE,
                    )
                )
        return nodes

    def idea_arms(self, device_kind: str) -> list[IdeaArm]:
        """Idea arms usable on this device, fresh human ideas marked must-try."""
        return [
            IdeaArm(
                idea_id=idea.idea_id,
                quality=idea.quality,
                uncertainty=idea.uncertainty,
                successes=idea.successes,
                failures=idea.failures,
                must_try=idea.source == "human" and idea.trials == 0,
                order=idea.order,
            )
            for idea in self.ideas.values()
            if device_kind in idea.devices and not idea.retracted
        ]


def _apply_event(state: SearchState, kind: str, payload: dict[str, Any]) -> None:
    if kind == EventKind.RUN_STARTED and state.run is None:
        state.run = RunStarted.model_validate(payload)
    elif kind == EventKind.IDEA_REGISTERED:
        idea = IdeaRegistered.model_validate(payload)
        if idea.idea_id not in state.ideas:
            state.ideas[idea.idea_id] = IdeaView(
                idea_id=idea.idea_id,
                text=idea.text,
                source=idea.source,
                quality=idea.quality,
                uncertainty=idea.uncertainty,
                targets=idea.targets,
                devices=idea.devices,
                order=len(state.ideas),
                headroom=idea.headroom,
            )
    elif kind == EventKind.FRONTIER_DEMOTED:
        state.demoted.add(str(payload["sha"]))
    elif kind == EventKind.VERIFICATION:
        state.verifications[str(payload["sha"])] = str(payload["verdict"])
    elif kind == EventKind.FEASIBILITY:
        if not payload.get("infrastructure"):  # the judge's failure: still unchecked
            state.feasibility[str(payload["sha"])] = bool(payload["passed"])
    elif kind == EventKind.RESEARCH:
        state.research_seen_seq = max(state.research_seen_seq, int(payload["last_message_seq"]))
        state.research_step = int(payload["step"])
    elif kind == EventKind.LESSON:
        state.lessons.append(LessonNoted.model_validate(payload))
    elif kind == EventKind.INSPECTION:
        state.inspected = True
    elif kind == EventKind.LLM_CALL:
        state.llm_usd += float(payload.get("usd", 0.0))
        state.llm_calls += 1
    elif kind == EventKind.DEVICE_QUALIFIED:
        state.qualification = payload
    elif kind == EventKind.NOISE_FLOOR:
        slot = payload.get("device_slot")
        state.noise_floors[_floor_key(str(payload["config_set"]), slot)] = payload
    elif kind == EventKind.STEP_STARTED:
        started = StepStarted.model_validate(payload)
        state.steps[started.step] = StepView(started=started)
    elif kind == EventKind.EXPANSION_FAILED:
        failed = ExpansionFailed.model_validate(payload)
        state.steps[failed.step].expansion_failed = failed
        state.steps[failed.step].expansion_attempts += 1
        if failed.outcome == ExpansionOutcome.NO_CHANGE:
            state.no_change.setdefault(failed.parent_sha, set()).add(failed.idea_id)
        if not infrastructure_failure(failed) and failed.idea_id in state.ideas:
            state.ideas[failed.idea_id].failures += 1
    elif kind == EventKind.STATIC_CHECKED:
        checked = StaticChecked.model_validate(payload)
        if checked.step in state.steps:
            state.steps[checked.step].static = checked
    elif kind == EventKind.INHERITED_CHECK:
        _note_inherited(state, InheritedCheck.model_validate(payload))
    elif kind == EventKind.EVALUATION:
        summary = EvaluationSummary.model_validate(payload)
        _note_settings_read(state, summary)
        if summary.step in state.steps:
            step = state.steps[summary.step]
            if summary.stage is Stage.SCREEN and summary.outcome == Outcome.TIMEOUT.value:
                step.timed_out_screens += 1  # screened again (or judged: the verdict closes it)
            elif summary.stage is Stage.SCREEN:
                step.screen = summary
            elif summary.superseded_by is not None:
                step.superseded_sweeps += 1  # measured against a replaced frontier: again
            elif summary.taint:
                step.tainted_sweeps += 1  # measured again (or judged: the verdict closes it)
            else:
                step.sweep = summary


def _note_inherited(state: SearchState, check: InheritedCheck) -> None:
    if check.infrastructure:
        key = (check.parent_sha, tuple(check.recheck_of) or (check.step,))
        state.unanswered_checks[key] = state.unanswered_checks.get(key, 0) + 1
        if state.unanswered_checks[key] < CHECK_ATTEMPTS:
            return  # due again: it said nothing of the candidate
    if check.recheck_of:
        state.rechecked.setdefault(check.parent_sha, set()).update(check.recheck_of)
    else:
        state.inherited_checked.add(check.step)
    step = state.steps.get(check.step)
    if not check.parent_failed or step is None:
        return
    if not check.recheck_of:
        state.demotion_inputs[check.step] = (
            check.parent_sha,
            list(check.configs),
            list(check.trials),
        )
    failed = {
        c.config_id: c.tolerance_used
        for summary in (step.screen, step.sweep)
        if summary is not None
        for c in summary.configs
        if not c.correct
    }
    if failed and set(failed) <= set(check.configs) and not check.recheck_of:
        state.inherited_failures.add(check.child_sha)
    shares = {config: share for config, share in failed.items() if config in check.configs}
    state.inherited_misses[check.parent_sha] = (check.step, shares)


def _note_settings_read(state: SearchState, summary: EvaluationSummary) -> None:
    for config in summary.configs:
        if config.settings_read is not None:
            by_config = state.settings_read.setdefault(summary.sha, {})
            by_config.setdefault(config.config_id, set()).update(config.settings_read)


def _floor_key(config_set: str, slot: str | None) -> str:
    # A run on one device (no --devices) records no slot and keys floors by config set alone.
    return config_set if slot is None else f"{config_set}@{slot}"


def infrastructure_failure(failed: ExpansionFailed) -> bool:
    """Whether a failed expansion says nothing about its idea or parent (ledgers written before
    the flag existed are read by their outcome)."""
    try:
        return failed.infrastructure or ExpansionOutcome(failed.outcome).infrastructure
    except ValueError:
        return False


def _apply_message(state: SearchState, stored: StoredMessage, human: tuple[float, float]) -> None:
    kind, text, payload = stored.record.kind, stored.record.text, stored.record.payload
    state.latest_message_seq = stored.seq
    retracted = stored.seq in state.retracted
    if retracted and kind != MessageKind.IDEA:
        return  # a retracted message never applied (an idea keeps its history, undrawn)
    if kind == MessageKind.IDEA:
        idea_id = f"human-{stored.seq}"
        state.ideas[idea_id] = IdeaView(
            idea_id=idea_id,
            text=text,
            source="human",
            quality=human[0],
            uncertainty=human[1],
            targets={},
            devices=["cpu", "cuda"],
            order=len(state.ideas),
            author=stored.record.author,
            retracted=retracted,
        )
    elif kind == MessageKind.CONSTRAINT:
        state.constraint_messages[stored.seq] = text
    elif kind == MessageKind.PRIORITY:
        for idea_id, quality in payload.get("ideas", {}).items():
            if idea_id in state.ideas:
                state.ideas[idea_id].quality = float(quality)
        state.config_weights.update({k: float(v) for k, v in payload.get("configs", {}).items()})
    elif kind == MessageKind.LITERATURE:
        state.literature.append(text)
        state.literature_log.append((stored.seq, text))
    elif kind == MessageKind.REDIRECT:
        if payload.get("reset"):
            state.redirect = None
        else:
            state.redirect = Redirect(
                configs=payload.get("configs"),
                parent=payload.get("parent"),
                until_step=state.next_step + int(payload["steps"]) - 1,
            )


def derive_state(ledger: Ledger, human_prior: tuple[float, float] = (0.75, 1.0)) -> SearchState:
    """Replay the ledger in chain order into a SearchState."""
    state = SearchState()
    messages = ledger.messages()
    retractions = [m for m in messages if m.record.kind == MessageKind.RETRACT]
    state.retracted = {int(m.record.payload["seq"]): m.seq for m in retractions}
    replay: list[StoredEvent | StoredMessage] = [*ledger.events(), *messages]
    for stored in sorted(replay, key=lambda item: item.seq):
        if isinstance(stored.record, EventRecord):
            _apply_event(state, stored.record.kind, stored.record.payload)
        else:
            _apply_message(state, stored, human_prior)
    _apply_candidates(state, ledger)
    credit_composed_parts(state)
    return state


def _apply_candidates(state: SearchState, ledger: Ledger) -> None:
    for stored in ledger.candidates():
        rec = stored.record
        state.candidates[rec.sha] = CandidateView(
            sha=rec.sha,
            tree_sha=rec.tree_sha,
            parent_sha=rec.parent_sha,
            step=rec.step,
            idea_id=rec.idea_id,
            agent=rec.agent,
            message=rec.message,
        )
        if rec.parent_sha is None:
            state.seed_sha = rec.sha
        if rec.step in state.steps:
            state.steps[rec.step].sha = rec.sha
    for stored_verdict in ledger.verdicts():
        verdict = stored_verdict.record
        cand = state.candidates[verdict.candidate_sha]
        cand.verdict = Verdict(verdict.verdict)
        cand.verdict_stage = verdict.stage
        cand.success = bool(verdict.details.get("success", False))
        cand.objective = verdict.objective
        cand.reason = verdict.reason
        cand.details = verdict.details
        if cand.step in state.steps:
            state.steps[cand.step].verdict = cand.verdict
        if cand.sha in state.demoted:
            cand.success = False  # its claim did not replicate
        elif cand.verdict is Verdict.PROMOTED:
            state.frontier_sha = cand.sha
        idea = state.ideas.get(cand.idea_id or "")
        inherited = cand.sha in state.inherited_failures  # the parent's failure, not the idea's
        scored = not (cand.tainted or cand.timed_out)  # infrastructure: nothing learnt
        if idea is not None and cand.parent_sha is not None and scored:
            if cand.success:
                idea.successes += 1
            elif not inherited:
                idea.failures += 1
