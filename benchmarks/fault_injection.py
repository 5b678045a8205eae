"""Fault injection against the real CLI: kill -9 at random moments, two runs on one run dir,
ledger tampering, hostile candidates and bad input; writes the table to docs/results/.

    .venv/bin/python benchmarks/fault_injection.py --kills 9 --out docs/results/fault-injection.md

Every probe drives `python -m orchestrator.cli` as a user would (subprocesses, a real run dir,
real SQLite); a probe passes when Ratchet refuses or recovers cleanly: no traceback, nothing
lost, nothing duplicated, tampering reported.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

CODE_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_ROOT))

from ledger import Ledger  # noqa: E402
from orchestrator.events import EvaluationSummary  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402

# Probes that only read a finished run dir (or fail before touching one) run this many at once.
PROBE_WORKERS = max(2, min(4, os.cpu_count() or 2))

CONFIG = """
[ratchet]
torch_threads = 1
[ratchet.screen_timing]
min_rounds = 4
max_rounds = 8
budget_s = 0.3
target_half_width = 0.05
[ratchet.sweep_timing]
min_rounds = 6
max_rounds = 12
budget_s = 0.5
"""


@dataclass
class Probe:
    """One injected fault and what Ratchet did."""

    category: str
    fault: str
    expected: str
    observed: str
    ok: bool


@dataclass
class Session:
    """A scratch directory, its settings file and the environment every CLI call gets."""

    root: Path
    config: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.root / "ratchet.toml"
        self.config.write_text(CONFIG)
        self.env = {**os.environ, "RATCHET_LOCK_DIR": str(self.root / "locks")}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrator.cli", "--config", str(self.config), *args]

    def cli(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args), cwd=CODE_ROOT, env=self.env, capture_output=True, input=stdin
        )
        return subprocess.CompletedProcess(
            done.args,
            done.returncode,
            done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"),
        )

    def start_run(self, run_dir: Path, candidates: int) -> subprocess.Popen[bytes]:
        argv = self.argv("run", "--run-dir", str(run_dir), "--workload", "softmax")
        argv += ["--device", "cpu", "--max-candidates", str(candidates), "--minutes", "20"]
        return subprocess.Popen(
            argv,
            cwd=CODE_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _first_line(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return text[0][:140] if text else ""


def _clean(done: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" not in done.stderr + done.stdout


def ledger_audit(run_dir: Path) -> tuple[int, int, int]:
    """(candidates, duplicated evaluations or measurements, candidates without a verdict)."""
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        evaluations = [
            EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")
        ]
        keys = [
            (m.record.evaluation_id, m.record.config_id, m.record.arm)
            for m in ledger.measurements()
        ]
        shas = [c.record.sha for c in ledger.candidates()]
    per_stage = Counter((e.sha, e.stage) for e in evaluations)
    duplicated = sum(n - 1 for n in per_stage.values()) + len(keys) - len(set(keys))
    duplicated += len(shas) - len(set(shas))
    unjudged = sum(1 for c in state.candidates.values() if c.verdict is None)
    return len(set(shas)), duplicated, unjudged


def kill_and_resume(session: Session, kills: int, candidates: int, rng: random.Random) -> Probe:
    """SIGKILL the run at random moments, restart it each time, then audit the ledger."""
    run_dir = session.root / "killed"
    delays = []
    for _ in range(kills):
        proc = session.start_run(run_dir, candidates)
        delay = rng.uniform(1.0, 12.0)
        delays.append(delay)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    final = session.start_run(run_dir, candidates)
    out, _ = final.communicate(timeout=900)
    verify = session.cli("ledger", "verify", "--run-dir", str(run_dir))
    made, duplicated, unjudged = ledger_audit(run_dir)
    commits = subprocess.run(
        ["git", "-C", str(run_dir / "repo"), "rev-list", "--all", "--count"],
        capture_output=True,
        text=True,
    )
    ok = final.returncode == 0 and verify.returncode == 0 and duplicated == 0 and unjudged == 0
    observed = (
        f"{kills} kills at {min(delays):.1f}-{max(delays):.1f} s; final run exit "
        f"{final.returncode}; {made} candidates, {duplicated} duplicated, {unjudged} without "
        f"a verdict; ledger verify exit {verify.returncode}; {commits.stdout.strip()} commits"
    )
    if not ok:
        observed += " | " + out.decode(errors="replace")[-300:].replace("\n", " ")
    return Probe(
        "kill -9", f"{kills} random SIGKILLs of `ratchet run`", "0 lost, 0 dup", observed, ok
    )


def two_runs(session: Session) -> Probe:
    """A second `ratchet run` on a run dir whose run is alive is refused, naming the other."""
    run_dir = session.root / "twice"
    first = session.start_run(run_dir, 3)
    deadline = time.monotonic() + 60
    while not (run_dir / "ledger.sqlite").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    second = session.cli(
        "run", "--run-dir", str(run_dir), "--workload", "softmax", "--device", "cpu"
    )
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    named = str(first.pid) in second.stderr
    ok = second.returncode != 0 and named and _clean(second)
    return Probe(
        "two runs", "second `run` on a live run dir", "refused, names pid", _first_line(second), ok
    )


def _sqlite(path: Path, statements: Callable[[sqlite3.Connection], None]) -> None:
    with sqlite3.connect(path) as db:
        triggers = db.execute("SELECT name, sql FROM sqlite_master WHERE type='trigger'").fetchall()
        for name, _ in triggers:
            db.execute(f"DROP TRIGGER {name}")
        statements(db)
        for _, sql in triggers:
            db.execute(sql)


def _truncate(db: sqlite3.Connection) -> None:
    top = db.execute("SELECT max(seq) FROM entries").fetchone()[0]
    for table in ("events", "verdicts", "measurements", "messages", "fingerprints", "candidates"):
        db.execute(f"DELETE FROM {table} WHERE seq > ?", (top - 3,))
    db.execute("DELETE FROM entries WHERE seq > ?", (top - 3,))


def _rewrite(db: sqlite3.Connection) -> None:
    """Back-date one entry and recompute every later hash: the chain stays self-consistent, so
    only an anchor outside the database can tell."""
    from ledger.chain import entry_hash

    rows = db.execute(
        "SELECT seq, kind, created_at, payload_json FROM entries ORDER BY seq"
    ).fetchall()
    target = rows[len(rows) // 2][0]
    prev = "0" * 64
    for seq, kind, created_at, payload in rows:
        if seq == target:
            created_at = "2001-01-01T00:00:00+00:00"
        digest = entry_hash(prev, seq, kind, created_at, payload)
        db.execute(
            "UPDATE entries SET created_at = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (created_at, prev, digest, seq),
        )
        prev = digest


def tampering(session: Session, source: Path) -> list[Probe]:
    """Copies of a finished run dir, each tampered one way; verify, status, export must see it."""
    cases: list[tuple[str, Callable[[Path], object]]] = [
        ("last entries deleted, triggers dropped and restored", lambda p: _sqlite(p, _truncate)),
        ("an entry edited, later hashes recomputed", lambda p: _sqlite(p, _rewrite)),
        ("a page in the middle overwritten", _corrupt_page),
        ("ledger truncated to zero bytes", lambda p: p.write_bytes(b"")),
    ]
    # Each case has a copy of its own and only reads it: they run side by side (most of a
    # probe is the CLI's interpreter start), each judged exactly as it would be alone.
    with ThreadPoolExecutor(max_workers=PROBE_WORKERS) as pool:
        return list(pool.map(lambda n: _tampered(session, source, n, *cases[n]), range(len(cases))))


def _tampered(
    session: Session, source: Path, index: int, fault: str, tamper: Callable[[Path], object]
) -> Probe:
    run_dir = session.root / f"tampered-{index}"
    shutil.copytree(source, run_dir)
    try:
        tamper(run_dir / "ledger.sqlite")
    except Exception as exc:  # a tamper the schema changed under: report, do not crash
        return Probe("tamper", fault, "refused", f"tamper failed: {exc}", False)
    verify = session.cli("ledger", "verify", "--run-dir", str(run_dir))
    status = session.cli("status", "--run-dir", str(run_dir))
    export = session.cli("export", "--run-dir", str(run_dir), "--out", str(run_dir / "x"))
    detected = verify.returncode != 0 and export.returncode != 0
    warned = status.returncode != 0 or "verify" in status.stdout + status.stderr
    clean = all(_clean(d) for d in (verify, status, export))
    observed = (
        f"verify exit {verify.returncode} ({_first_line(verify)}); status exit "
        f"{status.returncode}; export exit {export.returncode}"
    )
    return Probe("tamper", fault, "detected, no traceback", observed, detected and warned and clean)


def _corrupt_page(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(max(4096, (size // 4096 // 2) * 4096))
        fh.write(os.urandom(4096))


def bad_inputs(session: Session, run_dir: Path) -> list[Probe]:
    """Inputs a user gets wrong: a clean message, a non-zero exit, nothing written."""
    afile = session.root / "a-file"
    afile.write_text("x")
    seed = subprocess.run(
        ["git", "-C", str(run_dir / "repo"), "rev-list", "--max-parents=0", "--all"],
        capture_output=True,
        text=True,
    ).stdout.split()[0]
    cases = [
        ("run --run-dir FILE", ("run", "--run-dir", str(afile), "--device", "cpu")),
        ("export --out FILE", ("export", "--run-dir", str(run_dir), "--out", str(afile))),
        (
            "checkout --into FILE",
            ("checkout", "--run-dir", str(run_dir), "--into", str(afile), seed),
        ),
        ("PRIORITY 1e999", ("inject", "--run-dir", str(run_dir), "PRIORITY", "config:s1=1e999")),
        (
            "CONSTRAINT naming no tunable",
            ("inject", "--run-dir", str(run_dir), "CONSTRAINT", "forbid nosuchtunable=1"),
        ),
        (
            "inject text with invalid UTF-8",
            ("inject", "--run-dir", str(run_dir), "IDEA", "fuse \udcff\udcfe layers"),
        ),
        (
            "--workload module:factory that does not exist",
            (
                "run",
                "--run-dir",
                str(session.root / "nw"),
                "--workload",
                "nosuch.module:make",
                "--device",
                "cpu",
            ),
        ),
        ("judge a missing file", ("judge", str(session.root / "missing.py"), "--device", "cpu")),
        ("status of a dir that is no run", ("status", "--run-dir", str(session.root / "nothing"))),
        (
            "abbreviated flag --max-cand to run",
            ("run", "--run-dir", str(session.root / "ab"), "--max-cand", "3"),
        ),
    ]
    probes = []
    before = _tree_digest(run_dir)
    # Two lanes side by side: the probes on the finished run dir one after another (as a user
    # would type them: none meets another's open ledger), beside those on other paths. The
    # digest above and below brackets both lanes.
    # Answers are kept by the case's index: two cases named alike must not share one answer.
    lanes = [
        [i for i, (_, args) in enumerate(cases) if (str(run_dir) in args) == on_run_dir]
        for on_run_dir in (True, False)
    ]
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        answered = pool.map(lambda lane: [(i, session.cli(*cases[i][1])) for i in lane], lanes)
        answers = dict(pair for lane in answered for pair in lane)
    for index, (fault, _) in enumerate(cases):
        done = answers[index]
        ok = done.returncode != 0 and _clean(done) and bool(_first_line(done))
        probes.append(
            Probe(
                "bad input",
                fault,
                "clean error",
                f"exit {done.returncode}: {_first_line(done)}",
                ok,
            )
        )
    unchanged = _tree_digest(run_dir) == before
    written = [p for p in ("nw", "ab", "nothing") if (session.root / p).exists()]
    probes.append(
        Probe(
            "bad input",
            "all of the above",
            "nothing written",
            f"run dir unchanged: {unchanged}; new dirs: {written or 'none'}",
            unchanged and not written,
        )
    )
    return probes


def _tree_digest(path: Path) -> list[tuple[str, int]]:
    return sorted(
        (str(p.relative_to(path)), p.stat().st_size)
        for p in path.rglob("*")
        if p.is_file() and ".git" not in p.parts
    )


def hostile_candidates() -> list[Probe]:
    """The standing cheat corpus through the judge's runtime (static checks skipped), counted."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/harness/test_cheat_corpus.py",
            "tests/harness/test_supervisor.py",
        ],
        cwd=CODE_ROOT,
        capture_output=True,
        text=True,
    )
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    return [
        Probe(
            "hostile candidates",
            "cheat corpus + supervisor tests (runtime and static)",
            "all rejected for their reason",
            tail,
            done.returncode == 0,
        )
    ]


