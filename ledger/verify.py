"""Re-check of a ledger: hash chain, canonical payloads, record shapes and index tables, walked
from the first entry or from a verified head, with every entry shown to the anchor check."""

from __future__ import annotations

import json
from typing import Any, Final, NamedTuple

from pydantic import ValidationError
from sqlalchemy import Connection, Row, Select, exists, func, select

from ledger.anchor import AnchorCheck, Problem
from ledger.chain import canonical_json, entry_hash
from ledger.db import trigger_problem
from ledger.errors import CorruptLedgerError
from ledger.models import Entry, index_columns, index_table, table
from ledger.records import EntryKind, ProblemKind, record_type

# Rows fetched per round trip while streaming: bounded memory whatever the ledger size.
_BATCH_ROWS: Final = 2000
# Problems SQLite's quick_check lists at most (the first is reported).
_QUICK_CHECK_ROWS: Final = 5


class _IndexPlan(NamedTuple):
    """Where one kind's index row sits in the joined result: labels computed once, not per row."""

    kind: EntryKind
    table_name: str
    seq_label: str
    columns: tuple[tuple[str, str], ...]  # (column name, result label)


def _index_plans() -> tuple[_IndexPlan, ...]:
    return tuple(
        _IndexPlan(
            kind,
            index_table(kind).name,
            _label(kind, "seq"),
            tuple((column, _label(kind, column)) for column in index_columns(kind)),
        )
        for kind in EntryKind
    )


class Walked(NamedTuple):
    """Outcome of a walk: the first problem (None: none), entries read, the last good head."""

    problem: Problem | None
    checked: int
    head_seq: int
    head_hash: str


class _Walk:
    """Progress along the chain: the next seq expected and the hash it must link to."""

    def __init__(self, after_seq: int, after_hash: str, anchors: AnchorCheck) -> None:
        self.expected_seq = after_seq + 1
        self.head_hash = after_hash
        self.checked = 0
        self.plans = _index_plans()
        self.anchors = anchors

    def check(self, row: Row[Any]) -> Problem | None:
        self.checked += 1
        problem = _check_entry(row._mapping, self.expected_seq, self.head_hash, self.plans)
        if problem is None:
            problem = self.anchors.see(row.seq, row.hash)
        if problem is None:
            self.expected_seq += 1
            self.head_hash = row.hash
        return problem


def walk_chain(
    connection: Connection, after_seq: int, after_hash: str, anchors: AnchorCheck
) -> Walked:
    """Walk every entry after after_seq (whose hash is after_hash) in seq order and return the
    first problem, if any: of the entries, their index tables, the anchors or the triggers."""
    orphan = _first_orphan(connection, after_seq)
    walk = _Walk(after_seq, after_hash, anchors)
    found: Problem | None = None
    statement = (
        _joined_select()
        .where(table(Entry).c.seq > after_seq)
        .execution_options(yield_per=_BATCH_ROWS)
    )
    try:
        with connection.execute(statement) as result:
            for row in result:
                found = walk.check(row)
                # Entries past an orphan index row cannot hold an earlier problem: stop reading.
                if found is not None or (orphan is not None and row.seq >= (orphan.seq or 0)):
                    break
    except CorruptLedgerError as exc:
        found = Problem(walk.expected_seq, str(exc), ProblemKind.DAMAGED)
    head_seq = walk.expected_seq - 1
    if found is None and orphan is None:
        found = anchors.finish(head_seq)
    problems = [problem for problem in (found, orphan) if problem is not None]
    first: Problem | None
    if problems:
        # min() keeps the first of equal seqs, so an entry problem wins over its orphan twin.
        first = min(problems, key=lambda problem: problem.seq or 0)
    else:
        found_trigger = trigger_problem(connection)
        first = (
            None if found_trigger is None else Problem(None, found_trigger, ProblemKind.TRIGGERS)
        )
    return Walked(first, walk.checked, head_seq, walk.head_hash)


def quick_check(connection: Connection) -> Problem | None:
    """SQLite's own check of every page of the file (a corrupt page in an index the walk
    never reads included); None when the file is sound or is not SQLite."""
    if connection.dialect.name != "sqlite":
        return None
    rows = connection.exec_driver_sql(f"PRAGMA quick_check({_QUICK_CHECK_ROWS})").all()
    lines = [line for row in rows for line in str(row[0]).splitlines()]
    found = [line for line in lines if line != "ok" and not line.startswith("***")]
    if not found:
        return None
    text = (
        f"the database file is damaged: SQLite's quick_check reports {found[0]!r}"
        + (f" and {len(found) - 1} more" if len(found) > 1 else "")
        + "; restore the file from a backup (or start a new ledger)"
    )
    return Problem(None, text, ProblemKind.DAMAGED)


def _label(kind: EntryKind, column: str) -> str:
    return f"{kind.value}__{column}"


