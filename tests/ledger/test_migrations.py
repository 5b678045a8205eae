"""The schema comes from the migrations: on SQLite exactly the schema of the ledgers written
before migrations existed, which still open, verify and take appends unchanged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table

from ledger import Ledger, SchemaVersionError
from ledger.db import make_engine
from ledger.migrate import MIGRATIONS_DIR, head_revision, upgrade
from ledger.models import MIGRATION_TABLE, SCHEMA_REVISION, Base
from tests.ledger import factories

ROOT = Path(__file__).resolve().parents[2]
LEGACY_DUMP = Path(__file__).with_name("data") / "legacy_v1.sql"
# The head of the ledger in LEGACY_DUMP, written by the code before migrations (one record of
# every kind, factories.one_of_each()).
LEGACY_HEAD = (6, "98618dfcd2a400435c2f863ebcd4d7c94f34e3b10fdcadc9b01a39ac5514e709")
SCHEMA_SQL = "SELECT type, name, tbl_name, sql FROM sqlite_master"


def restore_legacy(path: Path) -> None:
    """Rebuild the pre-migration ledger file from its SQL dump."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(LEGACY_DUMP.read_text(encoding="utf-8"))
    finally:
        connection.close()


def schema_of(path: Path) -> set[tuple[str, str, str, str | None]]:
    connection = sqlite3.connect(path)
    try:
        return set(connection.execute(SCHEMA_SQL))
    finally:
        connection.close()


def test_schema_revision_is_the_head_of_the_shipped_migrations() -> None:
    assert head_revision() == SCHEMA_REVISION
    assert (MIGRATIONS_DIR / "env.py").is_file()


def test_migrations_create_exactly_the_pre_migration_schema(tmp_path: Path) -> None:
    legacy, new = tmp_path / "legacy.sqlite", tmp_path / "new.sqlite"
    restore_legacy(legacy)
    Ledger.open_path(new).close()
    extra = {row for row in schema_of(new) - schema_of(legacy) if MIGRATION_TABLE in row[2]}
    assert schema_of(new) - extra == schema_of(legacy)  # tables, indexes, triggers: same SQL
    assert {row[1] for row in extra} == {MIGRATION_TABLE, f"sqlite_autoindex_{MIGRATION_TABLE}_1"}


def test_models_agree_with_the_migrations(ledger_path: Path) -> None:
    Ledger.open_path(ledger_path).close()
    engine = make_engine(f"sqlite:///{ledger_path}")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"version_table": MIGRATION_TABLE}
            )
            assert compare_metadata(context, Base.metadata) == []
            # The comparison can fail: a model with a column the migrations never made.
            drifted = MetaData()
            for source in Base.metadata.sorted_tables:
                source.to_metadata(drifted)
            Table("entries", drifted, Column("extra", Integer), extend_existing=True)
            diffs = compare_metadata(context, drifted)
    finally:
        engine.dispose()
    assert [diff[0] for diff in diffs] == ["add_column"]


def test_a_pre_migration_ledger_opens_verifies_and_appends(ledger_path: Path) -> None:
    restore_legacy(ledger_path)
    with Ledger.open_path(ledger_path, create=False) as ledger:
        assert ledger.head() == LEGACY_HEAD
        report = ledger.verify()
        assert report.ok, report.problem
        assert report.entries_checked == 6
    # Opening it wrote nothing: no revision table (a read-only copy opens the same way).
    assert MIGRATION_TABLE not in {row[1] for row in schema_of(ledger_path)}
    with Ledger.open_path(ledger_path) as ledger:
        assert ledger.append(factories.event("after", 1)) == 7
        assert ledger.verify().ok


def test_upgrading_a_pre_migration_ledger_stamps_it_and_changes_nothing(ledger_path: Path) -> None:
    restore_legacy(ledger_path)
    before = schema_of(ledger_path)
    engine = make_engine(f"sqlite:///{ledger_path}")
    try:
        with engine.begin() as connection:
            upgrade(connection)
    finally:
        engine.dispose()
    added = schema_of(ledger_path) - before
    assert {row[1] for row in added} == {MIGRATION_TABLE, f"sqlite_autoindex_{MIGRATION_TABLE}_1"}
    raw = sqlite3.connect(ledger_path)
    try:
        assert raw.execute(f"SELECT * FROM {MIGRATION_TABLE}").fetchall() == [("0001",)]
    finally:
        raw.close()
    with Ledger.open_path(ledger_path, create=False) as ledger:
        assert ledger.head() == LEGACY_HEAD and ledger.verify().ok


def test_an_unknown_revision_is_refused(ledger_path: Path) -> None:
    Ledger.open_path(ledger_path).close()
    connection = sqlite3.connect(ledger_path, isolation_level=None)
    try:
        connection.execute(f"UPDATE {MIGRATION_TABLE} SET version_num = '9999'")
    finally:
        connection.close()
    with pytest.raises(SchemaVersionError, match=r"migration '9999'.*upgrade ratchet"):
        Ledger.open_path(ledger_path)


def test_the_alembic_cli_is_pointed_at_ledger_open() -> None:
    # Without the connection Ledger.open passes, env.py refuses, naming what to do instead.
    code = (
        "from alembic.config import Config; from alembic import command; c = Config(); "
        f"c.set_main_option('script_location', {str(MIGRATIONS_DIR)!r}); "
        "command.upgrade(c, 'head')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode != 0
    assert "Ledger.open(URL)" in result.stderr