def render(probes: list[Probe], command: str, seconds: float) -> str:
    lines = [
        "# Fault injection (CPU, softmax workload, real CLI subprocesses)",
        "",
        f"Command: `{command}` ({seconds / 60:.1f} min on this machine, "
        f"{time.strftime('%Y-%m-%d')}). Passed {sum(p.ok for p in probes)} of {len(probes)}.",
        "",
        "| category | fault | expected | observed | ok |",
        "|---|---|---|---|---|",
    ]
    for p in probes:
        observed, verdict = p.observed.replace("|", "/"), "yes" if p.ok else "**no**"
        lines.append(f"| {p.category} | {p.fault} | {p.expected} | {observed} | {verdict} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--kills", type=int, default=9, help="SIGKILLs of one run (default 9)")
    parser.add_argument("--candidates", type=int, default=6, help="candidates of that run")
    parser.add_argument("--seed", type=int, default=17, help="seed of the kill moments")
    parser.add_argument("--skip-corpus", action="store_true", help="skip the hostile corpus")
    parser.add_argument("--out", type=Path, default=None, help="write the table here")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ratchet-faults-") as scratch:
        session = Session(Path(scratch))
        probes = [kill_and_resume(session, args.kills, args.candidates, random.Random(args.seed))]
        probes.append(two_runs(session))
        probes += tampering(session, session.root / "killed")
        probes += bad_inputs(session, session.root / "killed")
        if not args.skip_corpus:
            probes += hostile_candidates()
    command = "python benchmarks/fault_injection.py " + " ".join(sys.argv[1:])
    table = render(probes, command.strip(), time.monotonic() - started)
    print(table)
    if args.out is not None:
        args.out.write_text(table)
    return 0 if all(p.ok for p in probes) else 1


if __name__ == "__main__":
    sys.exit(main())
