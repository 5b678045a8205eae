"""Fixtures: ledgers in real SQLite files under pytest's tmp_path, and on a real PostgreSQL
server started for the session."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger
from tests.ledger.postgres_server import PostgresServer, find_bindir


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """Path of a not-yet-created ledger file."""
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def ledger(ledger_path: Path) -> Iterator[Ledger]:
    """A fresh, open, empty ledger."""
    with Ledger.open_path(ledger_path) as opened:
        yield opened


@pytest.fixture
def raw(ledger: Ledger, ledger_path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection to the ledger file (autocommit), bypassing the Ledger."""
    connection = sqlite3.connect(ledger_path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session: initdb in a temporary directory, listening on a
    free port of 127.0.0.1 only; stopped and deleted at the end."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in "
            "/usr/lib/postgresql/*/bin: install Debian's postgresql package (.ci/run does)"
        )
    server = PostgresServer.start(bindir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(postgres_server: PostgresServer) -> str:
    """Name of a new, empty database owned by the ledger user."""
    return postgres_server.create_database()


@pytest.fixture
def pg_url(postgres_server: PostgresServer, pg_database: str) -> str:
    """URL of that database as the ledger user, password included."""
    return postgres_server.url(pg_database)


@pytest.fixture
def pg_ledger(pg_url: str) -> Iterator[Ledger]:
    """A fresh, open, empty ledger on PostgreSQL."""
    with Ledger.open(pg_url) as opened:
        yield opened
