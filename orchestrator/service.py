"""Service functions behind the CLI: one per command, domain errors as RatchetError."""

from __future__ import annotations

import getpass
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

import git

from harness.lock import DeviceBusyError
from harness.models import DeviceSlot
from harness.runner import RunnerSettings
from kernels.workload import ConfigSet, Workload
from ledger import (
    CandidateRecord,
    ExpectedHead,
    Ledger,
    LedgerError,
    LedgerNotFoundError,
    Record,
    VerifyReport,
)
from orchestrator.cluster import ClusterError, cluster_kind, join_cluster, remote_judgings
from orchestrator.devices import DeviceSpecError, resolve_slots
from orchestrator.evaluation import Judging
from orchestrator.events import EventKind, IdeaRegistered, RunStarted
from orchestrator.expanders import make_expander
from orchestrator.expansion_context import context_builder
from orchestrator.export import ExportManifest, checkout_candidate, export_candidate
from orchestrator.judge_file import (
    JudgeFileError,
    JudgeReport,
    judge_module,
    resolve_configs,
    slow_set_warning,
    temporary_judging,
)
from orchestrator.ledger_location import LedgerLocationError, resolve_ledger
from orchestrator.ledger_location import chain_fix as location_chain_fix
from orchestrator.llm_setup import LLMSetupError, make_backend, make_session, pricing
from orchestrator.loop import RunSummary, SeedFailedError, StopSignal, run_loop
from orchestrator.messages import MessageError, MessageKind
from orchestrator.run_dir import RunDirError, hold_run_dir, open_for_run
from orchestrator.settings import DeviceChoice, Settings
from orchestrator.stages import LoopContext, Reporter
from orchestrator.state import SearchState, derive_state
from orchestrator.status import CANDIDATES_SHOWN, StatusReport, build_status
from orchestrator.steering import build_message, run_code
from orchestrator.trust import DeviceUntrustedError, slot_judgings, trust_devices
from orchestrator.workloads import WorkloadLoadError, load_workload
from orchestrator.workspace import RunPaths, init_repository, open_repository
from workers.ray_cluster import RayCluster

CODE_ROOT = Path(__file__).resolve().parent.parent


class RatchetError(Exception):
    """A user-facing failure: the message says what failed, the value, and the fix."""


