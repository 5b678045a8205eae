"""Revision 0001: the hash-chained entries, their index tables, schema_info and the triggers."""

# Frozen: the schema of every ledger created before migrations existed (they have no revision
# table and are read as this revision). Later changes go in new revisions, never here.

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from ledger.models import sqlite_append_only_triggers
from ledger.postgres import install_triggers

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _index_table(name: str, *items: Any) -> sa.Table:
    """An index table: its own columns first, then seq, the key that references its entry."""
    table: sa.Table = op.create_table(
        name,
        *items,
        sa.Column(
            "seq", sa.Integer(), sa.ForeignKey("entries.seq"), autoincrement=False, nullable=False
        ),
        sa.PrimaryKeyConstraint("seq"),
    )
    return table


def _chain_tables() -> tuple[sa.Table, sa.Table]:
    """schema_info and entries, the chain itself."""
    schema_info = op.create_table(
        "schema_info",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("application", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.CheckConstraint("id = 1", name="schema_info_single_row"),
    )
    entries = op.create_table(
        "entries",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_entries_kind", "entries", ["kind"])
    return schema_info, entries


def _index_tables() -> dict[str, sa.Table]:
    """The index tables of the entry kinds, by name."""
    candidates = _index_table(
        "candidates",
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("parent_sha", sa.String(64), nullable=True),
        sa.Column("tree_sha", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("idea_id", sa.String(), nullable=True),
        sa.Column("agent", sa.String(), nullable=False),
        sa.UniqueConstraint("sha"),
    )
    op.create_index("ix_candidates_parent_sha", "candidates", ["parent_sha"])
    measurements = _index_table(
        "measurements",
        sa.Column("evaluation_id", sa.String(), nullable=False),
        sa.Column("commit_sha", sa.String(), nullable=False),
        sa.Column("config_id", sa.String(), nullable=False),
        sa.Column("arm", sa.String(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.UniqueConstraint("evaluation_id", "config_id", "arm", name="uq_measurements_key"),
    )
    op.create_index("ix_measurements_commit_sha", "measurements", ["commit_sha"])
    verdicts = _index_table(
        "verdicts",
        sa.Column("candidate_sha", sa.String(), nullable=False),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
    )
    op.create_index("ix_verdicts_candidate_sha", "verdicts", ["candidate_sha"])
    messages = _index_table(
        "messages",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("author", sa.String(), nullable=False),
    )
    fingerprints = _index_table(
        "fingerprints",
        sa.Column("fingerprint_id", sa.String(64), nullable=False),
        sa.UniqueConstraint("fingerprint_id"),
    )
    events = _index_table("events", sa.Column("kind", sa.String(), nullable=False))
    op.create_index("ix_events_kind", "events", ["kind"])
    tables = [candidates, measurements, verdicts, messages, fingerprints, events]
    return {table.name: table for table in tables}


def _tables() -> list[sa.Table]:
    """Create every table, parents before children, in the order the first ledgers had; return
    them in the order those ledgers created their triggers (sorted_tables: by name after
    dependencies)."""
    schema_info, entries = _chain_tables()
    index = _index_tables()
    op.bulk_insert(schema_info, [{"id": 1, "application": "ratchet-ledger", "version": 1}])
    return [entries, schema_info, *(index[name] for name in sorted(index))]


def upgrade() -> None:
    """Create the schema and make every table append-only in the database itself."""
    tables = _tables()
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for target in tables:
            for ddl in sqlite_append_only_triggers(target).values():
                bind.exec_driver_sql(ddl)
    else:
        install_triggers(bind, tables)


def downgrade() -> None:
    """A ledger is never dropped by a migration: that would destroy the record."""
    raise NotImplementedError(
        "revision 0001 cannot be downgraded: it would drop the whole ledger; copy what you need "
        "and drop the database yourself"
    )
