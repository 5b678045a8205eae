"""Engine set-up (SQLite pragmas, write locking, error translation) and schema creation/checks."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, create_engine, event, insert, inspect, select
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import DatabaseError, OperationalError

from ledger.errors import (
    AppendOnlyViolation,
    CorruptLedgerError,
    LedgerError,
    LedgerNotFoundError,
    NotALedgerError,
    SchemaVersionError,
)
from ledger.models import (
    APPEND_ONLY_MARKER,
    APPLICATION_ID,
    SCHEMA_VERSION,
    Base,
    SchemaInfo,
    all_tables,
    sqlite_append_only_triggers,
)

BUSY_TIMEOUT_MS: Final = 60_000
# SQLite's result code for a damaged file (a corrupt page, a broken b-tree).
SQLITE_CORRUPT: Final = 11
# Execution option marking a connection whose transactions must hold the write lock from BEGIN.
WRITE_OPTION: Final = "ratchet_ledger_write"


def describe(url: URL) -> str:
    """Where the ledger is, as shown in messages: the file of a SQLite ledger, else the URL
    with its password hidden."""
    path = sqlite_file(url)
    return str(path) if path is not None else url.render_as_string(hide_password=True)


def driver_reason(exc: BaseException) -> str:
    """The database's own one-line reason for an error, without SQLAlchemy's statement,
    parameters and links (what a user can act on)."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__


