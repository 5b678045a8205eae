"""Exceptions raised by the ledger; every one is a LedgerError."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error the ledger raises on purpose."""


class LedgerNotFoundError(LedgerError):
    """The ledger database (or the directory meant to hold it) does not exist."""


class LedgerUnavailableError(LedgerError):
    """The ledger's database server cannot be reached, or refused the connection."""


class NotALedgerError(LedgerError):
    """The database exists but is not a Ratchet ledger."""


class SchemaVersionError(LedgerError):
    """The database was written by a schema version this code cannot read."""


class DuplicateRecordError(LedgerError):
    """A record with the same unique key is already in the ledger."""


class AppendOnlyViolation(LedgerError):
    """The database refused an UPDATE, DELETE or overwriting INSERT on a ledger table."""


class CorruptLedgerError(LedgerError):
    """The database file is damaged: SQLite cannot read part of it (a corrupt page)."""


class JournalError(LedgerError):
    """The head journal beside the database cannot be written."""
