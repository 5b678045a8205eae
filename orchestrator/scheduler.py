"""Several steps at once: expansions on expander threads, judges on one thread per device;
every verdict, and every other ledger write, stays on the calling (orchestrator) thread."""

from __future__ import annotations

import enum
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.expander import ExpansionOutcome, ExpansionResult
from orchestrator.agent_runs import drain_llm_calls
from orchestrator.composition import compose_step
from orchestrator.measured import (
    StagePlan,
    SweepJob,
    plan_screen,
    plan_sweep,
    record_screen,
    record_sweep,
    run_plan,
)
from orchestrator.screen_scope import unreached_result
from orchestrator.stages import (
    DeviceWorker,
    LoopContext,
    expansion_request,
    record_expansion,
    recover_commit,
    static_step,
)
from orchestrator.state import SearchState, StepView
from orchestrator.workspace import branch_commit, step_branch, tree_of

# How long the orchestrator waits for a result before it looks at the ledger again
# (new messages, a stop signal).
POLL_S = 0.5


class TaskKind(enum.StrEnum):
    """What a worker thread is doing for a step."""

    EXPAND = "expand"
    SCREEN = "screen"
    SWEEP = "sweep"


@dataclass(frozen=True)
class Task:
    """One stage of one step, handed to a thread."""

    step: int
    kind: TaskKind
    worker: DeviceWorker | None = None
    plan: StagePlan | None = None
    sweep: SweepJob | None = None


@dataclass(frozen=True)
class Finished:
    """What a thread brought back: the stage's result, or the exception it raised."""

    task: Task
    value: Any = None
    error: BaseException | None = None


def unique_result(state: SearchState, result: ExpansionResult) -> ExpansionResult:
    """An expansion whose commit (or tree) another one, running at the same time, already
    recorded made nothing new: two expanders cannot see each other's work in flight."""
    if result.sha is None:
        return result
    same = [
        c for c in state.candidates.values() if result.sha == c.sha or result.tree_sha == c.tree_sha
    ]
    if not same:
        return result
    message = (
        f"made the same code as step {same[0].step}'s candidate {same[0].sha[:10]}, "
        "expanded at the same time"
    )
    return result.model_copy(
        update={"outcome": ExpansionOutcome.NO_CHANGE, "sha": None, "message": message}
    )


