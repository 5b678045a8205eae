"""The write path: serialize records, enforce unique keys and link them after the chain head."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, Table, TextClause, text

from ledger.chain import GENESIS_HASH, canonical_json, entry_hash
from ledger.errors import DuplicateRecordError
from ledger.models import (
    Entry,
    index_table,
    index_values,
    table,
)
from ledger.records import (
    CandidateRecord,
    EntryKind,
    FingerprintRecord,
    MeasurementRecord,
    Record,
    RecordBase,
)

# A record's unique key: its entry kind followed by the key values.
UniqueKey = tuple[str, ...]


class Pending(NamedTuple):
    """A record serialized and ready to be linked into the chain."""

    record: Record
    kind: EntryKind
    payload: dict[str, Any]
    payload_json: str


def prepare(record: Record) -> Pending:
    """Serialize a record to its canonical payload, refusing what the ledger cannot store."""
    if not isinstance(record, RecordBase):
        raise TypeError(
            f"cannot append {type(record).__name__}: the ledger stores only its record types "
            "(CandidateRecord, MeasurementRecord, VerdictRecord, MessageRecord, "
            "FingerprintRecord, EventRecord); wrap the data in an EventRecord"
        )
    payload = record.model_dump(mode="json")
    try:
        payload_json = canonical_json(payload)
    except ValueError as exc:
        raise ValueError(f"cannot append {type(record).__name__}: {exc}") from exc
    return Pending(record, record.entry_kind, payload, payload_json)


HEAD_SQL: Final = "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"


def read_head(connection: Connection) -> tuple[int, str]:
    """Seq and hash of the last entry; (0, genesis hash) for an empty ledger."""
    # Plain SQL: building and caching a Core statement costs more than SQLite running it.
    row = connection.execute(text(HEAD_SQL)).first()
    return (0, GENESIS_HASH) if row is None else (row.seq, row.hash)


class Linked(NamedTuple):
    """What appending a batch did: the seq of every record, and the head after it."""

    seqs: list[int]
    head_seq: int
    head_hash: str
    added: int  # entries written (stored fingerprints are reused, not written)


class Planned(NamedTuple):
    """The rows that chain a batch after a head, and what writing them does."""

    entry_rows: list[dict[str, Any]]
    index_rows: dict[EntryKind, list[dict[str, Any]]]
    linked: Linked


def link(connection: Connection, batch: Sequence[Pending]) -> Linked:
    """Chain every pending record after the current head; the caller holds the write lock."""
    lookups: dict[str, TextClause] = {}
    planned = plan(batch, read_head(connection), partial(_stored_seq, connection, lookups))
    # Entries first: every index row references its entry.
    if planned.entry_rows:
        _insert(connection, table(Entry), planned.entry_rows)
    for kind, rows in planned.index_rows.items():
        _insert(connection, index_table(kind), rows)
    return planned.linked


def _insert(connection: Connection, target: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows (dicts with the same keys) into target."""
    # Text SQL: a Core insert() costs a statement compilation and cache-key walk per call,
    # most of a single append's time outside the commit on SQLite.
    names = list(rows[0])
    columns, values = ", ".join(names), ", ".join(f":{name}" for name in names)
    connection.execute(text(f"INSERT INTO {target.name} ({columns}) VALUES ({values})"), rows)


def plan(
    batch: Sequence[Pending], head: tuple[int, str], stored: Callable[[UniqueKey], int | None]
) -> Planned:
    """The rows linking every pending record after head (seq, hash); stored(key) is the seq
    the database holds under a unique key. A key repeated within the batch or already stored
    raises DuplicateRecordError, except a fingerprint's: its stored entry is reused."""
    seq, head_hash = head
    known: dict[UniqueKey, int] = {}
    entry_rows: list[dict[str, Any]] = []
    index_rows: dict[EntryKind, list[dict[str, Any]]] = {}
    seqs: list[int] = []
    for item in batch:
        key = unique_key(item.record)
        existing = None
        if key is not None:
            existing = known[key] if key in known else stored(key)
        if existing is not None:
            if item.kind is not EntryKind.FINGERPRINT:
                raise duplicate_error(item.record, existing)
            seqs.append(existing)  # fingerprints are idempotent: reuse the stored entry
            continue
        seq += 1
        created_at = datetime.now(UTC).isoformat(timespec="microseconds")
        prev_hash = head_hash
        head_hash = entry_hash(prev_hash, seq, item.kind.value, created_at, item.payload_json)
        entry_rows.append(
            {
                "seq": seq,
                "kind": item.kind.value,
                "payload_json": item.payload_json,
                "prev_hash": prev_hash,
                "hash": head_hash,
                "created_at": created_at,
            }
        )
        values = index_values(item.kind, item.payload)
        index_rows.setdefault(item.kind, []).append({"seq": seq, **values})
        if key is not None:
            known[key] = seq
        seqs.append(seq)
    return Planned(entry_rows, index_rows, Linked(seqs, seq, head_hash, len(entry_rows)))


def unique_key(record: Record) -> UniqueKey | None:
    """The key under which a record may be stored only once, if its kind has one."""
    match record:
        case CandidateRecord():
            return (EntryKind.CANDIDATE.value, record.sha)
        case MeasurementRecord():
            return (
                EntryKind.MEASUREMENT.value,
                record.evaluation_id,
                record.config_id,
                record.arm,
            )
        case FingerprintRecord():
            return (EntryKind.FINGERPRINT.value, record.fingerprint_id)
    return None


def duplicate_error(record: Record, seq: int) -> DuplicateRecordError:
    """The error for a record whose unique key is already stored at seq."""
    match record:
        case CandidateRecord():
            return DuplicateRecordError(
                f"candidate sha {record.sha} is already in the ledger (seq {seq}); a commit "
                "is recorded once — skip it or record the new commit"
            )
        case MeasurementRecord():
            return DuplicateRecordError(
                f"measurement (evaluation_id={record.evaluation_id!r}, "
                f"config_id={record.config_id!r}, arm={record.arm!r}) is already in the "
                f"ledger (seq {seq}); re-measure under a new evaluation_id"
            )
    return DuplicateRecordError(
        f"{type(record).__name__} is already in the ledger (seq {seq}); do not append it twice"
    )


def _stored_seq(
    connection: Connection, lookups: dict[str, TextClause], key: UniqueKey
) -> int | None:
    """Seq the database holds under key, if any."""
    kind, *values = key
    if kind not in lookups:
        lookups[kind] = _key_statement(EntryKind(kind))
    params = {f"k{position}": value for position, value in enumerate(values)}
    seq: int | None = connection.execute(lookups[kind], params).scalar_one_or_none()
    return seq


# The columns of each unique key, in UniqueKey order (bind parameters k0, k1, k2).
KEY_COLUMNS: Final = {
    EntryKind.CANDIDATE: ("sha",),
    EntryKind.MEASUREMENT: ("evaluation_id", "config_id", "arm"),
    EntryKind.FINGERPRINT: ("fingerprint_id",),
}


def _key_statement(kind: EntryKind) -> TextClause:
    """Statement finding the seq stored under a unique key (bind parameters k0, k1, k2)."""
    if kind in KEY_COLUMNS:
        where = " AND ".join(f"{c} = :k{i}" for i, c in enumerate(KEY_COLUMNS[kind]))
        return text(f"SELECT seq FROM {index_table(kind).name} WHERE {where}")
    raise ValueError(f"entry kind {kind.value!r} has no unique key; only records with one do")
