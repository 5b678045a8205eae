"""PostgreSQL's append in two round trips, through psycopg's pipeline mode: BEGIN, the append
lock, the head and the stored fingerprints in the first; the inserts and COMMIT in the second.

Statements sent together still run one after the other, each with its own READ COMMITTED
snapshot, so the head is read after the lock was granted. (One statement that took the lock
and read the head would read with the snapshot it started with, before it waited for the
lock, and could link to a head another writer had replaced meanwhile.)

Candidate and measurement keys are not looked up: the index tables' unique constraints refuse
a stored one. append() then returns None, and the caller appends the batch through
writer.link, whose lookups raise the same DuplicateRecordError as on SQLite.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Final, cast

import psycopg
from psycopg import pq
from sqlalchemy import Engine, Table
from sqlalchemy.exc import DBAPIError

from ledger import postgres
from ledger.chain import GENESIS_HASH
from ledger.db import POOLED_INFO, unavailable_error
from ledger.errors import DuplicateRecordError, LedgerError
from ledger.models import Entry, index_table, table
from ledger.records import EntryKind
from ledger.writer import Linked, Pending, Planned, UniqueKey, plan, unique_key

# The appender's own BEGIN, sent with the lock: psycopg's implicit one would cost a round trip
# of its own (the connection is switched to autocommit for the call).
BEGIN_SQL: Final = "BEGIN ISOLATION LEVEL READ COMMITTED"
HEAD_SQL: Final = "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
FINGERPRINT_SQL: Final = "SELECT seq FROM fingerprints WHERE fingerprint_id = %s"


class _Lost(Exception):
    """The server dropped the connection during an append."""

    def __init__(self, cause: psycopg.OperationalError, writes_sent: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.writes_sent = writes_sent  # False: nothing was sent that could have been committed


def supported() -> bool:
    """Whether the libpq under psycopg has pipeline mode (14 or newer; its wheels bundle one)."""
    return psycopg.Pipeline.is_supported()


def append(engine: Engine, batch: Sequence[Pending]) -> Linked | None:
    """Link batch after the head in one transaction; None, with nothing written, when a
    record's unique key is taken (append it through writer.link: it names the duplicate).

    A pooled connection found dead in the first round trip, which writes nothing, is
    discarded and the append made again on another: the server dropped it while it waited in
    the pool. Lost later, the commit may or may not have happened: LedgerUnavailableError.
    """
    while True:
        with engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT")
            pooled = connection.connection
            was_pooled = bool(pooled.info.get(POOLED_INFO))
            driver = cast(psycopg.Connection[Any], pooled.driver_connection)
            try:
                return _append(driver, batch)
            except _Lost as lost:
                if lost.writes_sent or not was_pooled:
                    raise unavailable_error(engine.url, lost.cause, True) from lost.cause
            finally:
                if driver.closed:  # dropped by the server: never back into the pool
                    connection.invalidate()


def _append(driver: psycopg.Connection[Any], batch: Sequence[Pending]) -> Linked | None:
    """One attempt of append(), on one connection."""
    writes_sent = False
    try:
        head, stored = _lock_and_read(driver, batch)
        planned = plan(batch, head, stored.get)
        writes_sent = True
        _write_and_commit(driver, planned)
        return planned.linked
    except DuplicateRecordError:
        return None  # a key repeated within the batch: writer.link decides which error
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.table_name == table(Entry).name:  # a seq taken: only without the lock
            raise _wrapped(exc) from exc
        # An index row's seq cannot collide once its entry's did not: a record's unique key.
        return None
    except psycopg.OperationalError as exc:
        if driver.broken:
            raise _Lost(exc, writes_sent) from exc
        raise _wrapped(exc) from exc
    except psycopg.Error as exc:
        raise _wrapped(exc) from exc
    finally:
        _end_transaction(driver)


def _lock_and_read(
    driver: psycopg.Connection[Any], batch: Sequence[Pending]
) -> tuple[tuple[int, str], dict[UniqueKey, int]]:
    """Round trip 1: begin, wait for the append lock, then read the head and the seqs of the
    batch's fingerprints already stored (a stored fingerprint is reused, not refused)."""
    fingerprints = {
        key
        for item in batch
        if item.kind is EntryKind.FINGERPRINT and (key := unique_key(item.record)) is not None
    }
    with _round_trip(driver):
        driver.execute(BEGIN_SQL)
        driver.execute(postgres.APPEND_LOCK_SQL, (postgres.APPEND_LOCK_KEY,))
        head = driver.execute(HEAD_SQL)
        found = {key: driver.execute(FINGERPRINT_SQL, key[1:]) for key in fingerprints}
    row = head.fetchone()
    stored = {}
    for key, cursor in found.items():
        seq_row = cursor.fetchone()
        if seq_row is not None:
            stored[key] = int(seq_row[0])
    return ((0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))), stored


def _write_and_commit(driver: psycopg.Connection[Any], planned: Planned) -> None:
    """Round trip 2: the entries, then their index rows (each references its entry), COMMIT."""
    with _round_trip(driver):
        cursor = driver.cursor()
        if planned.entry_rows:
            cursor.executemany(_insert_sql(table(Entry)), planned.entry_rows)
        for kind, rows in planned.index_rows.items():
            cursor.executemany(_insert_sql(index_table(kind)), rows)
        commit = driver.execute("COMMIT")
    # A failed statement raises above; this guards the journal, which must never name a head
    # the database does not hold.
    if commit.statusmessage != "COMMIT":
        raise LedgerError(
            f"the ledger database answered {commit.statusmessage!r} to COMMIT: nothing was "
            "appended; append the records again"
        )


@contextlib.contextmanager
def _round_trip(driver: psycopg.Connection[Any]) -> Iterator[None]:
    """A pipeline: the statements queued in the block are sent together and answered as it
    ends (one Sync: one round trip), where a failed statement raises."""
    lost: psycopg.OperationalError | None = None
    try:
        with driver.pipeline():
            try:
                yield
            except psycopg.OperationalError as exc:
                if not driver.broken:
                    raise
                # Ending the pipeline fails as well: raised through it, this error would make
                # psycopg log a warning of its own.
                lost = exc
    except psycopg.OperationalError:
        if lost is None:
            raise
    if lost is not None:
        raise lost


def _end_transaction(driver: psycopg.Connection[Any]) -> None:
    """Roll back what an error left open: the connection goes back to the pool idle."""
    if driver.closed or driver.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.OperationalError):  # lost meanwhile: append() discards it
        driver.rollback()


def _insert_sql(target: Table) -> str:
    """INSERT of one row of target, every column a named parameter (rows are dicts)."""
    names = [column.name for column in target.columns]
    placeholders = ", ".join(f"%({name})s" for name in names)
    return f"INSERT INTO {target.name} ({', '.join(names)}) VALUES ({placeholders})"


def _wrapped(exc: psycopg.Error) -> BaseException:
    """The driver's error as SQLAlchemy raises it on the other paths (IntegrityError, ...)."""
    wrapped: BaseException = DBAPIError.instance(None, None, exc, psycopg.Error)
    return wrapped
