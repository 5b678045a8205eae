"""Service functions behind the CLI: one per command, domain errors as RatchetError."""

from __future__ import annotations

import getpass
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from harness.lock import DeviceBusyError
from kernels.workload import Workload
from ledger import ExpectedHead, Ledger, VerifyReport
from orchestrator.cluster import ClusterError, join_cluster
from orchestrator.export import ExportManifest, checkout_candidate, export_candidate
from orchestrator.judge_file import (
    JudgeFileError,
    JudgeReport,
    judge_module,
    resolve_configs,
    slow_set_warning,
    temporary_judging,
)
from orchestrator.loop import RunSummary, SeedFailedError, StopSignal, run_loop
from orchestrator.messages import MessageError, MessageKind
from orchestrator.run_dir import RunDirError, hold_run_dir
from orchestrator.run_ledger import RatchetError, chain_fix, open_run_ledger, require_chain
from orchestrator.run_setup import (
    CODE_ROOT,
    PreparedRun,
    prepare_run,
    resolve_device,
    runner_settings,
    workload_named,
)
from orchestrator.settings import Settings
from orchestrator.stages import Reporter
from orchestrator.state import derive_state
from orchestrator.status import CANDIDATES_SHOWN, StatusReport, build_status
from orchestrator.steering import build_message, run_code
from orchestrator.workloads import WorkloadLoadError
from workers.ray_cluster import RayCluster

# Names the CLI, the dashboard and the views reach through this module.
__all__ = [
    "CODE_ROOT",
    "PreparedRun",
    "PrintReporter",
    "RatchetError",
    "chain_fix",
    "checkout",
    "export",
    "inject_message",
    "judge_file",
    "open_run_ledger",
    "prepare_run",
    "require_chain",
    "resolve_device",
    "run_search",
    "run_status",
    "verify_ledger",
]


class PrintReporter:
    """Progress lines on stdout with the elapsed time."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def line(self, text: str) -> None:
        elapsed = time.monotonic() - self._start
        print(f"[{elapsed:7.1f}s] {text}", flush=True)


@contextmanager
def _stop_on_signals(stop: StopSignal, reporter: Reporter) -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True
        reporter.line("stopping after the current stage (signal again to abort now)")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def _cluster(settings: Settings) -> Iterator[RayCluster | None]:
    """The Ray cluster of --ray for the run's length (None without it)."""
    try:
        cluster = join_cluster(settings)
    except ClusterError as exc:
        raise RatchetError(str(exc)) from exc
    try:
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()


def run_search(settings: Settings, reporter: Reporter | None = None) -> RunSummary:
    """`ratchet run`: search until a budget ends; resumable from the run dir at any moment."""
    reporter = reporter or PrintReporter()
    try:
        # The cluster first: a cluster that cannot be joined leaves no run dir behind.
        with _cluster(settings) as cluster, hold_run_dir(settings.run_dir.resolve()):
            prepared = prepare_run(settings, reporter, cluster)
            ctx = prepared.ctx
            stop = StopSignal()
            try:
                with _stop_on_signals(stop, reporter):
                    return run_loop(ctx, stop)
            except (SeedFailedError, DeviceBusyError) as exc:
                raise RatchetError(str(exc)) from exc
            finally:
                ctx.ledger.close()
    except RunDirError as exc:
        raise RatchetError(str(exc)) from exc


def inject_message(
    run_dir: Path, kind: str, text: str, author: str | None = None, ledger_url: str | None = None
) -> int:
    """`ratchet inject`: validate and append a steering message; returns its ledger seq."""
    with open_run_ledger(run_dir, ledger_url) as ledger:
        state = derive_state(ledger)
        if state.run is None:
            raise RatchetError(f"the run in {run_dir} has not started yet; nothing to steer")
        try:
            code = run_code(run_dir, state) if kind.upper() == MessageKind.CONSTRAINT else None
            record = build_message(kind, text, author or _author(), state, ledger.messages(), code)
        except (MessageError, WorkloadLoadError) as exc:
            raise RatchetError(str(exc)) from exc
        return ledger.append(record)


def _author() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "human"


def verify_ledger(
    run_dir: Path, expect_head: str | None = None, ledger_url: str | None = None
) -> VerifyReport:
    """`ratchet ledger verify`: the whole file and hash chain, against the head journal, the
    last verified head and (when given) a head recorded elsewhere, 'SEQ:HASH' or 'HASH'."""
    try:
        expect = None if expect_head is None else ExpectedHead.parse(expect_head)
    except ValueError as exc:
        raise RatchetError(f"--expect-head: {exc}") from None
    with open_run_ledger(run_dir, ledger_url) as ledger:
        return ledger.verify(expect)


def _workload_of_run(ledger: Ledger, run_dir: Path) -> Workload:
    state = derive_state(ledger)
    if state.run is None:
        raise RatchetError(f"the run in {run_dir} has not started yet")
    # A plug-in ('module:factory') is found again by the spec the run was started with.
    return workload_named(str(state.run.settings.get("workload") or state.run.workload))


def run_status(
    run_dir: Path, candidates: int = CANDIDATES_SHOWN, ledger_url: str | None = None
) -> StatusReport:
    """`ratchet status` (`candidates` rows in its candidates table)."""
    with open_run_ledger(run_dir, ledger_url) as ledger:
        chain = ledger.check()  # a broken chain is shown loudly, not refused
        return build_status(run_dir, ledger, chain, candidates)


def checkout(run_dir: Path, sha: str, into: Path | None, ledger_url: str | None = None) -> Path:
    """`ratchet checkout`: a worktree of the candidate's exact commit."""
    with open_run_ledger(run_dir, ledger_url) as ledger:
        return checkout_candidate(run_dir, ledger, sha, into)


def export(
    run_dir: Path,
    sha: str | None,
    out: Path,
    ledger_url: str | None = None,
    unchecked: bool = False,
) -> ExportManifest:
    """`ratchet export`: submission.py + manifest.json of the frontier (or `sha`)."""
    with open_run_ledger(run_dir, ledger_url) as ledger:
        require_chain(ledger, run_dir, "Nothing was exported")
        workload = _workload_of_run(ledger, run_dir)
        return export_candidate(run_dir, ledger, workload, sha, out, unchecked=unchecked)


def judge_file(
    path: Path,
    settings: Settings,
    configs: str | None,
    progress: Callable[[str], None] | None = None,
) -> JudgeReport:
    """`ratchet judge FILE.py`: the full judge on a standalone module, against the reference;
    `progress` gets a warning before a long judge and a line per stage as it runs."""
    workload = workload_named(settings.workload)
    device = resolve_device(settings.device)
    try:
        config_ids = resolve_configs(workload, configs, device)
    except JudgeFileError as exc:
        raise RatchetError(str(exc)) from exc
    runner = runner_settings(settings)
    judging, scratch = temporary_judging(workload, device, runner, settings.workload)
    warning = slow_set_warning(judging, config_ids)
    if warning and progress:
        progress("warning: " + warning)
    with scratch:
        try:
            return judge_module(path.resolve(), workload, judging, config_ids, progress)
        except JudgeFileError as exc:
            raise RatchetError(str(exc)) from exc
