"""What `ratchet SUB --help` says: a description and examples for every subcommand, and for
`inject` the text format of every message kind."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Any

from orchestrator.messages import FORMATS, MessageKind

LEDGER_FLAG_HELP = (
    "the run's ledger database, postgresql+psycopg://USER[:PASSWORD]@HOST/DB (default: "
    "RUN_DIR/ledger.sqlite, or the database a run started with --ledger recorded in "
    "RUN_DIR/ledger.url, without the password); the password from the URL, PGPASSWORD or "
    "~/.pgpass; another ledger than the run dir's is refused"
)


@dataclass(frozen=True)
class CommandHelp:
    """The help texts of one subcommand."""

    summary: str  # its line in `ratchet --help`
    description: str  # the paragraph above its options
    examples: tuple[str, ...]  # command lines, shown after its options


COMMANDS = {
    "run": CommandHelp(
        summary="search: expand, judge, promote until a budget ends",
        description="Search for a faster implementation of a workload: each step expands a "
        "candidate with an idea, checks it statically, screens and sweeps it against its "
        "parent, the baseline and the frontier, and promotes it when it is measurably faster. "
        "Everything goes to the run dir's ledger; run the same command again to resume. "
        "Budgets (--minutes, --max-candidates) count the whole run, over all its invocations.",
        examples=(
            "ratchet run --run-dir runs/night1 --minutes 30",
            "ratchet run --workload softmax --device cpu --max-candidates 5",
            "ratchet run --workload my_pkg.my_module:my_workload --run-dir runs/mine",
            "ratchet run --run-dir runs/team1 --ledger postgresql+psycopg://me@db.lan/ratchet",
        ),
    ),
    "inject": CommandHelp(
        summary="steer a run (works while it is going)",
        description="Append a steering message to a run's ledger; a running search reads it "
        "at its next step. Bad input is an error (exit code 2) and writes nothing. Every "
        "message gets an id (its ledger seq); RETRACT ID withdraws one.",
        examples=(
            'ratchet inject IDEA "reuse the exponentials" --run-dir runs/night1',
            'ratchet inject CONSTRAINT "forbid matmul_precision=bf16" --run-dir runs/night1',
            'ratchet inject PRIORITY "config:cpu-2=2" --run-dir runs/night1',
            'ratchet inject REDIRECT "configs=cpu-2 steps=3" --run-dir runs/night1',
            "ratchet inject RETRACT 42 --run-dir runs/night1",
        ),
    ),
    "status": CommandHelp(
        summary="where a run stands",
        description="The frontier and its per-config speedups over the baseline, counts of "
        "candidates and verdicts, a table of the frontier and the best other candidates "
        "(promoted or not: verdict, x baseline, x parent, taint; --candidates N rows), tainted "
        "sweeps and why, every idea with its trials and successes, and the injected messages "
        "(with their ids).",
        examples=(
            "ratchet status --run-dir runs/night1",
            "ratchet status --run-dir runs/night1 --candidates 25",
            "ratchet status --json",
        ),
    ),
    "checkout": CommandHelp(
        summary="a candidate's exact source tree",
        description="Put a candidate's exact commit in a git worktree, with the environment "
        "fingerprint of its measurements in RATCHET_ENVIRONMENT.json beside the code.",
        examples=("ratchet checkout 1a2b3c4d --run-dir runs/night1 --into /tmp/frontier",),
    ),
    "export": CommandHelp(
        summary="write a standalone submission and its manifest",
        description="Write submission.py (the frontier by default) and manifest.json (commit, "
        "lineage, ledger head hash, per-config results, environment) into --out.",
        examples=(
            "ratchet export --run-dir runs/night1 --out runs/night1/export",
            "ratchet export --run-dir runs/night1 --sha 1a2b3c4d --out /tmp/candidate",
        ),
    ),
    "judge": CommandHelp(
        summary="the full judge on a standalone module or package",
        description="Run the full judge (static checks, correctness, interleaved timing "
        "against the eager reference, re-checks) on a module or a candidate package. Exit "
        "code 0 when it passes, 2 when it is rejected, 3 when it is not trustworthy (passed "
        "with a tainted timing, or no result: the judge's own work failed).",
        examples=(
            "ratchet judge submission.py --device cpu",
            "ratchet judge runs/night1/export/submission.py --configs cpu-2,cpu-5 --json",
        ),
    ),
    "dashboard": CommandHelp(
        summary="watch and steer a run in the browser",
        description="Serve a live web view of a run: the frontier and its per-config table, "
        "the trajectory, the lineage tree (and where git ancestry disagrees with it), "
        "candidate pages with diffs, verdicts and transcripts, ideas, the message queue with "
        "an inject form (the same validation as inject), and the ledger with a verify button. "
        "It reads only the ledger and the repository, so it runs beside 'ratchet run'. It "
        "binds 127.0.0.1; any other --host needs a token, and with a token every page and "
        "every write needs it.",
        examples=(
            "ratchet dashboard --run-dir runs/night1",
            "ratchet dashboard --run-dir runs/night1 --port 9000",
            'ratchet dashboard --host 0.0.0.0 --token "$(openssl rand -hex 16)"',
        ),
    ),
    "report": CommandHelp(
        summary="a write-up of a run, from its ledger",
        description="Write report.md and a self-contained report.html (with SVG figures of "
        "the trajectory, the lineage and the frontier's per-config speedups beside them, and "
        "report.json with all the data) from the ledger alone and the run's git repository: "
        "what was searched, the frontier and its per-config table, every experiment with its "
        "verdict and reason (rejected, inconclusive and failed ones too), ideas and their "
        "outcomes, injected messages and their effect, the noise floor and how it was "
        "measured, costs, the environment, and the ledger head it was read at. --out must be "
        "new, empty, or hold an earlier report (which is replaced); anything else is refused "
        "and nothing is written.",
        examples=(
            "ratchet report --run-dir runs/night1 --out runs/night1/report",
            "ratchet report --run-dir runs/night1 --out /tmp/night1-report",
        ),
    ),
    "ledger": CommandHelp(
        summary="inspect the hash-chained ledger",
        description="verify checks the file (or database), recomputes the hash chain, "
        "compares it with the head journal (ledger.sqlite.heads, or ledger.heads for a "
        "database ledger) and, with --expect-head, with a head recorded "
        "elsewhere (status and export manifests print it), and names the first bad entry "
        "(exit code 1); show lists the entries, one line each: seq, time (UTC), kind, short "
        "hash and a summary by kind (the last N with --limit, one kind of entry or event with "
        "--kind, one JSON object per entry with the full record with --json).",
        examples=(
            "ratchet ledger verify --run-dir runs/night1",
            "ratchet ledger verify --run-dir runs/night1 --expect-head 1234:<64 hex digits>",
            "ratchet ledger show --run-dir runs/night1 --limit 20",
            "ratchet ledger show --run-dir runs/night1 --kind verdict",
            "ratchet ledger show --run-dir runs/night1 --kind noise_floor --json",
        ),
    ),
}


def _message_formats() -> str:
    lines = ["message kinds and the format of their TEXT:"]
    for kind in MessageKind:
        wrapped = textwrap.wrap(FORMATS[kind], width=66, break_on_hyphens=False)
        lines.append(f"  {kind.value:<11} {wrapped[0]}")
        lines.extend(f"  {'':<11} {rest}" for rest in wrapped[1:])
    return "\n".join(lines)


def parser_texts(command: str) -> dict[str, Any]:
    """Keyword arguments of `add_parser` for a subcommand: summary, description, examples."""
    entry = COMMANDS[command]
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in entry.examples)
    if command == "inject":
        epilog = f"{_message_formats()}\n\n{epilog}"
    return {
        "help": entry.summary,
        "description": textwrap.fill(entry.description, width=78),
        "epilog": epilog,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
