"""The fault-injection suite end to end, smaller than its benchmark run: random kills of a real
run, a second run on its dir, four kinds of ledger tampering and a dozen bad inputs, each
refused or recovered from cleanly (docs/results/fault-injection.md has the full run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_every_injected_fault_is_refused_or_recovered(tmp_path: Path) -> None:
    out = tmp_path / "faults.md"
    args = ["--kills", "3", "--candidates", "4", "--skip-corpus", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/fault_injection.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    table = out.read_text() if out.exists() else done.stdout + done.stderr
    assert done.returncode == 0, table[-3000:]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 17  # the header and every probe
    assert all(line.rstrip().endswith("| yes |") for line in rows[1:]), table
