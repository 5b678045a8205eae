"""Judge set-up: nothing the judge's own libraries start may look like a candidate's thread."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tqdm")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys, threading, time
import tqdm
from harness.setup import quiet_progress_monitor
if sys.argv[1] == "quiet":
    quiet_progress_monitor()
for _ in tqdm.tqdm(range(3), file=open("/dev/null", "w")):
    pass
time.sleep(0.1)
print(sorted(t.name for t in threading.enumerate()))
"""


def _run(script: str, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The script in a fresh interpreter (threads started by an earlier test cannot leak in)."""
    done = subprocess.run(
        [sys.executable, "-c", script, mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize(("mode", "expect_monitor"), [("quiet", False), ("default", True)])
def test_progress_bars_leave_no_monitor_thread(mode: str, expect_monitor: bool) -> None:
    # The default run is the control: tqdm does start the thread the judge would reject.
    done = _run(SCRIPT, mode)
    assert ("tqdm_monitor" in done.stdout) is expect_monitor, done.stdout


THREADS = """
import sys, threading
import torch._inductor.config as inductor_config
from harness.setup import quiet_progress_monitor, release_compile_workers
inductor_config.compile_threads = 2
{setup}
before = {{t.ident for t in threading.enumerate()}}
{build}
print("built", sorted(t.name for t in threading.enumerate() if t.ident not in before))
if sys.argv[1] == "release":
    release_compile_workers()
print("after", sorted(t.name for t in threading.enumerate() if t.ident not in before))
"""


def _threads_around(setup: str, build: str, mode: str, tmp_path: Path) -> tuple[str, str]:
    """The new threads' names after a build and after the release (or not, mode 'keep')."""
    script = THREADS.format(setup=setup, build=build)
    done = _run(script, mode, HOME=str(tmp_path), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "i"))
    built, after = done.stdout.splitlines()[-2:]
    return built, after


@pytest.mark.parametrize(("mode", "expect_left"), [("release", False), ("keep", True)])
def test_parallel_compiles_leave_no_thread_once_released(
    mode: str, expect_left: bool, tmp_path: Path
) -> None:
    # Keeping the pool is the control: a parallel compile does leave the thread the judge rejects.
    built, after = _threads_around(
        "import torch\nquiet_progress_monitor()",
        "compiled = torch.compile(lambda x, w: torch.nn.functional.gelu(x @ w).sum(-1))\n"
        "compiled(torch.randn(16, 32), torch.randn(32, 32))",
        mode,
        tmp_path,
    )
    assert built != "built []", built
    assert (after != "after []") is expect_left, after


@pytest.mark.parametrize(("mode", "expect_left"), [("release", False), ("keep", True)])
def test_the_triton_subprocess_pool_leaves_no_timer_once_released(
    mode: str, expect_left: bool, tmp_path: Path
) -> None:
    # The H200 run found 'subproc_worker_timer' alive after the pool's shutdown (the judge
    # rejected three configs); keeping the pool is the control that the timer does start.
    built, after = _threads_around(
        # The timer wakes every 8 s: longer than the pool takes to shut down, as on the H200.
        "inductor_config.quiesce_async_compile_time = 16",
        "from torch._inductor.async_compile import AsyncCompile\n"
        'assert AsyncCompile.process_pool().submit(len, "abc").result() == 3',
        mode,
        tmp_path,
    )
    assert "subproc_worker_timer" in built, built
    assert ("subproc_worker_timer" in after) is expect_left, after