class Dispatcher:
    """Hands the next stage of every open step to a free expander or device, and records
    what comes back on the caller's thread (the only writer of verdicts and the frontier)."""

    def __init__(self, ctx: LoopContext, workers: list[DeviceWorker]) -> None:
        self.ctx = ctx
        self.free_devices = list(workers)
        self.device_count = len(workers)
        self.free_expanders = ctx.settings.expanders
        self.running: dict[int, Task] = {}
        self.results: queue.Queue[Finished] = queue.Queue()

    @property
    def capacity(self) -> int:
        """Open steps worth having: one per device and one per expander, so every device
        judges while every expander expands (1 for one of each: the serial loop)."""
        total = self.device_count + self.ctx.settings.expanders
        return 1 if total == 2 else total

    def can_start(self, state: SearchState) -> bool:
        """A new step would find an expander free and the pipeline not full."""
        return self.free_expanders > 0 and len(state.open_steps) < self.capacity

    def dispatch(self, state: SearchState, only: int | None = None) -> bool:
        """Start the next stage of each open step (or only step `only`) that waits and has a
        free resource; True when a stage ran inline here (the ledger changed: derive the state
        again)."""
        for step in state.open_steps:
            number = step.started.step
            if number in self.running or only not in (None, number):
                continue
            if step.sha is None:
                if step.started.composition is not None:
                    compose_step(self.ctx, state, step)  # no agent: a commit of known parts
                    return True
                if self._recover(state, step):
                    return True
                if self.free_expanders > 0:
                    self._start_expansion(state, step)
            elif step.static is None:
                static_step(self.ctx, state, step)
                return True
            elif self.free_devices:
                self._start_judge(state, step)
        return False

    def _recover(self, state: SearchState, step: StepView) -> bool:
        """Record the commit a killed run left on the step's branch (once: a commit another
        step already recorded is this step's 'nothing new'); False when there is none."""
        existing = branch_commit(self.ctx.repo, step_branch(step.started.step))
        if existing is None:
            return False
        left = ExpansionResult(
            outcome=ExpansionOutcome.COMMITTED,
            agent=self.ctx.expander.name,
            sha=existing,
            tree_sha=tree_of(self.ctx.repo, existing),
        )
        unique = unique_result(state, left)
        if unique.sha is None:
            record_expansion(self.ctx, step, unique)
            return True
        return recover_commit(self.ctx, step.started, self.ctx.expander.name)

    def _start_expansion(self, state: SearchState, step: StepView) -> None:
        request = expansion_request(self.ctx, state, step)
        expand: Callable[[], ExpansionResult] = (
            (lambda: self.ctx.remote_expand(request))  # type: ignore[misc]
            if self.ctx.remote_expand is not None
            else (lambda: self.ctx.expander.expand(request))
        )
        self.free_expanders -= 1
        self._spawn(Task(step=step.started.step, kind=TaskKind.EXPAND), expand)

    def _start_judge(self, state: SearchState, step: StepView) -> None:
        worker = self.free_devices.pop(0)
        ctx = self.ctx.on_worker(worker)
        number, sha = step.started.step, step.sha
        assert sha is not None
        if step.screen is None:
            plan, kind, sweep = plan_screen(ctx, state, step), TaskKind.SCREEN, None
        else:
            sweep = SweepJob(number, sha, step.started.parent_sha)
            plan, kind = plan_sweep(ctx, state, sweep), TaskKind.SWEEP
        task = Task(step=number, kind=kind, worker=worker, plan=plan, sweep=sweep)
        self._spawn(task, lambda: run_plan(ctx, plan))

    def _spawn(self, task: Task, work: Callable[[], Any]) -> None:
        self.running[task.step] = task

        def target() -> None:
            try:
                self.results.put(Finished(task, value=work()))
            except BaseException as exc:  # handed to the orchestrator thread, raised there
                self.results.put(Finished(task, error=exc))

        # Daemon threads: an abort (a second Ctrl-C) must not wait for a judge to end; the
        # judge's supervisor kills it when this process goes.
        name = f"ratchet-{task.kind.value}-{task.step}"
        threading.Thread(target=target, name=name, daemon=True).start()

    def collect(self, state_now: Callable[[], SearchState], timeout_s: float = POLL_S) -> bool:
        """Record every result that has come back (waiting up to timeout_s for the first);
        True when one did. A thread's exception is raised here."""
        try:
            finished = [self.results.get(timeout=timeout_s)]
        except queue.Empty:
            return False
        while True:
            try:
                finished.append(self.results.get_nowait())
            except queue.Empty:
                break
        for done in finished:
            self._record(done, state_now())
        return True

    def _record(self, done: Finished, state: SearchState) -> None:
        task = done.task
        del self.running[task.step]
        if task.worker is not None:
            self.free_devices.append(task.worker)
        else:
            self.free_expanders += 1
        if done.error is not None:
            raise done.error
        if task.kind is TaskKind.EXPAND:
            step = state.steps[task.step]
            result = unreached_result(self.ctx, state, step, unique_result(state, done.value))
            record_expansion(self.ctx, step, result)
            drain_llm_calls(self.ctx, task.step)
            return
        assert task.worker is not None and task.plan is not None
        ctx = self.ctx.on_worker(task.worker)
        if task.kind is TaskKind.SCREEN:
            record_screen(ctx, task.plan, done.value)
        else:
            assert task.sweep is not None
            record_sweep(ctx, state, task.sweep, task.plan, done.value)
