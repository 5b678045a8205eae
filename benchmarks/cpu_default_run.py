"""Run `ratchet run` with the embedded defaults, steer it once, and write the figures to docs/.

Usage: python benchmarks/cpu_default_run.py [--minutes 4] [--run-dir DIR] [--out FILE]
On the GPU (the issue-4 search run; the frontier exported for benchmarks/track3_h200.py):
  python benchmarks/cpu_default_run.py --device cuda --minutes 8 --hard-stop-s 480 \
      --inject-after 0 --run-dir /tmp/run --export OUT/frontier \
      --status-json OUT/status.json --out OUT/search-run.md
  tar czf OUT/run.tgz -C /tmp run   # carry it to a later command, untar to /tmp/run, --resume
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IDEA = "Keep Q, K and V as strided views and pack the QKV projection"


def ratchet(*args: str) -> str:
    """Run the CLI as a user would; fail loudly."""
    cmd = [sys.executable, "-m", "orchestrator.cli", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


@dataclass(frozen=True)
class RunPlan:
    """What to run: budget, steering and the hard stop."""

    run_dir: Path
    minutes: float
    inject_after: float
    device: str | None
    hard_stop_s: float | None


def _stop_at(proc: subprocess.Popen[str], hard_stop_s: float) -> bool:
    """A step that starts just before the budget ends still runs to its end (a full sweep and
    the frontier's verification take minutes on a GPU): past hard_stop_s the run is asked to
    stop after its current stage, and 60 s later to stop at once. The ledger keeps every
    closed step either way."""
    signalled = False
    for grace in (hard_stop_s, 60.0):
        try:
            proc.wait(timeout=grace)
            return signalled
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            signalled = True
    return signalled


def _echo(stream: Any, lines: list[str]) -> None:
    """Keep the run's log and show it live (a GPU command's output is its only progress)."""
    for line in stream:
        lines.append(line)
        print(line, end="", flush=True)


def run_and_steer(plan: RunPlan) -> tuple[str, list[str]]:
    """The run in a subprocess, one IDEA injected while it goes (none for inject_after <= 0);
    returns its log."""
    run_dir, minutes, inject_after, device = (
        plan.run_dir,
        plan.minutes,
        plan.inject_after,
        plan.device,
    )
    argv = ["run", "--run-dir", str(run_dir), "--minutes", f"{minutes:g}"]
    argv += ["--device", device] if device else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if inject_after > 0:
        time.sleep(inject_after)
        ratchet("inject", "IDEA", IDEA, "--run-dir", str(run_dir), "--author", "benchmark")
    lines: list[str] = []
    reader = threading.Thread(target=_echo, args=(proc.stdout, lines), daemon=True)
    reader.start()
    signalled = False
    if plan.hard_stop_s is not None:
        signalled = _stop_at(proc, max(0.0, plan.hard_stop_s - max(inject_after, 0.0)))
    proc.wait()
    reader.join()
    log = "".join(lines)
    if proc.returncode != 0 and not signalled:
        raise SystemExit(f"ratchet run failed:\n{log}")
    return "ratchet " + " ".join(shlex.quote(a) for a in argv), log.splitlines()


def promotions(run_dir: Path) -> list[dict[str, object]]:
    """Every PROMOTED verdict after the seed, with its paired CIs."""
    sys.path.insert(0, str(ROOT))
    from ledger import Ledger

    rows = []
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        for stored in ledger.verdicts():
            rec = stored.record
            if rec.verdict == "promoted" and rec.details.get("step", 0) > 0:
                rows.append({"sha": rec.candidate_sha, **rec.details, "objective": rec.objective})
    return rows


def _ci(value: object) -> str:
    if not isinstance(value, dict):
        return "-"
    return f"{value['median']:.3f}x [{value['ci_low']:.3f}, {value['ci_high']:.3f}]"


@dataclass(frozen=True)
class RunInfo:
    """How the run was made, for the report's header."""

    command: str
    log: list[str]
    started: str
    device: str
    steered: bool


