"""Candidates judged per hour, and each device's busy fraction, for runs that differ only in
their devices and expanders: the same workload, seed, budget and timing, one arm at a time.

Usage: python benchmarks/device_slots.py [--minutes 5] [--workload track3] [--device cpu]
           [--arm serial --arm 0 --arm 0,1:2] [--out docs/results/device-slots.md]
An arm is DEVICES[:EXPANDERS]; 'serial' is today's loop (no --devices, one expander). On the
H200: python benchmarks/device_slots.py --device cuda --arm serial --arm 0:2 --minutes 6
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger import Ledger  # noqa: E402
from orchestrator.events import EvaluationSummary  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402


@dataclass(frozen=True)
class Arm:
    """One configuration of devices and expanders."""

    devices: str | None
    expanders: int

    @property
    def label(self) -> str:
        """How the table names it."""
        where = "serial loop" if self.devices is None else f"--devices {self.devices}"
        return f"{where}, --expanders {self.expanders}"

    @staticmethod
    def parse(text: str) -> Arm:
        """'serial', 'DEVICES' or 'DEVICES:EXPANDERS'."""
        if text == "serial":
            return Arm(None, 1)
        devices, _, expanders = text.partition(":")
        return Arm(devices, int(expanders or 1))


@dataclass(frozen=True)
class ArmResult:
    """What one arm's run did."""

    arm: Arm
    wall_s: float
    judged: int
    promoted: int
    busy: dict[str, float]
    objective: float | None
    command: str
    gpu: GpuSamples | None = None


@dataclass(frozen=True)
class GpuSamples:
    """nvidia-smi's utilization.gpu, sampled every 200 ms over an arm."""

    mean_util: float
    busy_share: float
    samples: int


def start_gpu_sampler(
    path: Path, args: argparse.Namespace
) -> tuple[subprocess.Popen[bytes], Path] | None:
    """nvidia-smi writing utilization samples to `path` (None on a CPU arm)."""
    if args.device != "cuda":
        return None
    query = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    handle = path.open("wb")
    return subprocess.Popen([*query, "-lms", "200"], stdout=handle), path


def stop_gpu_sampler(sampler: tuple[subprocess.Popen[bytes], Path] | None) -> GpuSamples | None:
    """Stop sampling; the mean utilization and the share of samples with the GPU busy."""
    if sampler is None:
        return None
    proc, path = sampler
    proc.terminate()
    proc.wait()
    values = [float(v) for v in path.read_text().split() if v.strip().replace(".", "").isdigit()]
    if not values:
        return None
    busy = sum(v > 0 for v in values) / len(values)
    return GpuSamples(
        mean_util=sum(values) / len(values) / 100, busy_share=busy, samples=len(values)
    )


def stop_at(proc: subprocess.Popen[bytes], hard_stop_s: float | None) -> None:
    """Wait for the run; past hard_stop_s ask it to stop after its stage, 20 s later kill its
    whole process group (the ledger keeps every closed step either way: kill -9 is safe)."""
    try:
        proc.wait(timeout=hard_stop_s)
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_arm(arm: Arm, args: argparse.Namespace, root: Path) -> ArmResult:
    """One `ratchet run` of the arm, then its ledger read back."""
    run_dir = root / (arm.devices or "serial").replace(",", "_") / f"x{arm.expanders}"
    argv = ["run", "--run-dir", str(run_dir), "--workload", args.workload, "--device", args.device]
    argv += ["--minutes", str(args.minutes), "--seed", str(args.seed)]
    argv += ["--expanders", str(arm.expanders)]
    argv += ["--devices", arm.devices] if arm.devices else []
    command = shlex.join(["ratchet", *argv])
    print(f"arm {arm.label}: {command}", flush=True)
    started = time.monotonic()
    env_lock = {"RATCHET_LOCK_DIR": str(args.lock_dir or root / "locks")}
    sampler = start_gpu_sampler(root / f"gpu-{run_dir.parent.name}-{arm.expanders}.csv", args)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *argv],
        cwd=ROOT,
        env={**os.environ, **env_lock},
        stdout=subprocess.DEVNULL if not args.verbose else None,
        start_new_session=True,
    )
    try:
        stop_at(proc, args.hard_stop_s)
    finally:
        gpu = stop_gpu_sampler(sampler)
    wall = time.monotonic() - started
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        evaluations = [
            EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")
        ]
        verdicts = [v.record for v in ledger.verdicts()]
    seed = state.seed_sha
    judged = [v for v in verdicts if v.candidate_sha != seed and v.stage in ("screen", "sweep")]
    busy: dict[str, float] = {}
    for evaluation in evaluations:
        slot = evaluation.device_slot or args.device
        busy[slot] = busy.get(slot, 0.0) + evaluation.wall_s
    frontier = state.candidates.get(state.frontier_sha or "")
    return ArmResult(
        arm=arm,
        wall_s=wall,
        judged=len(judged),
        promoted=sum(v.verdict == "promoted" for v in judged),
        busy={slot: seconds / wall for slot, seconds in sorted(busy.items())},
        objective=frontier.objective if frontier else None,
        command=command,
        gpu=gpu,
    )


