"""Starting or resuming a run: its run dir and start records, and the loop's wired context."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import git

from agents.llm.conversation import LLMBackend
from harness.models import DeviceSlot
from harness.runner import RunnerSettings
from kernels.workload import ConfigSet, Workload
from ledger import CandidateRecord, Ledger, Record
from orchestrator.cluster import ClusterError, cluster_kind, remote_judgings
from orchestrator.devices import DeviceSpecError, resolve_slots
from orchestrator.evaluation import Judging
from orchestrator.events import EventKind, IdeaRegistered, RunStarted
from orchestrator.expanders import make_expander
from orchestrator.expansion_context import context_builder
from orchestrator.llm_setup import LLMSetupError, make_backend, make_session, pricing
from orchestrator.run_dir import RunDirError, open_for_run
from orchestrator.run_ledger import RatchetError, require_chain
from orchestrator.settings import DeviceChoice, Settings
from orchestrator.stages import LoopContext, Reporter
from orchestrator.state import SearchState
from orchestrator.trust import DeviceUntrustedError, slot_judgings, trust_devices
from orchestrator.workloads import WorkloadLoadError, load_workload
from orchestrator.workspace import RunPaths, init_repository, open_repository
from workers.ray_cluster import RayCluster

CODE_ROOT = Path(__file__).resolve().parent.parent


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


def workload_named(name: str) -> Workload:
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


def runner_settings(settings: Settings) -> RunnerSettings:
    """How this machine runs judges for these settings."""
    return RunnerSettings(
        timeout_s=settings.eval_timeout_s,
        lock_dir=settings.lock_dir,
        code_root=CODE_ROOT,
        compile_cache_dir=settings.compile_cache_dir,
    )


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
                headroom=idea.headroom,
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
class PreparedRun:
    """A run ready for the loop: its wired context, and whether it goes on from a ledger."""

    ctx: LoopContext
    resumed: bool


@dataclass(frozen=True)
class OpenedRun:
    """A run dir opened for searching: where, what and on which device."""

    paths: RunPaths
    ledger: Ledger
    repo: git.Repo
    resumed: bool
    workload: Workload
    device: str
    config_set: ConfigSet


def _open_run(
    settings: Settings, workload: Workload, device: str, config_set: ConfigSet
) -> OpenedRun:
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
            _check_compatible(state, workload, device, config_set)
        except RatchetError:
            ledger.close()
            raise
        ledger.append_many(records)
        repo = open_repository(paths)
    else:
        repo = init_repository(paths, workload)
        ledger.append_many([*records, _seed_record(repo)])
    return OpenedRun(paths, ledger, repo, resumed, workload, device, config_set)


def _seed_record(repo: git.Repo) -> CandidateRecord:
    seed = repo.head.commit
    return CandidateRecord(
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


def _llm_backend(settings: Settings) -> LLMBackend | None:
    """The LLM backend the expander will use (None: offline); a missing key fails here,
    before any work."""
    try:
        backend = make_backend(settings)
        if backend is not None:
            pricing(settings, backend)
    except LLMSetupError as exc:
        raise RatchetError(str(exc)) from exc
    return backend


def _run_device(settings: Settings, cluster: RayCluster | None) -> str:
    try:
        if cluster is None:
            return resolve_device(settings.device)
        return cluster_kind(cluster, settings.device)
    except ClusterError as exc:
        raise RatchetError(str(exc)) from exc


def _local_judging(settings: Settings, run: OpenedRun, reporter: Reporter) -> Judging:
    """How the run judges on this host (the devices' judgings derive from it)."""
    return Judging(
        workload=run.workload,
        device=run.device,
        repo=run.repo,
        evals_dir=run.paths.evals,
        runner=runner_settings(settings),
        # One intra-op thread on CPU: with two OpenMP threads, any other process on a small
        # machine stalls the spinning barrier and inflates an arm tens of times (seen here).
        torch_threads=settings.torch_threads or (1 if run.device == "cpu" else None),
        runnable_ids=run.config_set.runnable_ids or run.config_set.config_ids,
        notice=reporter.line,  # waits for the device lock are reported as they happen
        workload_spec=settings.workload,
    )


def _start_line(settings: Settings, run: OpenedRun) -> str:
    config_set = run.config_set
    return (
        f"{'resuming' if run.resumed else 'starting'} run in {run.paths.root}: workload "
        f"{run.workload.name}, device {run.device}, "
        f"configs {config_set.name} ({', '.join(config_set.config_ids)}), "
        f"expander {settings.expander}, budget {settings.minutes:g} min"
        + (f" / {settings.max_candidates} candidates" if settings.max_candidates else "")
    )


def prepare_run(
    settings: Settings, reporter: Reporter, cluster: RayCluster | None = None
) -> PreparedRun:
    """Open or create the run dir, record the run's start, wire the loop's context (on the
    devices of a Ray cluster, when one is given)."""
    workload = workload_named(settings.workload)
    backend = _llm_backend(settings)
    device = _run_device(settings, cluster)
    slots = _device_slots(device, settings)  # checked before anything is written
    config_set = _config_set(workload, settings, device)
    run = _open_run(settings, workload, device, config_set)
    judging = _local_judging(settings, run, reporter)
    reporter.line(_start_line(settings, run))
    try:
        judgings = (
            slot_judgings(judging, slots)
            if cluster is None
            else remote_judgings(cluster, judging, settings)
        )
        workers = trust_devices(run.ledger, judgings, settings, config_set, reporter)
    except (DeviceUntrustedError, ClusterError) as exc:
        raise RatchetError(str(exc)) from exc
    several = len(workers) > 1 or judgings[0].runner.slot is not None
    judging = workers[0].judging
    session = make_session(settings, backend, run.ledger, run.paths.root) if backend else None
    ctx = LoopContext(
        # Parents are banded by the widest floor: no device's noise passes for speed.
        noise_floor=max(worker.noise_floor for worker in workers),
        workers=tuple(workers) if several else (),
        settings=settings,
        workload=workload,
        device=device,
        config_set=config_set,
        paths=run.paths,
        ledger=run.ledger,
        repo=run.repo,
        expander=make_expander(settings, judging, session, config_set),
        judging=judging,
        reporter=reporter,
        llm=session,
    )
    if session is not None:
        ctx = replace(ctx, context_for=context_builder(ctx))
    elif cluster is not None:
        ctx = replace(ctx, remote_expand=cluster.expand)  # the offline operator, as Ray tasks
    return PreparedRun(ctx=ctx, resumed=run.resumed)
