"""The Ledger: append records to the hash chain and read them back as pydantic models."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlalchemy import ColumnElement, Connection, Engine, Row, func, select
from sqlalchemy.engine import URL, make_url

from ledger.anchor import (
    AnchorFiles,
    Anchoring,
    ExpectedHead,
    JournalPolicy,
    resolve_anchoring,
    save_checkpoint,
)
from ledger.audit import audit, gather
from ledger.db import (
    POOLED_INFO,
    check_location,
    describe,
    make_engine,
    prepare_schema,
    sqlite_file,
    write_transaction,
)
from ledger.errors import CorruptLedgerError, LedgerError, LedgerUnavailableError
from ledger.journal import append_head
from ledger.models import (
    CandidateRow,
    Entry,
    EventRow,
    FingerprintRow,
    MeasurementRow,
    MessageRow,
    VerdictRow,
    index_table,
    table,
)
from ledger.records import (
    EntryKind,
    LedgerEntry,
    Record,
    Stored,
    StoredCandidate,
    StoredEvent,
    StoredFingerprint,
    StoredMeasurement,
    StoredMessage,
    StoredVerdict,
    VerifyReport,
)
from ledger.writer import Linked, Pending, link, prepare, read_head

StoredT = TypeVar("StoredT", bound=Stored[Any])
T = TypeVar("T")


class Ledger:
    """Append-only, hash-chained record store; open it with Ledger.open or Ledger.open_path."""

    def __init__(
        self, engine: Engine, url: URL, journal: Path | JournalPolicy = JournalPolicy.BESIDE
    ) -> None:
        """Wrap an engine whose schema is ready (Ledger.open does the checks)."""
        self._engine: Engine | None = engine
        self._where = describe(url)
        self._anchoring: Anchoring = resolve_anchoring(sqlite_file(url), journal)

    @classmethod
    def open(
        cls,
        url: str | URL,
        *,
        create: bool = True,
        journal: Path | JournalPolicy = JournalPolicy.BESIDE,
    ) -> Ledger:
        """Open the ledger at an SQLAlchemy URL, creating the schema in an empty database.

        With create=False a missing or empty database raises LedgerNotFoundError. journal is
        where the head journal goes: beside a SQLite file by default (`<file>.heads`, with the
        last verified head in `<file>.verified`), an explicit path (for a database that is not
        a local file), or JournalPolicy.OFF (verify then says what it cannot detect).
        """
        parsed = make_url(url)
        check_location(parsed, create)
        engine = make_engine(parsed)
        try:
            prepare_schema(engine, parsed, create)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, parsed, journal)

    @classmethod
    def open_path(
        cls,
        path: Path | str,
        *,
        create: bool = True,
        journal: Path | JournalPolicy = JournalPolicy.BESIDE,
    ) -> Ledger:
        """Open the SQLite ledger file at path (its directory must exist)."""
        return cls.open(URL.create("sqlite", database=str(path)), create=create, journal=journal)

    @property
    def anchor_files(self) -> AnchorFiles | None:
        """The head journal and last-verified-head files; None when the ledger keeps none."""
        return self._anchoring.files

    def close(self) -> None:
        """Release the database connections; further calls raise LedgerError."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._engine is None else "open"
        return f"Ledger({self._where!r}, {state})"

    # -- writing ---------------------------------------------------------------------------

    def append(self, record: Record) -> int:
        """Append one record; returns its seq (an existing fingerprint's seq if already stored)."""
        return self.append_many([record])[0]

    def append_many(self, records: Sequence[Record]) -> list[int]:
        """Append records atomically in one transaction; returns their seqs in order."""
        # Serialize before taking the write lock: a bad payload fails without blocking others.
        batch = [prepare(record) for record in records]
        if not batch:
            return []
        linked = self._link(batch)
        # After the commit, never before: a crash leaves the journal behind, not ahead.
        files = self._anchoring.files
        if files is not None and linked.added:
            append_head(files.journal, linked.head_seq, linked.head_hash)
        return linked.seqs

    # -- queries -----------------------------------------------------------------------------

    def candidates(self) -> list[StoredCandidate]:
        """Every candidate, in seq order."""
        return self._stored(StoredCandidate, EntryKind.CANDIDATE, [])

    def candidate(self, sha: str) -> StoredCandidate | None:
        """The candidate with this commit sha, or None."""
        found = self._stored(StoredCandidate, EntryKind.CANDIDATE, [CandidateRow.sha == sha])
        return found[0] if found else None

    def measurements(
        self, evaluation_id: str | None = None, commit_sha: str | None = None
    ) -> list[StoredMeasurement]:
        """Measurements, optionally of one evaluation and/or one measured commit, in seq order."""
        conditions: list[ColumnElement[bool]] = []
        if evaluation_id is not None:
            conditions.append(MeasurementRow.evaluation_id == evaluation_id)
        if commit_sha is not None:
            conditions.append(MeasurementRow.commit_sha == commit_sha)
        return self._stored(StoredMeasurement, EntryKind.MEASUREMENT, conditions)

    def verdicts(self, candidate_sha: str | None = None) -> list[StoredVerdict]:
        """Verdicts, optionally on one candidate, in seq order."""
        conditions = [] if candidate_sha is None else [VerdictRow.candidate_sha == candidate_sha]
        return self._stored(StoredVerdict, EntryKind.VERDICT, conditions)

    def messages(self, after_seq: int = 0) -> list[StoredMessage]:
        """Messages appended after seq after_seq, in seq order."""
        _check_after_seq(after_seq)
        return self._stored(StoredMessage, EntryKind.MESSAGE, [MessageRow.seq > after_seq])

    def events(self, kind: str | None = None, after_seq: int = 0) -> list[StoredEvent]:
        """Events (optionally of one kind) appended after seq after_seq, in seq order."""
        _check_after_seq(after_seq)
        conditions = [EventRow.seq > after_seq]
        if kind is not None:
            conditions.append(EventRow.kind == kind)
        return self._stored(StoredEvent, EntryKind.EVENT, conditions)

    def fingerprint(self, fingerprint_id: str) -> StoredFingerprint | None:
        """The fingerprint with this id, or None."""
        condition = FingerprintRow.fingerprint_id == fingerprint_id
        found = self._stored(StoredFingerprint, EntryKind.FINGERPRINT, [condition])
        return found[0] if found else None

    def entries(self, after_seq: int = 0, limit: int | None = None) -> list[LedgerEntry]:
        """Raw chain entries after seq after_seq (at most limit of them), in seq order."""
        _check_after_seq(after_seq)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be None or >= 0, got {limit}; pass None for no limit")
        entries = table(Entry)
        statement = select(entries).where(entries.c.seq > after_seq).order_by(entries.c.seq)
        if limit is not None:
            statement = statement.limit(limit)
        rows = self._read(lambda connection: connection.execute(statement).all())
        return self._decoded(rows, _ledger_entry)

    def head(self) -> tuple[int, str]:
        """Seq and hash of the last entry; (0, '0'*64) when the ledger is empty."""
        return self._read(read_head)

    def count(self, kind: EntryKind | None = None) -> int:
        """Number of entries, optionally of one kind."""
        entries = table(Entry)
        statement = select(func.count()).select_from(entries)
        if kind is not None:
            statement = statement.where(entries.c.kind == EntryKind(kind).value)
        return self._read(lambda connection: int(connection.execute(statement).scalar_one()))

    def verify(self, expect: ExpectedHead | None = None) -> VerifyReport:
        """Check the whole file, recompute the whole chain, cross-check the index tables and
        compare with the head journal, the last verified head and `expect`; report the first
        problem."""
        return self._audit(expect, incremental=False)

    def check(self) -> VerifyReport:
        """The cheap check before work: that the last verified head is still in the chain, and
        the entries and journal lines after it; the first check of a ledger is a full one."""
        return self._audit(None, incremental=True)

    # -- internals ---------------------------------------------------------------------------

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise LedgerError(
                f"ledger {self._where} is closed; open it again with Ledger.open(...)"
            )
        return self._engine

    def _audit(self, expect: ExpectedHead | None, incremental: bool) -> VerifyReport:
        inputs = gather(self._anchoring, incremental)  # before the snapshot, never after
        report, checkpoint = self._read(lambda connection: audit(connection, inputs, expect))
        files = self._anchoring.files
        if files is not None and checkpoint is not None:
            save_checkpoint(files.checkpoint, checkpoint)
        return report

    def _link(self, batch: list[Pending]) -> Linked:
        """Write batch after the head, under the write lock, in one transaction."""
        engine = self._require_engine()
        if engine.dialect.name == "postgresql":
            # Imported here: a SQLite-only host (a GPU box with torch alone) has no psycopg.
            from ledger import pg_append

            if pg_append.supported():
                linked = pg_append.append(engine, batch)
                if linked is not None:
                    return linked
                # A unique key is taken, and nothing was written: the lookups below name it.
        # SQLite; PostgreSQL through an older libpq: one statement per round trip.
        with write_transaction(engine) as connection:
            return link(connection, batch)

    def _read(self, work: Callable[[Connection], T]) -> T:
        """work's result, run in one deferred transaction: a consistent snapshot that never
        blocks writers. A pooled connection the server dropped (a restart) fails work;
        SQLAlchemy then discards the pool's connections, and work (a read) runs again once."""
        engine = self._require_engine()
        while True:
            with engine.connect() as connection:
                was_pooled = bool(connection.connection.info.get(POOLED_INFO))
                try:
                    return work(connection)
                except LedgerUnavailableError:
                    if not (was_pooled and connection.invalidated):
                        raise

    def _stored(
        self,
        stored_type: type[StoredT],
        kind: EntryKind,
        conditions: Sequence[ColumnElement[bool]],
    ) -> list[StoredT]:
        entries, index = table(Entry), index_table(kind)
        statement = (
            select(entries.c.seq, entries.c.hash, entries.c.created_at, entries.c.payload_json)
            .select_from(entries.join(index, index.c.seq == entries.c.seq))
            .where(*conditions)
            .order_by(entries.c.seq)
        )
        rows = self._read(lambda connection: connection.execute(statement).all())
        return self._decoded(rows, partial(_stored_record, stored_type))

    def _decoded(self, rows: Sequence[Any], build: Callable[[Any], T]) -> list[T]:
        """Rows turned into models; a row that cannot be is a damaged or edited file."""
        decoded = []
        for row in rows:
            try:
                decoded.append(build(row))
            except ValueError as exc:  # bad JSON, an unknown kind, a payload of the wrong shape
                lines = str(exc).strip().splitlines()
                reason = lines[0] if lines else type(exc).__name__
                raise CorruptLedgerError(
                    f"entry {row.seq} of ledger {self._where} cannot be read back ({reason}): "
                    "the file was damaged or edited; verify the ledger, and restore it from a "
                    "backup"
                ) from exc
        return decoded


def _ledger_entry(row: Row[Any]) -> LedgerEntry:
    return LedgerEntry(
        seq=row.seq,
        kind=EntryKind(row.kind),
        payload=json.loads(row.payload_json),
        prev_hash=row.prev_hash,
        hash=row.hash,
        created_at=row.created_at,
    )


def _stored_record(stored_type: type[StoredT], row: Row[Any]) -> StoredT:
    return stored_type.model_validate(
        {
            "seq": row.seq,
            "hash": row.hash,
            "created_at": row.created_at,
            "record": json.loads(row.payload_json),
        }
    )


def _check_after_seq(after_seq: int) -> None:
    if after_seq < 0:
        raise ValueError(f"after_seq must be >= 0, got {after_seq}; pass 0 to start at the first")
