"""The machine's own ceiling for parallel judging: the same screens, one stream against two.

Usage: python benchmarks/judge_ceiling.py [--screens 12] [--rounds 2] [--candidate FILE.py]
           [--out docs/results/judge-ceiling-cpu.md]

No search, no orchestrator, no expander: the track3 CPU set's screen of one fixed candidate,
judged `--screens` times in one stream, then the same number split over two streams that run
at once (each with its own device lock, as two CPU device slots have), `--rounds` times. The
ratio of the two throughputs is the most `--devices 0,1` can gain over `--devices 0` on this
machine; the search adds its own work (expansion, git, the ledger) on the same cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.models import (  # noqa: E402
    ArmKind,
    ArmSpec,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
)
from harness.runner import RunnerSettings, run_evaluation  # noqa: E402
from harness.trials import correctness_trials, new_salt, recheck_trials  # noqa: E402
from orchestrator.settings import default_timing  # noqa: E402
from orchestrator.workloads import load_workload  # noqa: E402

DEFAULT_CANDIDATE = ROOT / "docs/results/track3-search-run-h200-7/frontier-unchecked/submission.py"


def screen_request(candidate: Path, index: int) -> EvaluationRequest:
    """The search's screen of `candidate` on the CPU set: correctness, then paired timing
    against the eager reference (the same trials, timing plan and threads as a run's)."""
    workload = load_workload("track3")
    config_set = workload.config_set("cpu")
    salt = new_salt()
    return EvaluationRequest(
        evaluation_id=f"ceiling-{index}:screen",
        workload="track3",
        device="cpu",
        config_ids=list(config_set.screening_ids),
        arms=[
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(candidate),
                entry_point=workload.static_policy.entry_point,
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=correctness_trials(workload.official_trials, salt),
        recheck_trials=recheck_trials(salt),
        timing=default_timing("cpu", "screen"),
        torch_threads=1,
        seed=index,
    )


def judge_stream(candidate: Path, indices: list[int], work: Path) -> list[float]:
    """Judge one screen per index, one after the other, under this stream's own lock."""
    runner = RunnerSettings(python=sys.executable, lock_dir=work / "locks", code_root=ROOT)
    walls = []
    for index in indices:
        started = time.perf_counter()
        result: EvaluationResult = run_evaluation(
            screen_request(candidate, index), work / f"screen-{index}", runner
        )
        walls.append(time.perf_counter() - started)
        if result.outcome is not Outcome.PASSED:
            raise SystemExit(f"screen {index} did not pass: {result.message[:400]}")
    return walls


def run_arm(candidate: Path, screens: int, streams: int, work: Path) -> tuple[float, list[float]]:
    """Wall time of `screens` screens over `streams` concurrent streams, and each's wall."""
    split = [list(range(s, screens, streams)) for s in range(streams)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=streams) as pool:
        futures = [
            pool.submit(judge_stream, candidate, indices, work / f"{streams}-{s}")
            for s, indices in enumerate(split)
        ]
        walls = [w for f in futures for w in f.result()]
    return time.perf_counter() - started, walls


def _shown(path: Path) -> str:
    """A path inside the repository relative to it (a report names no machine's dirs)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def render(args: argparse.Namespace, arms: list[tuple[int, float, list[float]]]) -> str:
    """The table, the command and what it means."""
    rows, one = [], 0.0
    for round_index, (streams, wall, walls) in enumerate(arms):
        rate = args.screens / wall
        one = rate if streams == 1 else one  # each two-stream arm against the arm just before
        rows.append(
            f"| {round_index // 2 + 1} | {streams} | {args.screens} | {wall:.1f} "
            f"| {statistics.median(walls):.2f} | {rate * 3600:.0f} | {rate / one:.2f}x |"
        )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python", "benchmarks/judge_ceiling.py", *sys.argv[1:]])
    return "\n".join(
        [
            "# Parallel judging on this machine: the ceiling for two CPU device slots",
            "",
            f"Measured {when} on {platform.node()} ({platform.machine()}, {os.cpu_count()} "
            f"cores): `{command}`.",
            "",
            f"The same screen (track3 CPU set, screening configs, the run's CPU screen timing, "
            f"one intra-op thread) of `{_shown(args.candidate)}` judged "
            f"{args.screens} times: in one stream, then split over two streams at once, each "
            "with its own device lock. No orchestrator, expander or ledger runs; every judge "
            "is a fresh supervised subprocess, as in a run.",
            "",
            "| round | streams | screens | wall s | median screen s | screens per hour "
            "| x one stream (same round) |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            "The two-stream ratio is the most `--devices 0,1` can gain over `--devices 0` "
            "here from judging alone: a run adds expansion, git and the ledger on the same "
            "cores.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screens", type=int, default=12, help="screens per arm (even)")
    parser.add_argument("--rounds", type=int, default=2, help="one stream, then two, per round")
    parser.add_argument("--candidate", type=Path, default=DEFAULT_CANDIDATE)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/judge-ceiling-cpu.md")
    args = parser.parse_args()
    if args.screens < 2 or args.screens % 2:
        parser.error(f"--screens must be an even number of at least 2, got {args.screens}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    args.candidate = args.candidate.resolve()
    if not args.candidate.is_file():
        parser.error(f"--candidate {args.candidate} is not a file")
    with tempfile.TemporaryDirectory(prefix="ratchet-ceiling-") as tmp:
        judge_stream(args.candidate, [args.screens], Path(tmp) / "warm")  # caches, untimed
        arms = [
            (n, *run_arm(args.candidate, args.screens, n, Path(tmp) / f"round-{r}"))
            for r in range(args.rounds)
            for n in (1, 2)
        ]
    text = render(args, arms)
    print(text)  # first: an --out that cannot be written loses no measurement
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
