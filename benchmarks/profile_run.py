"""Where the orchestrator's own CPU goes: one `ratchet` command under cProfile.

Usage: python benchmarks/profile_run.py [--top 45] -- run --run-dir DIR --device cpu ...
Prints the command's wall time, the orchestrator's CPU seconds and its children's (judges,
git), then the `--top` functions by cumulative time. The profiler slows Python code several
fold: read the seconds as shares, not as what an unprofiled run spends.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.cli import main as ratchet  # noqa: E402


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=45, help="functions to list")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then ratchet's arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the ratchet command after --, e.g. -- run --run-dir /tmp/p --device cpu")
    started = time.monotonic()
    profile = cProfile.Profile()
    profile.enable()
    try:
        code = ratchet(command)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    profile.disable()
    wall = time.monotonic() - started
    print(
        f"wall {wall:.1f} s; orchestrator CPU {_cpu_s(resource.RUSAGE_SELF):.1f} s; "
        f"children CPU {_cpu_s(resource.RUSAGE_CHILDREN):.1f} s; exit {code}"
    )
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
