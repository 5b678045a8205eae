"""The judge's supervisor: a process between the launcher and the judge that the candidate
does not control; it ties the judge's life to the launcher's, bounds its memory and rejects any
process that outlives the evaluation.

Run as `python -m harness.supervisor LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS -- COMMAND`
(KEEP_FDS: descriptors the judge inherits, comma-separated, or '-'). It reports on REPORT_FD, a
pipe the judge never holds: a line `started PID`, then one JSON line with the judge's exit
status, the processes that outlived it and whether memory ran out.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass
class SupervisorReport:
    """What the supervisor saw; the launcher turns it into the evaluation's outcome."""

    exit_code: int | None = None  # the judge's exit code (None: killed by a signal)
    signal: int | None = None  # the signal that ended the judge
    outlived: list[str] = field(default_factory=list)  # 'PID COMMAND' left running at the end
    memory_exceeded: bool = False  # the judge's processes went over the memory bound
    peak_rss_bytes: int = 0  # largest resident memory seen over the judge's processes
    subreaper: bool = False  # orphans of the judge were reparented to the supervisor


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the parent goes (set in a child before exec: the
    judge never runs a single instruction unbound from its supervisor)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (one read of /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            # The command sits in parentheses and may hold spaces: fields follow the last ')'.
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def descendants(root: int) -> list[int]:
    """Every live process below `root`."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _state_and_rss(pid: int) -> tuple[str, int]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rindex(")") + 2 :].split()[0]
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return "X", 0
    return state, rss_pages * PAGE_BYTES


def _describe(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        command = b"?"
    return f"{pid} {command.decode(errors='replace')[:200]}"


def _reap(pids: list[int], keep: int | None) -> None:
    """Collect zombies reparented to us, never `keep` (the judge: Popen waits for it)."""
    for pid in pids:
        if pid != keep:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def kill_tree(root: int, report: SupervisorReport | None = None, keep: int | None = None) -> None:
    """SIGKILL every live process below `root` until none is left, recording them."""
    for _ in range(20):
        below = descendants(root)
        _reap(below, keep)
        alive = [p for p in below if _state_and_rss(p)[0] not in ("Z", "X")]
        if not alive:
            return
        for pid in alive:
            if report is not None and len(report.outlived) < 20:
                report.outlived.append(_describe(pid))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _tree_rss(root: int, judge: int, full_scan: bool) -> int:
    pids = descendants(root) if full_scan else [judge]
    return sum(_state_and_rss(pid)[1] for pid in pids)


def watch(judge: subprocess.Popen[bytes], memory_bytes: int, report: SupervisorReport) -> None:
    """Wait for the judge, polling its memory; a judge over the bound is killed."""
    me, polls = os.getpid(), 0
    while judge.poll() is None:
        polls += 1
        # One process's memory is one small read; the whole tree (forks) every 2 s.
        rss = _tree_rss(me, judge.pid, full_scan=polls % 8 == 0)
        report.peak_rss_bytes = max(report.peak_rss_bytes, rss)
        if memory_bytes and rss > memory_bytes:
            report.memory_exceeded = True
            kill_tree(me, keep=judge.pid)
            break
        time.sleep(0.25)
    code = judge.wait()
    report.exit_code, report.signal = (code, None) if code >= 0 else (None, -code)


def _on_terminate(*_: object) -> None:
    kill_tree(os.getpid())
    os._exit(143)


def supervise(
    launcher: int, report_fd: int, memory_bytes: int, keep_fds: tuple[int, ...], command: list[str]
) -> int:
    """Start the judge in its own session bound to us, watch it, report, clean up."""
    die_with_parent()
    if os.getppid() != launcher:  # the launcher died before we were bound to it
        return 3
    report = SupervisorReport(subreaper=_prctl(PR_SET_CHILD_SUBREAPER, 1))
    # The launcher stops us with SIGTERM: take the judge's whole tree down first.
    signal.signal(signal.SIGTERM, _on_terminate)
    with os.fdopen(report_fd, "w", encoding="utf-8") as out:
        judge = subprocess.Popen(
            command,
            start_new_session=True,
            preexec_fn=die_with_parent,  # safe: this process runs no other thread
            pass_fds=keep_fds,
        )
        out.write(f"started {judge.pid}\n")
        out.flush()
        watch(judge, memory_bytes, report)
        kill_tree(os.getpid(), report)
        out.write(json.dumps(asdict(report)) + "\n")
    return 0


def main(argv: list[str]) -> int:
    """Parse `LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS -- COMMAND...`."""
    if len(argv) < 6 or argv[4] != "--":
        print(
            "usage: python -m harness.supervisor LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS "
            "-- COMMAND...",
            file=sys.stderr,
        )
        return 2
    keep = tuple(int(fd) for fd in argv[3].split(",") if fd and fd != "-")
    return supervise(int(argv[0]), int(argv[1]), int(argv[2]), keep, argv[5:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
