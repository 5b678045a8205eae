"""The ledger on a real PostgreSQL server: the same behaviour as on SQLite, the schema from
the migrations, version checks, and clean errors for a server that cannot be reached."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table

import tests.ledger.test_store as store_tests
from ledger import (
    SCHEMA_VERSION,
    Ledger,
    LedgerError,
    LedgerNotFoundError,
    LedgerUnavailableError,
    NotALedgerError,
    SchemaVersionError,
)
from ledger.db import make_engine
from ledger.models import MIGRATION_TABLE, SCHEMA_REVISION, Base, all_tables
from ledger.postgres import trigger_name
from tests.ledger import factories
from tests.ledger.postgres_server import LEDGER_PASSWORD, PostgresServer, free_port

ROOT = Path(__file__).resolve().parents[2]
# Every SQLite test of test_store that needs only a ledger runs unchanged on PostgreSQL.
STORE_TESTS: dict[str, Callable[[Ledger], Any]] = {
    name: function
    for name, function in vars(store_tests).items()
    if name.startswith("test_") and list(inspect.signature(function).parameters) == ["ledger"]
}


def test_the_store_tests_are_found() -> None:
    assert len(STORE_TESTS) >= 10
    assert "test_every_record_type_round_trips" in STORE_TESTS


@pytest.mark.parametrize("name", sorted(STORE_TESTS))
def test_store_behaves_as_on_sqlite(pg_ledger: Ledger, name: str) -> None:
    STORE_TESTS[name](pg_ledger)


def test_migrations_create_the_schema_and_reopening_changes_nothing(
    postgres_server: PostgresServer, pg_database: str, pg_url: str
) -> None:
    with Ledger.open(pg_url) as ledger:
        seqs = ledger.append_many(factories.one_of_each())
        head = ledger.head()
    for _ in range(3):
        with Ledger.open(pg_url, create=False) as ledger:
            assert ledger.head() == head
    with postgres_server.connect(pg_database) as raw:
        tables = {
            row[0]
            for row in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        assert tables == {target.name for target in all_tables()} | {MIGRATION_TABLE}
        assert raw.execute(f"SELECT * FROM {MIGRATION_TABLE}").fetchall() == [(SCHEMA_REVISION,)]
        info = raw.execute("SELECT id, application, version FROM schema_info").fetchall()
        assert info == [(1, "ratchet-ledger", SCHEMA_VERSION)]
        triggers = {
            row[0] for row in raw.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        }
        assert triggers == {trigger_name(target) for target in all_tables()}
        assert raw.execute("SELECT count(*) FROM entries").fetchone() == (len(seqs),)


def test_models_agree_with_the_migrations_on_postgresql(pg_ledger: Ledger, pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"version_table": MIGRATION_TABLE}
            )
            assert compare_metadata(context, Base.metadata) == []
            drifted = MetaData()
            for source in Base.metadata.sorted_tables:
                source.to_metadata(drifted)
            Table("events", drifted, Column("extra", Integer), extend_existing=True)
            assert [diff[0] for diff in compare_metadata(context, drifted)] == ["add_column"]
    finally:
        engine.dispose()


def test_postgresql_without_a_driver_means_psycopg(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with Ledger.open(plain) as ledger:
        ledger.append(factories.event())
        assert ledger.verify().ok
    assert LEDGER_PASSWORD not in repr(ledger)


def test_an_empty_database_with_create_false_is_not_found(pg_url: str) -> None:
    with pytest.raises(LedgerNotFoundError, match="the database is empty") as caught:
        Ledger.open(pg_url, create=False)
    assert LEDGER_PASSWORD not in str(caught.value) and "***" in str(caught.value)


def test_another_applications_database_is_not_a_ledger(
    postgres_server: PostgresServer, pg_database: str, pg_url: str
) -> None:
    with postgres_server.connect(pg_database, user="ratchet") as raw:
        raw.execute("CREATE TABLE people (name text)")
    with pytest.raises(NotALedgerError, match="people"):
        Ledger.open(pg_url)


def behind_the_trigger(server: PostgresServer, database: str, table: str, statement: str) -> None:
    """As the tables' owner: disable a table's append-only trigger, change it, re-enable it."""
    trigger = trigger_name(table)
    with server.connect(database, user="ratchet") as raw:
        raw.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}".encode())
        raw.execute(statement.encode())
        raw.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}".encode())


def test_a_newer_schema_version_is_refused(
    postgres_server: PostgresServer, pg_database: str, pg_ledger: Ledger, pg_url: str
) -> None:
    statement = f"UPDATE schema_info SET version = {SCHEMA_VERSION + 1}"
    behind_the_trigger(postgres_server, pg_database, "schema_info", statement)
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}"):
        Ledger.open(pg_url)


def test_an_unknown_migration_is_refused(
    postgres_server: PostgresServer, pg_database: str, pg_ledger: Ledger, pg_url: str
) -> None:
    with postgres_server.connect(pg_database, user="ratchet") as raw:
        raw.execute(f"UPDATE {MIGRATION_TABLE} SET version_num = '9999'")
    with pytest.raises(SchemaVersionError, match="migration '9999'") as caught:
        Ledger.open(pg_url)
    assert LEDGER_PASSWORD not in str(caught.value)


def assert_clean(message: str, fix: str) -> None:
    """What a user sees: the URL without password, no SQLAlchemy statement or link, the fix."""
    assert LEDGER_PASSWORD not in message, message
    assert "[SQL" not in message and "sqlalche.me" not in message, message
    assert "ratchet:***@127.0.0.1" in message and fix in message, message


def test_an_unreachable_server_is_a_clean_error(postgres_server: PostgresServer) -> None:
    url = postgres_server.url("ledger").replace(f":{postgres_server.port}/", f":{free_port()}/")
    with pytest.raises(
        LedgerUnavailableError, match="cannot connect to the ledger database"
    ) as caught:
        Ledger.open(url)
    assert "Connection refused" in str(caught.value)
    assert_clean(str(caught.value), "start the server")


def test_a_wrong_password_is_a_clean_error(
    postgres_server: PostgresServer, pg_database: str
) -> None:
    url = postgres_server.url(pg_database, password="not-the-" + LEDGER_PASSWORD)
    with pytest.raises(LedgerUnavailableError, match="password authentication failed") as caught:
        Ledger.open(url)
    assert "not-the-" not in str(caught.value)
    assert_clean(str(caught.value), "fix the user or password")


def test_a_missing_database_is_a_clean_error(postgres_server: PostgresServer) -> None:
    with pytest.raises(LedgerUnavailableError, match="does not exist") as caught:
        Ledger.open(postgres_server.url("no_such_database"))
    assert_clean(str(caught.value), "createdb NAME")


def test_a_role_without_rights_gets_a_clean_error(
    postgres_server: PostgresServer, pg_database: str
) -> None:
    postgres_server.admin("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'")
    url = postgres_server.url(pg_database, user="reader", password="reader-pw")
    with pytest.raises(LedgerError, match="permission denied") as caught:
        Ledger.open(url)
    assert "reader-pw" not in str(caught.value) and "[SQL" not in str(caught.value)


def test_a_connection_lost_mid_transaction_is_clean_and_the_next_call_reconnects(
    postgres_server: PostgresServer, pg_database: str, pg_ledger: Ledger
) -> None:
    pg_ledger.append(factories.event(n=1))
    engine = pg_ledger._require_engine()
    lost = pytest.raises(LedgerUnavailableError, match="lost the connection to")
    with lost as caught, engine.connect() as connection:
        pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        postgres_server.admin(f"SELECT pg_terminate_backend({pid})")
        connection.exec_driver_sql("SELECT 1")
    assert_clean(str(caught.value), "start the server")
    # A restarted server kills every pooled connection: the next call checks and reconnects.
    postgres_server.admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{pg_database}' AND pid <> pg_backend_pid()"
    )
    assert pg_ledger.append(factories.event(n=2)) == 2
    assert pg_ledger.verify().ok


def test_opening_a_current_ledger_does_not_import_alembic(
    postgres_server: PostgresServer, pg_ledger: Ledger, pg_url: str
) -> None:
    empty = postgres_server.url(postgres_server.create_database())
    code = (
        "import sys; from ledger import Ledger; "
        f"Ledger.open({pg_url!r}, create=False).close(); "
        "assert 'alembic' not in sys.modules, 'alembic was imported'; "
        # The probe can fail: creating a ledger does import it.
        f"Ledger.open({empty!r}).close(); assert 'alembic' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
