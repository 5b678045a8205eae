"""SQLAlchemy tables: the hash-chained entries (source of truth) and their typed index tables."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ledger.records import EntryKind

SCHEMA_VERSION: Final = 1
# The alembic revision this code's tables are (ledger/migrations/versions); a test checks it is
# the scripts' head. Ledgers created before migrations have no revision table and are "0001".
SCHEMA_REVISION: Final = "0001"
LEGACY_REVISION: Final = "0001"
# Alembic's own table, named apart from "alembic_version" so that a database another
# alembic-managed application shares is never mistaken for, or confused with, a ledger.
MIGRATION_TABLE: Final = "ratchet_alembic_version"
APPLICATION_ID: Final = "ratchet-ledger"
APPEND_ONLY_MARKER: Final = "ratchet ledger is append-only"


class Base(DeclarativeBase):
    """Declarative base whose metadata holds every ledger table."""


class SchemaInfo(Base):
    """Single row naming the application and the schema version that wrote the database."""

    __tablename__ = "schema_info"
    __table_args__ = (CheckConstraint("id = 1", name="schema_info_single_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    application: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)


class Entry(Base):
    """One link of the hash chain; payload_json is the exact canonical text that was hashed."""

    __tablename__ = "entries"
    __table_args__ = (Index("ix_entries_kind", "kind"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(32))
    payload_json: Mapped[str] = mapped_column(Text)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[str] = mapped_column(String(40))


class IndexRowMixin:
    """Key of every index table: exactly one row per entry of the table's kind."""

    seq: Mapped[int] = mapped_column(
        ForeignKey("entries.seq"), primary_key=True, autoincrement=False
    )


# Index-table columns other than seq are named exactly like the payload fields they copy, so
# that appends and verify() derive and compare them generically.


class CandidateRow(IndexRowMixin, Base):
    """Query index of candidate entries."""

    __tablename__ = "candidates"
    __table_args__ = (Index("ix_candidates_parent_sha", "parent_sha"),)

    sha: Mapped[str] = mapped_column(String(64), unique=True)
    parent_sha: Mapped[str | None] = mapped_column(String(64))
    tree_sha: Mapped[str] = mapped_column(String(64))
    step: Mapped[int] = mapped_column(Integer)
    idea_id: Mapped[str | None] = mapped_column(String)
    agent: Mapped[str] = mapped_column(String)


class MeasurementRow(IndexRowMixin, Base):
    """Query index of measurement entries; one measurement per (evaluation, config, arm)."""

    __tablename__ = "measurements"
    __table_args__ = (
        UniqueConstraint("evaluation_id", "config_id", "arm", name="uq_measurements_key"),
        Index("ix_measurements_commit_sha", "commit_sha"),
    )

    evaluation_id: Mapped[str] = mapped_column(String)
    commit_sha: Mapped[str] = mapped_column(String)
    config_id: Mapped[str] = mapped_column(String)
    arm: Mapped[str] = mapped_column(String)
    stage: Mapped[str] = mapped_column(String)


class VerdictRow(IndexRowMixin, Base):
    """Query index of verdict entries."""

    __tablename__ = "verdicts"
    __table_args__ = (Index("ix_verdicts_candidate_sha", "candidate_sha"),)

    candidate_sha: Mapped[str] = mapped_column(String)
    verdict: Mapped[str] = mapped_column(String)
    stage: Mapped[str] = mapped_column(String)


class MessageRow(IndexRowMixin, Base):
    """Query index of message entries."""

    __tablename__ = "messages"

    kind: Mapped[str] = mapped_column(String)
    author: Mapped[str] = mapped_column(String)


class FingerprintRow(IndexRowMixin, Base):
    """Query index of fingerprint entries; a fingerprint is stored once."""

    __tablename__ = "fingerprints"

    fingerprint_id: Mapped[str] = mapped_column(String(64), unique=True)


class EventRow(IndexRowMixin, Base):
    """Query index of event entries."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_kind", "kind"),)

    kind: Mapped[str] = mapped_column(String)


def table(model: type[Base]) -> Table:
    """The Core Table of a mapped class."""
    found = Base.metadata.tables[model.__tablename__]
    return found


def index_model(kind: EntryKind) -> type[Base]:
    """The index table class of an entry kind."""
    match kind:
        case EntryKind.CANDIDATE:
            return CandidateRow
        case EntryKind.MEASUREMENT:
            return MeasurementRow
        case EntryKind.VERDICT:
            return VerdictRow
        case EntryKind.MESSAGE:
            return MessageRow
        case EntryKind.FINGERPRINT:
            return FingerprintRow
        case EntryKind.EVENT:
            return EventRow


def index_table(kind: EntryKind) -> Table:
    """The Core Table indexing entries of a kind."""
    return table(index_model(kind))


def index_columns(kind: EntryKind) -> tuple[str, ...]:
    """Columns of a kind's index table that copy payload fields (all but seq)."""
    return tuple(column.name for column in index_table(kind).columns if column.name != "seq")


def index_values(kind: EntryKind, payload: dict[str, Any]) -> dict[str, Any]:
    """The index-row values an entry's payload implies (missing fields read as None)."""
    return {name: payload.get(name) for name in index_columns(kind)}


def all_tables() -> list[Table]:
    """Every ledger table, parents before children."""
    return list(Base.metadata.sorted_tables)


def sqlite_append_only_triggers(target: Table) -> dict[str, str]:
    """SQLite DDL (trigger name -> CREATE TRIGGER text) that makes a table append-only.

    Besides UPDATE and DELETE, refuse an INSERT that collides with an existing key: INSERT OR
    REPLACE deletes the old row without firing DELETE triggers (recursive_triggers is off).
    """
    name = target.name
    keys = {tuple(column.name for column in target.primary_key.columns)}
    keys |= {
        tuple(column.name for column in constraint.columns)
        for constraint in target.constraints
        if isinstance(constraint, UniqueConstraint)
    }
    keys |= {(column.name,) for column in target.columns if column.unique}
    collision = " OR ".join(
        "(" + " AND ".join(f"{column} = NEW.{column}" for column in key) + ")"
        for key in sorted(keys)
    )
    triggers = {}
    for operation in ("UPDATE", "DELETE"):
        trigger = f"ratchet_{name}_no_{operation.lower()}"
        triggers[trigger] = (
            f"CREATE TRIGGER {trigger} BEFORE {operation} ON {name} BEGIN "
            f"SELECT RAISE(ABORT, '{APPEND_ONLY_MARKER}: {operation} on {name} refused'); END"
        )
    trigger = f"ratchet_{name}_no_overwrite"
    triggers[trigger] = (
        f"CREATE TRIGGER {trigger} BEFORE INSERT ON {name} "
        f"WHEN EXISTS (SELECT 1 FROM {name} WHERE {collision}) BEGIN "
        f"SELECT RAISE(ABORT, '{APPEND_ONLY_MARKER}: INSERT over an existing row of {name} "
        "refused'); END"
    )
    return triggers
