"""Guarding a run directory: one `ratchet run` at a time, and nothing there overwritten."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import git

from ledger import Ledger, LedgerError, LedgerUnavailableError
from orchestrator.ledger_location import LEDGER_URL_FILE, LedgerLocationError, resolve_ledger
from orchestrator.state import SearchState, derive_state
from orchestrator.workspace import SEED_BRANCH, RunPaths

RUN_LOCK = "run.lock"
# What a first start that died before its first ledger transaction leaves behind.
LEDGER_FILES = ("ledger.sqlite", "ledger.sqlite-journal", "ledger.sqlite-wal", "ledger.sqlite-shm")


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked (busy, or holding things a start would lose)."""


def _holder(lock: Path) -> str:
    try:
        info = json.loads(lock.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    pid, host = info.get("pid", "?"), info.get("host", "?")
    since = info.get("started", "?")
    return f"pid {pid} on host {host}, running since {since}"


@contextlib.contextmanager
def hold_run_dir(root: Path) -> Iterator[None]:
    """An exclusive lock on the run dir for this process's life (the kernel drops it when the
    process dies, kill -9 included, so it is never stale); a second run is refused."""
    if root.exists() and not root.is_dir():
        raise RunDirError(f"--run-dir {root} is a file, not a directory; pass a directory")
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    lock = root / RUN_LOCK
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(
                f"another 'ratchet run' is using {root} ({_holder(lock)}); wait for it to "
                "stop (or stop it), or use another --run-dir; 'ratchet status' and "
                "'ratchet inject' work while it runs"
            ) from None
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
        if created and [p.name for p in root.iterdir()] == [RUN_LOCK]:
            # A run refused before it wrote anything leaves no trace (bad input writes nothing).
            with contextlib.suppress(OSError):
                lock.unlink()
                root.rmdir()


def _seed_only(repo_path: Path) -> bool:
    """A candidate repository holding nothing but the seed commit (an interrupted start)."""
    try:
        repo = git.Repo(repo_path)
        commits = {h.commit.hexsha for h in repo.heads}
        names = {h.name for h in repo.heads}
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return False
    if not commits:
        return True
    return (
        len(commits) == 1
        and names <= {"main", SEED_BRANCH}
        and not repo.commit(next(iter(commits))).parents
    )


def check_fresh_start(paths: RunPaths) -> None:
    """Before a first start writes anything: the run dir may hold only what an interrupted
    first start leaves (an empty ledger, a repository with only the seed commit, empty work
    dirs); anything else is refused, never overwritten."""
    leftovers = []
    for entry in sorted(paths.root.iterdir()):
        if entry.name in (RUN_LOCK, LEDGER_URL_FILE, *LEDGER_FILES):
            continue
        if entry == paths.repo and _seed_only(entry):
            continue
        if entry in (paths.evals, paths.worktrees) and entry.is_dir() and not any(entry.iterdir()):
            continue
        leftovers.append(entry.name)
    if leftovers:
        raise RunDirError(
            f"{paths.root} holds a ledger with no run in it, but also {', '.join(leftovers)}: "
            "a new run would overwrite them. Nothing was changed; move them away, or pick a "
            "new --run-dir"
        )


def check_run_dir(paths: RunPaths) -> None:
    """A run dir without a ledger (its SQLite file, or the ledger.url of a database ledger)
    must be empty (its lock aside): Ratchet starts runs only in directories it made or that
    hold nothing."""
    others = [p for p in paths.root.iterdir() if p.name != RUN_LOCK] if paths.root.is_dir() else []
    has_ledger = paths.ledger.exists() or (paths.root / LEDGER_URL_FILE).exists()
    if not has_ledger and others:
        names = ", ".join(sorted(p.name for p in others)[:5])
        raise RunDirError(
            f"{paths.root} exists, is not empty ({names}) and holds no Ratchet ledger; "
            "nothing was changed: pick a new --run-dir or empty it"
        )
    paths.root.mkdir(parents=True, exist_ok=True)


def open_for_run(paths: RunPaths, given: str | None) -> tuple[Ledger, SearchState]:
    """The ledger `ratchet run` appends to (created on first use; `given` is the `ledger`
    setting) and the state it holds. RunDirError: the run dir, or a database that holds
    another run dir's run, cannot be started on; LedgerError: the ledger cannot be opened."""
    location = resolve_ledger(paths.root, given, starting=True)
    check_run_dir(paths)
    try:
        ledger = location.open(create=True)
    except (LedgerLocationError, LedgerUnavailableError):
        raise  # their messages already say what to fix
    except LedgerError as exc:
        raise RunDirError(
            f"{location.shown} is not a readable Ratchet ledger: {exc}. Nothing was changed; "
            "restore it from a backup, or pick a new --run-dir"
        ) from exc
    try:
        state = derive_state(ledger)
        if state.run is None:
            check_fresh_start(paths)
        elif location.url is not None and not location.recorded:
            # A new run dir on a database that already holds a run: its candidates' commits
            # are in that run's repository, not here; resuming would mix two runs.
            started_in = state.run.settings.get("run_dir", "another run dir")
            raise RunDirError(
                f"the ledger {location.shown} already holds a run (started in {started_in}), "
                f"and {paths.root} records no ledger: nothing was changed. Resume that run "
                "with its --run-dir, or give this run a new, empty database"
            )
        location.record()
    except BaseException:
        ledger.close()
        raise
    return ledger, state