def sqlite_file(url: URL) -> Path | None:
    """The database file of a file-backed SQLite URL; None for memory or URI-mode databases."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if url.query.get("uri") or database.startswith("file:"):
        return None
    return Path(database)


def check_location(url: URL, create: bool) -> None:
    """Refuse to open a SQLite file whose directory is missing, or a missing file if not create."""
    path = sqlite_file(url)
    if path is None:
        return
    if not path.parent.is_dir():
        raise LedgerNotFoundError(
            f"cannot open ledger {path}: directory {path.parent} does not exist; create it "
            "first (the ledger never creates directories)"
        )
    if not create and not path.exists():
        raise LedgerNotFoundError(
            f"no ledger at {path}: the file does not exist; pass create=True to start a new one"
        )


def make_engine(url: URL | str) -> Engine:
    """Create an engine configured for the ledger (SQLite only for now)."""
    url = make_url(url)
    if url.get_backend_name() != "sqlite":
        raise LedgerError(
            f"cannot open ledger {describe(url)}: backend {url.get_backend_name()!r} is not "
            "supported yet; the append-only triggers and write lock exist for SQLite only — "
            "use a sqlite:/// URL"
        )
    engine = create_engine(url)
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    event.listen(engine, "handle_error", _translate_error)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _connection_record: Any) -> None:
    # Stop pysqlite from issuing its own (deferred) BEGIN so that _on_sqlite_begin decides.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        # busy_timeout first: switching to WAL may itself have to wait for another process.
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        # A commit is on disk before append() returns: the head journal, written after the
        # commit, must never name a head the database could lose in a crash.
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    # An appender must own the write lock before it reads the head hash, otherwise two
    # processes could both link to the same head; readers keep a deferred snapshot.
    if connection.get_execution_options().get(WRITE_OPTION):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        connection.exec_driver_sql("BEGIN")


def _translate_error(context: ExceptionContext) -> BaseException | None:
    original = context.original_exception
    if APPEND_ONLY_MARKER in str(original):
        return AppendOnlyViolation(
            f"{original}; the ledger can only be appended to — record a new entry instead of "
            f"changing an old one (statement: {context.statement})"
        )
    damage = _damage(original)
    if damage is not None:
        where = "the ledger" if context.engine is None else f"ledger {describe(context.engine.url)}"
        return CorruptLedgerError(
            f"{where} is damaged: {damage}; restore the file from a backup (or start a new "
            "ledger: SQLite's `.recover` command may save what is still readable)"
        )
    return None


def _damage(original: BaseException) -> str | None:
    """What is wrong when an error means the file's content is damaged; None otherwise."""
    if getattr(original, "sqlite_errorcode", None) == SQLITE_CORRUPT:
        return "SQLite cannot read part of the file (a corrupt page)"
    if isinstance(original, sqlite3.OperationalError) and "decode to UTF-8" in str(original):
        return "a stored text is not valid UTF-8 (the bytes of a page were altered)"
    return None


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the database write lock from its first statement."""
    with engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        with connection.begin():
            yield connection


def prepare_schema(engine: Engine, url: URL, create: bool) -> None:
    """Create the schema in an empty database, or check that an existing one is readable."""
    where = describe(url)
    try:
        with engine.connect() as connection:
            empty = _is_empty(connection)
            if not empty:
                _check_version(connection, where)
                return
        if not create:
            raise LedgerNotFoundError(
                f"no ledger at {where}: the database is empty; pass create=True to start one"
            )
        with write_transaction(engine) as connection:
            # Re-check under the write lock: another process may have created it meanwhile.
            if _is_empty(connection):
                create_schema(connection)
            else:
                _check_version(connection, where)
    except (DatabaseError, sqlite3.DatabaseError) as exc:
        # Operational errors (locked, disk I/O, permissions) are real failures, not a verdict
        # on what the file is: let them through unchanged.
        if isinstance(exc, OperationalError | sqlite3.OperationalError):
            raise
        raise NotALedgerError(
            f"cannot open ledger {where}: the file is not a readable SQLite database "
            f"({driver_reason(exc)}); point the ledger at a ledger file or at a new path"
        ) from exc


def _is_empty(connection: Connection) -> bool:
    return not inspect(connection).get_table_names()


def create_schema(connection: Connection) -> None:
    """Create every table, the append-only triggers and the schema_info row."""
    Base.metadata.create_all(connection)
    if connection.dialect.name == "sqlite":
        for target in all_tables():
            for ddl in sqlite_append_only_triggers(target).values():
                connection.exec_driver_sql(ddl)
    connection.execute(
        insert(SchemaInfo).values(id=1, application=APPLICATION_ID, version=SCHEMA_VERSION)
    )


def _check_version(connection: Connection, where: str) -> None:
    tables = set(inspect(connection).get_table_names())
    if SchemaInfo.__tablename__ not in tables:
        raise NotALedgerError(
            f"{where} is not a ratchet ledger: it has tables {sorted(tables)} but no "
            f"{SchemaInfo.__tablename__}; open a ledger file or choose a new path"
        )
    row = connection.execute(select(SchemaInfo.application, SchemaInfo.version)).first()
    if row is None or row.application != APPLICATION_ID:
        found = None if row is None else row.application
        raise NotALedgerError(
            f"{where} is not a ratchet ledger: schema_info names application {found!r}, "
            f"expected {APPLICATION_ID!r}; open a ledger file or choose a new path"
        )
    if row.version != SCHEMA_VERSION:
        newer = row.version > SCHEMA_VERSION
        fix = "upgrade ratchet to read it" if newer else "no migration exists for it"
        raise SchemaVersionError(
            f"ledger {where} has schema version {row.version}, this code reads version "
            f"{SCHEMA_VERSION}; {fix}"
        )


def sqlite_trigger_problem(connection: Connection) -> str | None:
    """Describe the first append-only trigger that is missing or altered, if any."""
    if connection.dialect.name != "sqlite":
        return None
    rows = connection.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
    present: dict[str, str] = {row.name: row.sql for row in rows}
    for target in all_tables():
        for name, ddl in sqlite_append_only_triggers(target).items():
            if present.get(name) != ddl:
                state = "missing" if name not in present else "altered"
                return (
                    f"append-only trigger {name} on table {target.name} is {state}: the database "
                    "no longer refuses changes to that table; treat this ledger as tampered"
                )
    return None
