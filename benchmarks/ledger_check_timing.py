"""Cost of the ledger's full verify against its incremental check (the check `status`,
`export` and `run` make before working), on a SQLite ledger of N events.

    .venv/bin/python benchmarks/ledger_check_timing.py --entries 100000 \
        --out docs/results/ledger-check-timing.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger import EventRecord, Ledger


def measure(entries: int, appended: int) -> list[tuple[str, float, int]]:
    """(what, seconds, entries read) for a fresh full verify and an incremental check."""
    with tempfile.TemporaryDirectory() as tmp, Ledger.open_path(Path(tmp) / "l.sqlite") as ledger:
        started = time.perf_counter()
        for start in range(0, entries, 1000):
            count = min(1000, entries - start)
            ledger.append_many(
                [EventRecord(kind="tick", payload={"i": start + i}) for i in range(count)]
            )
        append_s = time.perf_counter() - started
        started = time.perf_counter()
        full = ledger.verify()
        full_s = time.perf_counter() - started
        ledger.append_many([EventRecord(kind="tick", payload={"i": -i}) for i in range(appended)])
        started = time.perf_counter()
        check = ledger.check()
        check_s = time.perf_counter() - started
        assert full.ok and check.ok, (full.problem, check.problem)
    return [
        (f"append {entries} events in batches of 1000", append_s, entries),
        (
            "full `ledger verify` (chain, index tables, journal, quick_check)",
            full_s,
            full.entries_checked,
        ),
        (f"incremental check after {appended} appends", check_s, check.entries_checked),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--entries", type=int, default=100_000, help="events in the ledger")
    parser.add_argument("--appended", type=int, default=10, help="events appended after verify")
    parser.add_argument("--out", type=Path, default=None, help="write the table here")
    args = parser.parse_args()
    rows = measure(args.entries, args.appended)
    lines = [
        "# Ledger check cost (SQLite, this machine: 2 cores)",
        "",
        f"Command: `python benchmarks/ledger_check_timing.py {' '.join(sys.argv[1:])}` "
        f"({time.strftime('%Y-%m-%d')}).",
        "",
        "| operation | seconds | entries read |",
        "|---|---|---|",
        *(f"| {what} | {seconds:.4f} | {read} |" for what, seconds, read in rows),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
