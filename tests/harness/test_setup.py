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


@pytest.mark.parametrize(("mode", "expect_monitor"), [("quiet", False), ("default", True)])
def test_progress_bars_leave_no_monitor_thread(mode: str, expect_monitor: bool) -> None:
    # The default run is the control: tqdm does start the thread the judge would reject.
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert ("tqdm_monitor" in done.stdout) is expect_monitor, done.stdout
