"""The judge's supervisor: a process between the launcher and the judge that the candidate
does not control; it ties the judge's life to the launcher's, bounds its memory and rejects any
process that outlives the evaluation.

Run as `python -m harness.supervisor LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS NAMESPACE --
COMMAND` (KEEP_FDS: descriptors the judge inherits, comma-separated, or '-'; NAMESPACE: 'yes' to
run the judge in a PID namespace of its own where the host allows it, 'no' for CUDA judges,
whose driver fails in a PID namespace that shares the host's /proc). It reports on REPORT_FD, a
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
from typing import TextIO

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWPID = 0x20000000
PID_NAMESPACE, SUBREAPER = "pid-namespace", "subreaper"
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
    isolation: str = SUBREAPER  # PID_NAMESPACE: the judge ran as the child of a namespace init
    recording: bool = field(default=False, repr=False)  # kill_tree lists what it kills


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


def _reap_all() -> None:
    """Collect every child that has ended (orphans reparented to us included)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def kill_tree(root: int, report: SupervisorReport | None = None) -> None:
    """SIGKILL every live process below `root` (host pids) until none is left, recording them.
    A namespace's init kills by `kill(-1)`: inside the namespace host pids mean nothing."""
    namespaced = report is not None and report.isolation == PID_NAMESPACE and os.getpid() == 1
    for _ in range(20):
        _reap_all()
        alive = [p for p in descendants(root) if _state_and_rss(p)[0] not in ("Z", "X")]
        if not alive:
            return
        for pid in alive:
            if report is not None and report.recording and len(report.outlived) < 20:
                report.outlived.append(_describe(pid))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1 if namespaced else pid, signal.SIGKILL)
        time.sleep(0.05)


def host_pid() -> int:
    """This process's pid as the host sees it (inside a PID namespace getpid() is 1; /proc is
    the host's, so its 'self' link names the host pid)."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


def host_parent_pid() -> int:
    """The parent's pid as the host sees it (0 inside a namespace is the init's outside)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return os.getppid()


def _enter_pid_namespace() -> bool:
    """Make our next child the init of a new PID namespace (needs CAP_SYS_ADMIN: root)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.unshare(CLONE_NEWPID)) == 0
    except (OSError, AttributeError):
        return False


def _tree_rss(root: int, judge: int, full_scan: bool) -> int:
    pids = descendants(root) if full_scan else [judge]
    return sum(_state_and_rss(pid)[1] for pid in pids)


def _child_host_pid(me: int) -> int | None:
    """The host pid of our only child (Popen's pid is a namespace pid inside a namespace)."""
    for _ in range(200):
        children = descendants(me)
        if children:
            return min(children)
        time.sleep(0.005)
    return None


def watch(judge: subprocess.Popen[bytes], memory_bytes: int, report: SupervisorReport) -> None:
    """Wait for the judge, polling its memory; a judge over the bound is killed."""
    me, polls = host_pid(), 0
    judge_pid = _child_host_pid(me) or judge.pid
    while judge.poll() is None:
        polls += 1
        # One process's memory is one small read; the whole tree (forks) every 2 s.
        rss = _tree_rss(me, judge_pid, full_scan=polls % 8 == 0)
        report.peak_rss_bytes = max(report.peak_rss_bytes, rss)
        if memory_bytes and rss > memory_bytes:
            report.memory_exceeded = True
            kill_tree(me, report)
            break
        time.sleep(0.25)
    code = judge.wait()
    report.exit_code, report.signal = (code, None) if code >= 0 else (None, -code)


def _on_terminate(*_: object) -> None:
    kill_tree(host_pid())
    os._exit(143)


@dataclass(frozen=True)
class JudgeLaunch:
    """The judge's command line, the descriptors it inherits and its memory bound."""

    command: list[str]
    keep_fds: tuple[int, ...]
    memory_bytes: int
    namespace: bool = True


def run_judge(launch: JudgeLaunch, out: TextIO, report: SupervisorReport) -> None:
    """Start the judge in its own session bound to this process, watch it, then kill and
    record whatever it left running; the report goes to `out`."""
    judge = subprocess.Popen(
        launch.command,
        start_new_session=True,
        preexec_fn=die_with_parent,  # safe: this process runs no other thread
        pass_fds=launch.keep_fds,
    )
    out.write(f"started {host_pid() if report.isolation == PID_NAMESPACE else judge.pid}\n")
    out.flush()
    watch(judge, launch.memory_bytes, report)
    report.recording = True  # what is alive now outlived the evaluation
    kill_tree(host_pid(), report)
    report.recording = False
    if report.isolation == PID_NAMESPACE:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # from a namespace's init: everyone else in it
    out.write(json.dumps({k: v for k, v in asdict(report).items() if k != "recording"}) + "\n")
    out.flush()


def _namespace_init(launch: JudgeLaunch, out: TextIO, report: SupervisorReport) -> None:
    """Pid 1 of the judge's namespace: the judge cannot signal it (the kernel drops signals
    from inside to a namespace's init) nor see any process outside."""
    die_with_parent()
    os.setsid()  # its own group, so the launcher can kill it by group as it kills a judge
    try:
        run_judge(launch, out, report)
    finally:
        os._exit(0)


def supervise(launcher: int, report_fd: int, launch: JudgeLaunch) -> int:
    """Run the judge in a PID namespace of its own where the host allows it (else in its own
    session under us as a sub-reaper), bound to us, and report."""
    die_with_parent()
    if os.getppid() != launcher:  # the launcher died before we were bound to it
        return 3
    subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    namespaced = launch.namespace and _enter_pid_namespace()
    report = SupervisorReport(
        subreaper=subreaper, isolation=PID_NAMESPACE if namespaced else SUBREAPER
    )
    # The launcher stops us with SIGTERM: take the judge's whole tree down first.
    signal.signal(signal.SIGTERM, _on_terminate)
    with os.fdopen(report_fd, "w", encoding="utf-8") as out:
        if not namespaced:
            run_judge(launch, out, report)
            return 0
        init = os.fork()
        if init == 0:
            _namespace_init(launch, out, report)
        os.waitpid(init, 0)
        kill_tree(host_pid())  # nothing is left when the init is gone; the guard costs little
    return 0


def pin_to_slot(cpus: str) -> None:
    """Pin this process (and so the judge it starts) to a CPU slot's cores, before the judge
    imports torch: its thread pool is sized and placed from the affinity it starts with."""
    if cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})


def main(argv: list[str]) -> int:
    """Parse `LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS NAMESPACE -- COMMAND...`."""
    if len(argv) < 7 or argv[5] != "--" or argv[4] not in ("yes", "no"):
        print(
            "usage: python -m harness.supervisor LAUNCHER_PID REPORT_FD MEMORY_BYTES KEEP_FDS "
            "yes|no -- COMMAND...",
            file=sys.stderr,
        )
        return 2
    keep = tuple(int(fd) for fd in argv[3].split(",") if fd and fd != "-")
    pin_to_slot(os.environ.get("RATCHET_JUDGE_CPUS", ""))
    launch = JudgeLaunch(
        command=argv[6:], keep_fds=keep, memory_bytes=int(argv[2]), namespace=argv[4] == "yes"
    )
    return supervise(int(argv[0]), int(argv[1]), launch)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