class PrintReporter:
    """Progress lines on stdout with the elapsed time."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def line(self, text: str) -> None:
        elapsed = time.monotonic() - self._start
        print(f"[{elapsed:7.1f}s] {text}", flush=True)


def resolve_device(choice: DeviceChoice) -> str:
    """'cpu' or 'cuda' for this machine."""
    if choice is DeviceChoice.CPU:
        return "cpu"
    import torch

    available = torch.cuda.is_available()
    if choice is DeviceChoice.CUDA and not available:
        raise RatchetError(
            "--device cuda was asked for but no CUDA device is visible; use --device cpu"
        )
    return "cuda" if available else "cpu"


def _device_slots(device: str, settings: Settings) -> list[DeviceSlot]:
    """The devices --devices names here (none without it: the run's one device)."""
    gpus = 0
    if device == "cuda" and settings.devices is not None:
        import torch

        gpus = torch.cuda.device_count()
    try:
        return resolve_slots(device, settings.devices, gpus)
    except DeviceSpecError as exc:
        raise RatchetError(str(exc)) from exc


def _workload(name: str) -> Workload:
    try:
        return load_workload(name)
    except WorkloadLoadError as exc:
        raise RatchetError(str(exc)) from exc


def _config_set(workload: Workload, settings: Settings, device: str) -> ConfigSet:
    name = settings.config_set or workload.default_config_set[device]
    try:
        return workload.config_set(name)
    except ValueError as exc:
        raise RatchetError(str(exc)) from exc


def _open_existing(run_dir: Path, given: str | None) -> Ledger:
    location = resolve_ledger(run_dir, given)
    try:
        return location.open(create=False)
    except LedgerNotFoundError:
        raise RatchetError(
            f"no Ratchet run in {run_dir} (no ledger at {location.shown}): start one with "
            f"'ratchet run --run-dir {run_dir}'"
        ) from None
    except LedgerLocationError:
        raise
    except LedgerError as exc:
        raise RatchetError(f"cannot open the ledger of {run_dir}: {exc}") from exc


def chain_fix(report: VerifyReport, run_dir: Path) -> str:
    """What to do about a ledger whose chain does not verify."""
    return location_chain_fix(report, resolve_ledger(run_dir, None))


def require_chain(ledger: Ledger, run_dir: Path, refused: str) -> VerifyReport:
    """The cheap chain check before work (incremental from the last verified head); a chain
    that does not verify refuses the command, saying what `refused` would have done."""
    report = ledger.check()
    if not report.ok:
        raise RatchetError(
            f"the ledger of {run_dir} does not verify: {report.problem}. {refused}. Run "
            f"'ratchet ledger verify --run-dir {run_dir}' for the full check. Fix: "
            f"{chain_fix(report, run_dir)}"
        )
    return report


@contextmanager
def open_run_ledger(run_dir: Path, ledger: str | None = None) -> Iterator[Ledger]:
    """The ledger of an existing run (never creates one); `ledger` is the --ledger setting,
    checked against the one the run dir records (ledger_location)."""
    opened = _open_existing(run_dir, ledger)
    try:
        yield opened
    finally:
        opened.close()


def _start_records(
    settings: Settings, workload: Workload, device: str, config_set: ConfigSet, resumed: bool
) -> list[Record]:
    started = RunStarted(
        workload=workload.name,
        device=device,
        config_set=config_set.name,
        config_ids=list(config_set.config_ids),
        screening_ids=list(config_set.screening_ids),
        baseline=workload.baseline,
        seed=settings.seed,
        settings=settings.model_dump(mode="json"),
        resumed=resumed,
    )
    records: list[Record] = [started.to_event(EventKind.RUN_STARTED)]
    if not resumed:
        for idea in workload.load_ideas():
            registered = IdeaRegistered(
                idea_id=idea.slug,
                text=idea.text,
                source="library",
                quality=idea.quality,
                uncertainty=idea.uncertainty,
                targets=idea.targets,
                devices=list(idea.devices),
            )
            records.append(registered.to_event(EventKind.IDEA_REGISTERED))
    return records


def _check_compatible(
    state: SearchState, workload: Workload, device: str, config_set: ConfigSet
) -> None:
    run = state.run
    assert run is not None
    mine = (workload.name, device, config_set.name)
    theirs = (run.workload, run.device, run.config_set)
    if mine != theirs:
        raise RatchetError(
            f"this run dir was started with workload/device/config set {theirs}, not {mine}; "
            "pass the same options to resume it, or use a new --run-dir"
        )


@dataclass
class _Prepared:
    ctx: LoopContext
    resumed: bool


def _open_run(
    settings: Settings, workload: Workload, device: str, config_set: ConfigSet
) -> tuple[RunPaths, Ledger, git.Repo, bool]:
    """The run dir's ledger and repository, created (seed committed) on first use."""
    paths = RunPaths(settings.run_dir.resolve())
    try:
        ledger, state = open_for_run(paths, settings.ledger)
    except RunDirError as exc:
        raise RatchetError(str(exc)) from exc
    resumed = state.run is not None
    records = _start_records(settings, workload, device, config_set, resumed)
    if resumed:
        try:
            require_chain(ledger, paths.root, "Nothing was run")
        except RatchetError:
            ledger.close()
            raise
        _check_compatible(state, workload, device, config_set)
        ledger.append_many(records)
        return paths, ledger, open_repository(paths), True
    repo = init_repository(paths, workload)
    seed = repo.head.commit
    seed_record = CandidateRecord(
        sha=seed.hexsha,
        tree_sha=seed.tree.hexsha,
        parent_sha=None,
        step=0,
        idea_id=None,
        agent="seed",
        message=str(seed.message),
        prompt_hash=None,
        cost={},
    )
    ledger.append_many([*records, seed_record])
    return paths, ledger, repo, False


def prepare_run(
    settings: Settings, reporter: Reporter, cluster: RayCluster | None = None
) -> _Prepared:
    """Open or create the run dir, record the run's start, wire the loop's context (on the
    devices of a Ray cluster, when one is given)."""
    workload = _workload(settings.workload)
    try:
        backend = make_backend(settings)  # a missing key fails here, before any work
        if backend is not None:
            pricing(settings, backend)
    except LLMSetupError as exc:
        raise RatchetError(str(exc)) from exc
    try:
        device = (
            resolve_device(settings.device)
            if cluster is None
            else cluster_kind(cluster, settings.device)
        )
    except ClusterError as exc:
        raise RatchetError(str(exc)) from exc
    slots = _device_slots(device, settings)  # checked before anything is written
    config_set = _config_set(workload, settings, device)
    paths, ledger, repo, resumed = _open_run(settings, workload, device, config_set)
    runner = RunnerSettings(
        timeout_s=settings.eval_timeout_s,
        lock_dir=settings.lock_dir,
        code_root=CODE_ROOT,
        compile_cache_dir=settings.compile_cache_dir,
    )
    judging = Judging(
        workload=workload,
        device=device,
        repo=repo,
        evals_dir=paths.evals,
        runner=runner,
        # One intra-op thread on CPU: with two OpenMP threads, any other process on a small
        # machine stalls the spinning barrier and inflates an arm tens of times (seen here).
        torch_threads=settings.torch_threads or (1 if device == "cpu" else None),
        runnable_ids=config_set.runnable_ids or config_set.config_ids,
        notice=reporter.line,  # waits for the device lock are reported as they happen
        workload_spec=settings.workload,
    )
    what = "resuming" if resumed else "starting"
    reporter.line(
        f"{what} run in {paths.root}: workload {workload.name}, device {device}, "
        f"configs {config_set.name} ({', '.join(config_set.config_ids)}), "
        f"expander {settings.expander}, budget {settings.minutes:g} min"
        + (f" / {settings.max_candidates} candidates" if settings.max_candidates else "")
    )
    try:
        judgings = (
            slot_judgings(judging, slots)
            if cluster is None
            else remote_judgings(cluster, judging, settings)
        )
        workers = trust_devices(ledger, judgings, settings, config_set, reporter)
    except (DeviceUntrustedError, ClusterError) as exc:
        raise RatchetError(str(exc)) from exc
    several = len(workers) > 1 or judgings[0].runner.slot is not None
    judging = workers[0].judging
    session = make_session(settings, backend, ledger, paths.root) if backend else None
    ctx = LoopContext(
        # Parents are banded by the widest floor: no device's noise passes for speed.
        noise_floor=max(worker.noise_floor for worker in workers),
        workers=tuple(workers) if several else (),
        settings=settings,
        workload=workload,
        device=device,
        config_set=config_set,
        paths=paths,
        ledger=ledger,
        repo=repo,
        expander=make_expander(settings, judging, session, config_set),
        judging=judging,
        reporter=reporter,
        llm=session,
    )
    if session is not None:
        ctx = replace(ctx, context_for=context_builder(ctx))
    elif cluster is not None:
        ctx = replace(ctx, remote_expand=cluster.expand)  # the offline operator, as Ray tasks
    return _Prepared(ctx=ctx, resumed=resumed)


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
    return _workload(str(state.run.settings.get("workload") or state.run.workload))


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
    workload = _workload(settings.workload)
    device = resolve_device(settings.device)
    try:
        config_ids = resolve_configs(workload, configs, device)
    except JudgeFileError as exc:
        raise RatchetError(str(exc)) from exc
    runner = RunnerSettings(
        timeout_s=settings.eval_timeout_s,
        lock_dir=settings.lock_dir,
        code_root=CODE_ROOT,
        compile_cache_dir=settings.compile_cache_dir,
    )
    judging, scratch = temporary_judging(workload, device, runner, settings.workload)
    warning = slow_set_warning(judging, config_ids)
    if warning and progress:
        progress("warning: " + warning)
    with scratch:
        try:
            return judge_module(path.resolve(), workload, judging, config_ids, progress)
        except JudgeFileError as exc:
            raise RatchetError(str(exc)) from exc