def render(run_dir: Path, run: RunInfo) -> str:
    """The markdown report."""
    sys.path.insert(0, str(ROOT))
    from harness.models import share_text
    from orchestrator.throughput import throughput_cell

    status = json.loads(ratchet("status", "--run-dir", str(run_dir), "--json"))
    steered = f', with `ratchet inject IDEA "{IDEA}"` injected while it ran' if run.steered else ""
    verify = ratchet("ledger", "verify", "--run-dir", str(run_dir)).strip()
    frontier = status["frontier"]
    lines = [
        f"# Default {run.device.upper()} run (embedded defaults: track3, offline expander, SQLite)",
        "",
        f"- Date: {run.started}; machine: {platform.processor() or platform.machine()}, "
        f"{platform.platform()}, Python {platform.python_version()}",
        f"- Command: `{run.command}`{steered}",
        "- Produced by: `python benchmarks/cpu_default_run.py` (this file is its output)",
        f"- Baseline: {status['baseline']}",
        "- Timings: CPU wall-clock (perf_counter_ns, one judge thread) on the CPU, CUDA events "
        "on a GPU; interleaved ABBA rounds.",
        "",
        "## Summary",
        "",
        "| figure | value |",
        "|---|---|",
        f"| steps | {status['steps']} |",
        f"| candidates (seed included) | {status['candidates']} |",
        f"| promotions (seed not counted) | {status['promoted']} |",
        f"| verdicts | {', '.join(f'{k} {v}' for k, v in sorted(status['verdicts'].items()))} |",
        f"| failed expansions | {status['expansions_failed']} |",
        f"| run time, candidates per hour | {throughput_cell(status.get('run_time'))} |",
        f"| frontier | `{frontier['sha'][:12]}` (step {frontier['step']}, idea "
        f"{frontier['idea_id']}) |",
        f"| frontier speedup ({frontier['objective_kind']} over the baseline) | "
        f"{frontier['speedup']:.3f}x; paired aggregate {_ci(frontier['vs_baseline'])} |",
        f"| ledger verify | {verify} |",
        "",
        "## Promotions (paired CIs from the same judge process)",
        "",
        "| step | commit | vs parent | vs frontier | objective vs baseline |",
        "|---:|---|---|---|---:|",
    ]
    for row in promotions(run_dir):
        objective = row["objective"]
        shown = f"{objective:.3f}x" if isinstance(objective, float) else "-"
        lines.append(
            f"| {row['step']} | `{str(row['sha'])[:12]}` | {_ci(row.get('vs_parent'))} | "
            f"{_ci(row.get('vs_frontier'))} | {shown} |"
        )
    lines += ["", "## Frontier per config (uncapped speedup over the baseline)", ""]
    lines += [
        "| config | speedup | tolerance used (worst element, all trials) |",
        "|---|---:|---:|",
    ]
    per_config = frontier["per_config_speedup"].items()
    used = frontier.get("per_config_tolerance_used", {})
    ordered = sorted(
        per_config,
        key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0, kv[0]),
    )
    lines += [
        f"| {cid} | {v:.3f}x | {share_text(used[cid]) if cid in used else '-'} |"
        for cid, v in ordered
    ]
    lines += ["", "## Ideas", "", "| idea | source | trials | successes |", "|---|---|---:|---:|"]
    for idea in sorted(status["ideas"], key=lambda i: (-i["trials"], i["id"])):
        lines.append(
            f"| {idea['id']} | {idea['source']} | {idea['trials']} | {idea['successes']} |"
        )
    lines += ["", "## Run log", "", "```", *run.log, "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/ratchet-cpu-default-run"))
    parser.add_argument("--inject-after", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/cpu-default-run.md")
    parser.add_argument("--device", default=None, help="cpu (default) or cuda")
    parser.add_argument("--export", type=Path, help="also export the frontier to this directory")
    parser.add_argument("--status-json", type=Path, help="also write `ratchet status --json` here")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run in --run-dir (a GPU search spread over several commands)",
    )
    parser.add_argument(
        "--hard-stop-s",
        type=float,
        default=None,
        help="signal the run to stop after its current stage this many seconds after start",
    )
    args = parser.parse_args()
    if args.run_dir.exists() and not args.resume:
        raise SystemExit(f"{args.run_dir} exists: pass a new --run-dir, or --resume to go on")
    if args.resume and not (args.run_dir / "ledger.sqlite").is_file():
        raise SystemExit(f"--resume: {args.run_dir} holds no run (no ledger.sqlite)")
    started = datetime.now(UTC).isoformat(timespec="seconds")
    plan = RunPlan(args.run_dir, args.minutes, args.inject_after, args.device, args.hard_stop_s)
    command, log = run_and_steer(plan)
    if args.export:
        ratchet("export", "--run-dir", str(args.run_dir), "--out", str(args.export))
    if args.status_json:
        args.status_json.write_text(ratchet("status", "--run-dir", str(args.run_dir), "--json"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    run = RunInfo(command, log, started, args.device or "cpu", args.inject_after > 0)
    args.out.write_text(render(args.run_dir, run))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
