"""The CPU emulation of GEMM operand rounding against a TF32 reference (a benchmark script)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "precision_emulation.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def _share(row: str) -> float:
    return float(row.split("|")[5].strip().rstrip("%"))


def test_the_emulation_tells_roundings_apart(tmp_path: Path) -> None:
    out = tmp_path / "emulation.md"
    done = _run("--configs", "2", "--trials", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {
        tuple(cell.strip() for cell in line.split("|")[2:5]): line
        for line in out.read_text().splitlines()
        if line.startswith("| 2 |")
    }
    assert len(rows) == 16  # 2 references x 4 candidate roundings x 2 softmax forms
    nearest, late = (
        ("tf32 nearest", "fp16", "normalized first"),
        ("tf32 nearest", "fp16", "online (late)"),
    )
    # fp16 rounds like a round-to-nearest TF32 (same 10-bit mantissa): the same rows.
    assert (
        rows[nearest].split("|")[5:]
        == rows[("tf32 nearest", "tf32 nearest", "normalized first")].split("|")[5:]
    )
    # Rounding otherwise than the reference fails it; rounding as it does stays well inside.
    assert _share(rows[("tf32 nearest", "tf32 truncated", "normalized first")]) > 100
    assert _share(rows[nearest]) < _share(rows[late]) < 100
    assert _share(rows[nearest]) < _share(rows[("tf32 nearest", "fp32 exact", "normalized first")])


def test_bad_arguments_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "never.md"
    for args in (["--configs", "99"], ["--configs", "14"], ["--trials", "0"]):
        done = _run(*args, "--out", str(out))
        assert done.returncode != 0 and "Traceback" not in done.stderr, args
        assert args[0] in done.stderr and not out.exists(), args
    # A folder that is not there is named before any work, not after it.
    done = _run("--configs", "2", "--out", str(tmp_path / "missing" / "x.md"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--out: folder" in done.stderr and "missing" in done.stderr


def test_the_emulated_arithmetic_is_the_reference_when_nothing_is_rounded() -> None:
    # The emulation writes the reference's forward out again (its GEMMs need rounding hooks):
    # without rounding it must agree with kernels/track3/reference.py, or its rows say nothing.
    import importlib.util

    import torch

    from harness.gate import compare_outputs
    from kernels.track3 import CONFIGS, generate_inputs
    from kernels.track3.reference import build_reference_model
    from kernels.track3.workload import track3_workload

    spec = importlib.util.spec_from_file_location("precision_emulation", SCRIPT)
    assert spec is not None and spec.loader is not None
    emulation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emulation)
    config = CONFIGS["3"]
    model = build_reference_model(config, device="cpu", seed=1234)
    x = generate_inputs(config, 1234, 0.0, 1.0, "cpu")[0][:1]
    with torch.no_grad():
        want = model(x)
        same = emulation.forward(model, x, lambda t: t, wide=False, late_norm=False)
        rounded = emulation.forward(model, x, emulation.fp16, wide=False, late_norm=False)
    tolerance = track3_workload().tolerance
    exact = compare_outputs(same, want, tolerance)
    assert exact.failed == 0 and exact.tolerance_used is not None and exact.tolerance_used < 0.01
    # Can it fail? Rounding every GEMM operand to fp16 moves it far more than that.
    moved = compare_outputs(rounded, want, tolerance).tolerance_used
    assert moved is not None and moved > 10 * exact.tolerance_used