def _joined_select() -> Select[Any]:
    """Every entry left-joined with its would-be row in each index table, in seq order."""
    entries = table(Entry)
    columns: list[Any] = list(entries.columns)
    joined: Any = entries
    for kind in EntryKind:
        index = index_table(kind)
        columns += [column.label(_label(kind, column.name)) for column in index.columns]
        joined = joined.outerjoin(index, index.c.seq == entries.c.seq)
    return select(*columns).select_from(joined).order_by(entries.c.seq)


def _first_orphan(connection: Connection, after_seq: int) -> Problem | None:
    """The lowest index-table row after after_seq whose seq has no entry at all."""
    entries = table(Entry)
    orphans: list[Problem] = []
    for kind in EntryKind:
        index = index_table(kind)
        statement = select(func.min(index.c.seq)).where(
            index.c.seq > after_seq, ~exists().where(entries.c.seq == index.c.seq)
        )
        seq = connection.execute(statement).scalar_one_or_none()
        if seq is not None:
            text = (
                f"index table {index.name} has a row for seq {seq}, but entry {seq} does not exist"
            )
            orphans.append(Problem(seq, text, ProblemKind.CHAIN))
    return min(orphans, key=lambda problem: problem.seq or 0) if orphans else None


def _check_entry(
    row: Any, expected_seq: int, prev_hash: str, plans: tuple[_IndexPlan, ...]
) -> Problem | None:
    """Check one entry's place in the chain, its payload, its hash and its index rows."""
    seq = row["seq"]
    if seq != expected_seq:
        if seq > expected_seq:
            text = (
                f"entry {expected_seq} is missing: the chain jumps from seq {expected_seq - 1} "
                f"to {seq}; entries are never deleted, so rows were removed"
            )
            return Problem(expected_seq, text, ProblemKind.CHAIN)
        text = f"entry {seq}: expected seq {expected_seq}; seqs start at 1"
        return Problem(seq, text, ProblemKind.CHAIN)
    try:
        kind = EntryKind(row["kind"])
    except ValueError:
        known = ", ".join(known_kind.value for known_kind in EntryKind)
        text = f"entry {seq}: unknown kind {row['kind']!r} (known: {known})"
        return Problem(seq, text, ProblemKind.CHAIN)
    label = f"entry {seq} ({kind.value})"
    if row["prev_hash"] != prev_hash:
        text = (
            f"{label}: prev_hash {row['prev_hash']} does not match the hash of entry {seq - 1} "
            f"({prev_hash})"
        )
        return Problem(seq, text, ProblemKind.CHAIN)
    payload, problem = _parse_payload(row["payload_json"], label)
    if problem is not None:
        return Problem(seq, problem, ProblemKind.CHAIN)
    recomputed = entry_hash(prev_hash, seq, kind.value, row["created_at"], row["payload_json"])
    if recomputed != row["hash"]:
        text = (
            f"{label}: stored hash does not match recomputed hash (stored {row['hash']}, "
            f"recomputed {recomputed})"
        )
        return Problem(seq, text, ProblemKind.CHAIN)
    problem = _check_record(kind, payload, label) or _check_index_rows(
        row, kind, payload, label, plans
    )
    return None if problem is None else Problem(seq, problem, ProblemKind.CHAIN)


def _parse_payload(payload_json: str, label: str) -> tuple[dict[str, Any], str | None]:
    try:
        payload = json.loads(payload_json)
    except (TypeError, ValueError) as exc:
        return {}, f"{label}: payload_json is not valid JSON ({exc})"
    if not isinstance(payload, dict):
        return {}, f"{label}: payload_json is a {type(payload).__name__}, not a JSON object"
    try:
        canonical = canonical_json(payload)
    except ValueError as exc:
        return {}, f"{label}: payload_json cannot be canonical JSON ({exc})"
    if canonical != payload_json:
        return {}, f"{label}: payload_json is not in canonical form (it was rewritten)"
    return payload, None


def _check_record(kind: EntryKind, payload: dict[str, Any], label: str) -> str | None:
    model = record_type(kind)
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        return f"{label}: payload is not a valid {model.__name__}: {where}: {first['msg']}"
    return None


def _check_index_rows(
    row: Any, kind: EntryKind, payload: dict[str, Any], label: str, plans: tuple[_IndexPlan, ...]
) -> str | None:
    """The entry's own index table has one agreeing row; no other index table has any."""
    for plan in plans:
        present = row[plan.seq_label] is not None
        if plan.kind is not kind:
            if present:
                return (
                    f"{label}: index table {plan.table_name} has a row for it, but only "
                    f"{plan.kind.value} entries belong there"
                )
            continue
        if not present:
            return f"{label}: its row in index table {plan.table_name} is missing"
        for column, column_label in plan.columns:
            stored, expected = row[column_label], payload.get(column)
            if stored != expected:
                return (
                    f"{label}: index table {plan.table_name} column {column} holds {stored!r} "
                    f"but the payload says {expected!r}"
                )
    return None