def render(results: list[ArmResult], args: argparse.Namespace) -> str:
    """The markdown table, ratios against the first arm."""
    base = results[0].judged / results[0].wall_s if results[0].judged else None
    lines = [
        f"# Devices and expanders: candidates judged per hour ({args.workload}, {args.device})",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({platform.processor() or platform.machine()}), one arm after the other, each a "
        f"fresh run dir: `python benchmarks/device_slots.py {shlex.join(sys.argv[1:])}`.",
        "",
        "Every arm: the same workload, config set, seed, timing plans and budget of "
        f"{args.minutes:g} min of wall time (the whole run: qualification, one noise-floor "
        "calibration per device, the seed's sweep, then steps). Judged = candidates that got "
        "a screen or sweep verdict (the seed not counted). Busy = a device's judge wall time "
        "(screens and sweeps) over the run's wall time. On a GPU, nvidia-smi's utilization.gpu "
        "is sampled every 200 ms over each arm (the share of samples in which a kernel ran).",
        "",
        "| arm | wall s | judged | promoted | judged per hour | x first arm | busy per device "
        "| frontier objective | GPU utilization (mean / share of samples busy) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        rate = result.judged / result.wall_s * 3600
        ratio = f"{result.judged / result.wall_s / base:.2f}x" if base else "n/a"
        busy = ", ".join(f"{slot} {share:.0%}" for slot, share in result.busy.items())
        objective = f"{result.objective:.3f}x" if result.objective else "n/a"
        lines.append(
            f"| {result.arm.label} | {result.wall_s:.0f} | {result.judged} | {result.promoted} "
            f"| {rate:.0f} | {ratio} | {busy} | {objective} | {_gpu_cell(result.gpu)} |"
        )
    lines += ["", "Commands:", ""] + [f"- `{r.command}`" for r in results]
    return "\n".join(lines) + "\n"


def _gpu_cell(gpu: GpuSamples | None) -> str:
    if gpu is None:
        return "n/a"
    return f"{gpu.mean_util:.0%} / {gpu.busy_share:.0%} ({gpu.samples} samples)"


def main() -> None:
    """Run every arm and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--workload", default="track3")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arm", action="append", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/device-slots.md")
    parser.add_argument("--work", type=Path, default=None, help="where the run dirs go")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--lock-dir", type=Path, default=None, help="device locks (shared)")
    parser.add_argument(
        "--hard-stop-s", type=float, default=None, help="stop an arm's run after this long"
    )
    args = parser.parse_args()
    arms = [Arm.parse(text) for text in (args.arm or ["0", "0,1"])]
    root = args.work or Path(tempfile.mkdtemp(prefix="device-slots-"))
    root.mkdir(parents=True, exist_ok=True)
    results = [run_arm(arm, args, root) for arm in arms]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, args), encoding="utf-8")
    print(args.out.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
