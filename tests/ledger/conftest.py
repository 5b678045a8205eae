"""Fixtures: ledgers in real SQLite files under pytest's tmp_path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger


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
