"""The judge's supervisor: a candidate cannot kill what launched it, leave processes behind,
take the machine's memory, or outlive a launcher killed at any moment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.lock import DeviceLock
from harness.models import Outcome, RejectReason
from harness.runner import RunnerSettings, run_evaluation
from harness.supervisor import descendants
from tests.harness.conftest import CODE_ROOT, host_pid_sleeper, softmax_request

WriteCandidate = Callable[..., Path]
SOFTMAX = "return torch.softmax(x, dim=-1)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def _processes_naming(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid() and _alive(pid)]


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_candidate_that_kills_its_parent_does_not_reach_the_launcher(
    write_candidate: WriteCandidate,
    tmp_path: Path,
    runner_settings: RunnerSettings,
    namespace: bool,
) -> None:
    runner_settings = runner_settings.model_copy(update={"pid_namespace": namespace})
    body = f"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n{SOFTMAX}"
    request = softmax_request(write_candidate("parricide", body), timing=False)
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    # This test process launched the judge and is still here to read the verdict. In a PID
    # namespace the judge's parent is the namespace's init, which its signals cannot reach, so
    # nothing happened; under a sub-reaper alone the supervisor died, which is a rejection.
    if result.isolation == "pid-namespace":
        assert result.outcome is Outcome.PASSED, result.message
    else:
        assert result.isolation is None  # the supervisor died before it could report
        assert result.outcome is Outcome.REJECTED
        assert result.reason is RejectReason.HARNESS_SIGNALLED, result.message


def test_a_namespaced_judge_sees_no_process_outside(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    marker = tmp_path / "looked"
    body = f"""
import os
if os.getppid() == 1:  # its parent is the namespace's init, pid 1 inside
    try:
        os.kill({os.getpid()}, 0)  # this test process, by its host pid
        raise RuntimeError("saw a process outside its namespace")
    except ProcessLookupError:
        open({str(marker)!r}, "w").write("looked")
{SOFTMAX}"""
    request = softmax_request(write_candidate("peek", body), timing=False)
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    assert result.outcome is Outcome.PASSED, result.message
    # In a namespace the probe must have run (and found nothing): a guard that never ran
    # would pass this test too.
    assert marker.exists() == (result.isolation == "pid-namespace")
    if result.isolation != "pid-namespace":
        pytest.skip("this host refuses PID namespaces: the sub-reaper fallback ran")


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_child_in_its_own_session_is_killed_and_rejects_the_candidate(
    write_candidate: WriteCandidate,
    tmp_path: Path,
    runner_settings: RunnerSettings,
    namespace: bool,
) -> None:
    runner_settings = runner_settings.model_copy(update={"pid_namespace": namespace})
    pid_file = tmp_path / "escaped.pid"
    start = host_pid_sleeper(pid_file).format(session=", start_new_session=True")
    body = f"""
import os, subprocess, time
if not os.path.exists({str(pid_file)!r}):
{textwrap.indent(start, "    ")}
{SOFTMAX}"""
    request = softmax_request(write_candidate("setsid", body), timing=False)
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    assert result.reason is RejectReason.OUTLIVING_PROCESS, result.message
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_double_forked_orphan_is_found_and_killed(
    write_candidate: WriteCandidate,
    tmp_path: Path,
    runner_settings: RunnerSettings,
    namespace: bool,
) -> None:
    runner_settings = runner_settings.model_copy(update={"pid_namespace": namespace})
    pid_file = tmp_path / "orphan.pid"
    # The middle process exits at once: the grandchild is orphaned, with no parent in the judge.
    body = f"""
import os, time
if not os.path.exists({str(pid_file)!r}) and os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({str(pid_file)!r}, "w").write(os.readlink("/proc/self"))
        time.sleep(300)
    os._exit(0)
while not os.path.exists({str(pid_file)!r}):
    time.sleep(0.01)
{SOFTMAX}"""
    request = softmax_request(write_candidate("orphan", body), timing=False)
    result = run_evaluation(request, tmp_path / "w", runner_settings)
    assert result.reason is RejectReason.OUTLIVING_PROCESS, result.message
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_judge_over_the_memory_bound_is_killed(
    write_candidate: WriteCandidate,
    tmp_path: Path,
    runner_settings: RunnerSettings,
    namespace: bool,
) -> None:
    runner_settings = runner_settings.model_copy(update={"pid_namespace": namespace})
    # 4 GiB written, against a bound of 2.5 GiB (a judge importing a CUDA build of torch
    # alone takes about 1 GiB).
    body = f"import time\nhog = torch.ones(2**30)\ntime.sleep(5)\n{SOFTMAX}"
    settings = runner_settings.model_copy(update={"memory_limit_bytes": 5 * 2**29})
    request = softmax_request(write_candidate("hog", body), timing=False)
    started = time.monotonic()
    result = run_evaluation(request, tmp_path / "w", settings)
    assert result.reason is RejectReason.MEMORY_LIMIT, result.message
    assert time.monotonic() - started < 30
    honest = softmax_request(write_candidate("lean", SOFTMAX), timing=False)
    assert run_evaluation(honest, tmp_path / "w2", settings).outcome is Outcome.PASSED


def test_a_launcher_killed_while_the_judge_starts_leaves_nothing_running(
    write_candidate: WriteCandidate, tmp_path: Path
) -> None:
    module = write_candidate("slow", f"import time\ntime.sleep(300)\n{SOFTMAX}")
    work = tmp_path / "orphaned-judge-work"
    launcher = f"""
from pathlib import Path
from harness.runner import RunnerSettings, run_evaluation
from tests.harness.conftest import softmax_request
settings = RunnerSettings(timeout_s=600, lock_dir=Path({str(tmp_path / "locks")!r}),
                          code_root=Path({str(CODE_ROOT)!r}))
run_evaluation(softmax_request(Path({str(module)!r}), timing=False), Path({str(work)!r}), settings)
"""
    for delay in (0.0, 3.0):  # while the interpreters start, and once the judge runs
        proc = subprocess.Popen([sys.executable, "-c", launcher], cwd=CODE_ROOT)
        deadline = time.monotonic() + 60
        while not descendants(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert descendants(proc.pid), "the supervisor never started"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _processes_naming(str(work)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_naming(str(work)), "a judge outlived its launcher"
        with DeviceLock(tmp_path / "locks", "cpu") as lock:
            lock.acquire(timeout_s=1)  # and the device lock is free at once
