"""On PostgreSQL the database refuses changes (triggers), verify catches edits made behind
them, and the append lock keeps the chain exact with several writers at once."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import pytest
from sqlalchemy import delete, update

import ledger.db
import ledger.postgres
import ledger.writer
from ledger import (
    AppendOnlyViolation,
    EntryKind,
    EventRecord,
    ExpectedHead,
    JournalPolicy,
    Ledger,
    ProblemKind,
)
from ledger.db import make_engine
from ledger.models import all_tables
from ledger.postgres import APPEND_LOCK_KEY, REFUSE_FUNCTION, trigger_name
from tests.ledger import factories
from tests.ledger.postgres_server import LEDGER_USER, PostgresServer
from tests.ledger.test_postgres import behind_the_trigger

TABLES = sorted(target.name for target in all_tables())
WRITERS = 4
EVENTS_PER_WRITER = 200


@pytest.fixture
def filled(pg_ledger: Ledger) -> Ledger:
    """A PostgreSQL ledger holding one row in every table."""
    pg_ledger.append_many(factories.one_of_each())
    return pg_ledger


def snapshot(raw: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    return {
        name: raw.execute(f"SELECT * FROM {name} ORDER BY 1".encode()).fetchall() for name in TABLES
    }


def test_raw_changes_to_every_table_are_refused(
    postgres_server: PostgresServer, pg_database: str, filled: Ledger
) -> None:
    with postgres_server.connect(pg_database, user=LEDGER_USER) as raw:  # the tables' owner
        before = snapshot(raw)
        for name in TABLES:
            for operation, statement in (
                ("UPDATE", f"UPDATE {name} SET {'id' if name == 'schema_info' else 'seq'} = 99"),
                ("DELETE", f"DELETE FROM {name}"),
                ("TRUNCATE", f"TRUNCATE {name} CASCADE"),
            ):
                with pytest.raises(
                    psycopg.errors.RaiseException,
                    match=f"append-only: {operation} on {name} refused",
                ):
                    raw.execute(statement.encode())
        with pytest.raises(psycopg.errors.RaiseException, match="UPDATE on events refused"):
            raw.execute(
                "INSERT INTO events (seq, kind) VALUES (6, 'x') "
                "ON CONFLICT (seq) DO UPDATE SET kind = 'y'"
            )
        assert snapshot(raw) == before
    # A superuser's replication-mode session skips ordinary triggers, not these (ENABLE ALWAYS).
    with postgres_server.connect(pg_database) as superuser:
        superuser.execute("SET session_replication_role = replica")
        with pytest.raises(psycopg.errors.RaiseException, match="DELETE on entries refused"):
            superuser.execute("DELETE FROM entries")
    assert filled.verify().ok


@pytest.mark.parametrize("target", all_tables(), ids=lambda target: target.name)
def test_sqlalchemy_changes_raise_append_only_violation(
    filled: Ledger, pg_url: str, target: Any
) -> None:
    engine = make_engine(pg_url)
    try:
        first = next(iter(target.primary_key.columns))
        with engine.connect() as connection:
            with pytest.raises(AppendOnlyViolation, match="append-only"):
                connection.execute(update(target).values({first.name: first + 100}))
            connection.rollback()
            with pytest.raises(AppendOnlyViolation, match="append-only"):
                connection.execute(delete(target))
    finally:
        engine.dispose()


def test_an_edit_behind_a_disabled_trigger_is_caught_by_verify(
    postgres_server: PostgresServer, pg_database: str, filled: Ledger
) -> None:
    # The guard must be seen to fail: with the trigger off, the owner's UPDATE goes through.
    forged = (
        "UPDATE entries SET payload_json = replace(payload_json, 'accept', 'reject') WHERE seq = 4"
    )
    behind_the_trigger(postgres_server, pg_database, "entries", forged)
    report = filled.verify()
    assert not report.ok and report.first_bad_seq == 4
    assert report.problem is not None
    assert report.problem.startswith(
        "entry 4 (verdict): stored hash does not match recomputed hash"
    )


@pytest.mark.parametrize(
    ("statement", "state"),
    [
        ("ALTER TABLE verdicts DISABLE TRIGGER {trigger}", "is disabled"),
        ("ALTER TABLE verdicts ENABLE TRIGGER {trigger}", "is not enabled ALWAYS"),
        ("DROP TRIGGER {trigger} ON verdicts", "is missing"),
        (
            "DROP TRIGGER {trigger} ON verdicts; CREATE TRIGGER {trigger} BEFORE DELETE "
            "ON verdicts FOR EACH STATEMENT EXECUTE FUNCTION {function}(); "
            "ALTER TABLE verdicts ENABLE ALWAYS TRIGGER {trigger}",
            "is altered (it no longer fires",
        ),
        (
            "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RETURN NULL; END $$",
            "is altered (its function",
        ),
    ],
    ids=["disabled", "origin-only", "dropped", "fewer-events", "function-replaced"],
)
def test_a_weakened_trigger_is_reported_by_verify(
    postgres_server: PostgresServer, pg_database: str, filled: Ledger, statement: str, state: str
) -> None:
    assert filled.verify().ok
    sql = statement.format(trigger=trigger_name("verdicts"), function=REFUSE_FUNCTION)
    with postgres_server.connect(pg_database, user=LEDGER_USER) as raw:
        raw.execute(sql.encode())
    report = filled.verify()
    assert not report.ok and report.problem_kind is ProblemKind.TRIGGERS
    assert report.problem is not None
    # The function is shared: replacing it weakens the first table checked, entries.
    assert state in report.problem and "treat this ledger as tampered" in report.problem


def test_deleted_last_entries_are_caught_by_the_journal_or_an_expected_head(
    postgres_server: PostgresServer, pg_database: str, pg_url: str, tmp_path: Path
) -> None:
    journal = tmp_path / "ledger.heads"
    with Ledger.open(pg_url, journal=journal) as opened:
        for n in range(10):
            opened.append(factories.event(n=n))
        head = opened.head()
    for table in ("events", "entries"):
        behind_the_trigger(
            postgres_server, pg_database, table, f"DELETE FROM {table} WHERE seq > 7"
        )
    with Ledger.open(pg_url, journal=journal) as opened:
        report = opened.verify()
    assert report.problem_kind is ProblemKind.TRUNCATED and report.first_bad_seq == 8
    with Ledger.open(pg_url, journal=JournalPolicy.OFF) as opened:
        assert opened.verify().ok  # the chain agrees with itself: only an anchor can tell
        expected = ExpectedHead(seq=head[0], hash=head[1])
        assert opened.verify(expected).problem_kind is ProblemKind.EXPECTED_HEAD


class Race(NamedTuple):
    """What race() saw."""

    seqs: list[int]  # A's seq, then B's (0 when B failed)
    error: BaseException | None  # B's
    lock_free: bool  # whether another session could take the append lock while A appended


def wait_for_a_blocked_session(connection: psycopg.Connection[Any]) -> None:
    """Until another session of this database waits for a lock (at most 30 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
        if row is not None and row[0] > 0:
            return
        time.sleep(0.01)
    raise AssertionError("the second writer never waited for the first one's transaction")


def race(pg_url: str) -> Race:
    """A appends inside an open transaction; B appends meanwhile; A commits."""
    outcome: dict[str, Any] = {}
    with Ledger.open(pg_url) as first, Ledger.open(pg_url) as second:

        def append_b() -> None:
            try:
                outcome["seq"] = second.append(factories.event("b"))
            except Exception as exc:  # the outcome under test
                outcome["error"] = exc

        engine = first._require_engine()
        with ledger.db.write_transaction(engine) as connection:
            a = ledger.writer.link(connection, [ledger.writer.prepare(factories.event("a"))])
            thread = threading.Thread(target=append_b)
            thread.start()
            with psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql")) as other:
                wait_for_a_blocked_session(other)  # B waits: on the lock, or on A's new row
                held = other.execute(
                    "SELECT pg_try_advisory_lock(%s)", (APPEND_LOCK_KEY,)
                ).fetchone()
                outcome["lock_free"] = held == (True,)
        thread.join(timeout=30)
        assert first.verify().ok
    return Race([*a.seqs, outcome.get("seq", 0)], outcome.get("error"), outcome["lock_free"])


def test_the_append_lock_makes_a_second_writer_wait_and_link_after_the_first(pg_url: str) -> None:
    outcome = race(pg_url)
    assert outcome.error is None and outcome.seqs == [1, 2]
    assert not outcome.lock_free


def test_without_the_append_lock_two_writers_collide(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The guard must be seen to matter: both read head 0 and write seq 1; the second fails.
    # Both append paths (writer.link's and pg_append's) take the lock through this statement.
    monkeypatch.setattr(ledger.postgres, "APPEND_LOCK_SQL", "SELECT %s")
    outcome = race(pg_url)
    assert outcome.lock_free
    assert outcome.error is not None and "duplicate key" in str(outcome.error)
    assert outcome.seqs == [1, 0]


def append_events(url: str, writer: int, start: Any) -> None:
    """Child process: wait for the others, open the ledger (racing to create its schema),
    append events one by one, as the orchestrator does."""
    start.wait(timeout=60)
    with Ledger.open(url) as opened:
        for n in range(EVENTS_PER_WRITER):
            opened.append(EventRecord(kind=f"writer-{writer}", payload={"n": n}))


def test_concurrent_writer_processes_leave_an_exact_chain(pg_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WRITERS)
    workers = [
        context.Process(target=append_events, args=(pg_url, writer, start))
        for writer in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS
    total = WRITERS * EVENTS_PER_WRITER
    with Ledger.open(pg_url, create=False) as opened:
        assert opened.count() == opened.count(EntryKind.EVENT) == total
        assert [entry.seq for entry in opened.entries()] == list(range(1, total + 1))
        for writer in range(WRITERS):
            mine = opened.events(kind=f"writer-{writer}")
            assert [event.record.payload["n"] for event in mine] == list(range(EVENTS_PER_WRITER))
        report = opened.verify()
    assert report.ok, report.problem
    assert report.entries_checked == total
