"""Engine set-up (SQLite pragmas, PostgreSQL options, write locking, error translation) and the
schema: created and upgraded through the migrations, checked on every open."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, create_engine, event, inspect, select
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import DatabaseError, OperationalError

from ledger import postgres
from ledger.errors import (
    AppendOnlyViolation,
    CorruptLedgerError,
    LedgerError,
    LedgerNotFoundError,
    LedgerUnavailableError,
    NotALedgerError,
    SchemaVersionError,
)
from ledger.migrate import known_revisions, stored_revision, upgrade
from ledger.models import (
    APPEND_ONLY_MARKER,
    APPLICATION_ID,
    LEGACY_REVISION,
    SCHEMA_REVISION,
    SCHEMA_VERSION,
    SchemaInfo,
    all_tables,
    sqlite_append_only_triggers,
)

BUSY_TIMEOUT_MS: Final = 60_000
# SQLite's result code for a damaged file (a corrupt page, a broken b-tree).
SQLITE_CORRUPT: Final = 11
# Execution option marking a connection whose transactions must hold the write lock from BEGIN.
WRITE_OPTION: Final = "ratchet_ledger_write"
# Key of a pooled PostgreSQL connection's info: set once it was returned to the pool, where
# the server may have dropped it (a connection opened for the call has no such past).
POOLED_INFO: Final = "ratchet_ledger_pooled"


def describe(url: URL | str) -> str:
    """Where the ledger is, as shown in messages: the file of a SQLite ledger, else the URL
    with its password hidden."""
    url = make_url(url)
    path = sqlite_file(url)
    return str(path) if path is not None else url.render_as_string(hide_password=True)


def _without_password(text: str, url: URL | None) -> str:
    """text with the URL's password masked (drivers may echo parts of what they were given)."""
    password = None if url is None else url.password
    return text.replace(str(password), "***") if password else text


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
    """Create an engine configured for the ledger: SQLite (a file or memory) or PostgreSQL."""
    url = make_url(url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(url)
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
    elif backend == "postgresql":
        url = postgres.normalized_url(url)
        # Readers get one snapshot for all the statements of a query or a verify; appenders
        # switch to READ COMMITTED (write_transaction, pg_append) so that the head they read
        # after the append lock is the latest committed one. No pre-ping: it would cost every
        # call a round trip. A connection that died in the pool (a server restarted during a
        # long run) fails its call's first round trip instead, before anything was written,
        # and the call is made again on a new connection (Ledger._read, pg_append.append).
        engine = create_engine(
            url, isolation_level="REPEATABLE READ", connect_args=postgres.connect_args(url)
        )
        event.listen(engine, "checkin", _on_postgres_checkin)
    else:
        raise LedgerError(
            f"cannot open ledger {describe(url)}: backend {backend!r} is not supported; use "
            "sqlite:///PATH (the default) or postgresql+psycopg://USER:PASSWORD@HOST/DATABASE"
        )
    event.listen(engine, "handle_error", _translate_error)
    return engine


def _on_postgres_checkin(_dbapi_connection: Any, record: Any) -> None:
    # From now on the server may drop this connection while it waits in the pool.
    if record is not None:
        record.info[POOLED_INFO] = True


def _on_sqlite_connect(dbapi_connection: Any, _connection_record: Any) -> None:
    # Stop pysqlite from issuing its own (deferred) BEGIN so that _on_sqlite_begin decides.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        # busy_timeout first: switching to WAL may itself have to wait for another process.
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _switch_to_wal(cursor)
        # A commit is on disk before append() returns: the head journal, written after the
        # commit, must never name a head the database could lose in a crash.
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    # SQLite answers "database is locked" at once, without its busy handler, when another
    # process holds the file's lock while it is still in rollback mode (a fresh ledger that a
    # second process is creating): wait for it here, up to the busy timeout.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _on_sqlite_begin(connection: Connection) -> None:
    # An appender must own the write lock before it reads the head hash, otherwise two
    # processes could both link to the same head; readers keep a deferred snapshot.
    if connection.get_execution_options().get(WRITE_OPTION):
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        connection.exec_driver_sql("BEGIN")


def _translate_error(context: ExceptionContext) -> BaseException | None:
    original = context.original_exception
    url = None if context.engine is None else context.engine.url
    if APPEND_ONLY_MARKER in str(original):
        return AppendOnlyViolation(
            f"{driver_reason(original)}; the ledger can only be appended to — record a new "
            f"entry instead of changing an old one (statement: {context.statement})"
        )
    # No connection yet: connecting failed. is_disconnect: the server went away mid-query.
    lost = context.connection is None or context.is_disconnect
    if context.dialect.name == "postgresql" and lost:
        return _unavailable(context, url)
    damage = _damage(original)
    if damage is not None:
        where = "the ledger" if url is None else f"ledger {describe(url)}"
        return CorruptLedgerError(
            f"{where} is damaged: {damage}; restore the file from a backup (or start a new "
            "ledger: SQLite's `.recover` command may save what is still readable)"
        )
    return None


def _unavailable(context: ExceptionContext, url: URL | None) -> LedgerUnavailableError | None:
    if not isinstance(context.sqlalchemy_exception, OperationalError):
        return None
    connected = context.connection is not None
    return unavailable_error(url, context.original_exception, connected)


def unavailable_error(
    url: URL | None, original: BaseException, connected: bool
) -> LedgerUnavailableError:
    """The error for a server that refused a connection (connected=False) or dropped one."""
    where = "the ledger database" if url is None else f"the ledger database {describe(url)}"
    what = "lost the connection to" if connected else "cannot connect to"
    reason = _without_password(driver_reason(original), url)
    return LedgerUnavailableError(
        f"{what} {where}: {reason}; {_connect_fix(reason)} (the URL comes from --ledger or "
        "the settings file's `ledger`)"
    )


def _connect_fix(reason: str) -> str:
    if "does not exist" in reason:
        return (
            "create the database first (createdb NAME; a ledger never creates one), or fix its name"
        )
    if "authentication" in reason or "password" in reason:
        return "fix the user or password in the URL"
    return "start the server (or wait for it), or fix the host and port in the URL"


def _damage(original: BaseException) -> str | None:
    """What is wrong when an error means the file's content is damaged; None otherwise."""
    if getattr(original, "sqlite_errorcode", None) == SQLITE_CORRUPT:
        return "SQLite cannot read part of the file (a corrupt page)"
    if isinstance(original, sqlite3.OperationalError) and "decode to UTF-8" in str(original):
        return "a stored text is not valid UTF-8 (the bytes of a page were altered)"
    return None


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the ledger's write lock from its first statement (SQLite:
    BEGIN IMMEDIATE; PostgreSQL: the append advisory lock, under READ COMMITTED)."""
    with engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        postgresql = connection.dialect.name == "postgresql"
        if postgresql:
            connection.execution_options(isolation_level="READ COMMITTED")
        with connection.begin():
            if postgresql:
                postgres.lock_for_append(connection)
            yield connection


def prepare_schema(engine: Engine, url: URL, create: bool) -> None:
    """Create the schema in an empty database or apply missing migrations; check that an
    existing ledger is one this code reads."""
    where = describe(url)
    try:
        with engine.connect() as connection:
            current = _is_current(connection, where, create)
        if current:
            return
        with write_transaction(engine) as connection:
            # Re-check under the write lock: another process may have created it meanwhile.
            if not _is_current(connection, where, create):
                upgrade(connection)
    except (DatabaseError, sqlite3.DatabaseError) as exc:
        translated = _open_error(exc, engine, where)
        if translated is exc:
            raise
        raise translated from exc


def _open_error(exc: Exception, engine: Engine, where: str) -> Exception:
    """What to raise for a database error while opening: what failed, where, the fix."""
    reason = _without_password(driver_reason(exc), engine.url)
    if engine.dialect.name != "sqlite":
        return LedgerError(
            f"cannot open ledger {where}: the database refused it ({reason}); check that the "
            "URL's user may read that database and, for a new ledger, create tables in it"
        )
    # Operational errors (locked, disk I/O, permissions) are real failures, not a verdict on
    # what the file is: let them through unchanged.
    if isinstance(exc, OperationalError | sqlite3.OperationalError):
        return exc
    return NotALedgerError(
        f"cannot open ledger {where}: the file is not a readable SQLite database ({reason}); "
        "point the ledger at a ledger file or at a new path"
    )


def _is_current(connection: Connection, where: str, create: bool) -> bool:
    """True when the database holds a ledger at this code's revision; False when it is empty
    (and create is set) or at an older revision the migrations upgrade; raises otherwise."""
    tables = set(inspect(connection).get_table_names())
    if not tables:
        if not create:
            raise LedgerNotFoundError(
                f"no ledger at {where}: the database is empty; pass create=True to start one"
            )
        return False
    version = _check_version(connection, where, tables)
    stored = stored_revision(connection, tables)
    revision = LEGACY_REVISION if stored is None else stored
    if revision == SCHEMA_REVISION:
        _check_current_version(version, where)
        return True
    if revision not in known_revisions():
        raise SchemaVersionError(
            f"ledger {where} is at migration {revision!r}, which this code does not know (a "
            f"newer ratchet wrote it; this one reads up to {SCHEMA_REVISION!r}); upgrade "
            "ratchet to read it"
        )
    return False


def _check_version(connection: Connection, where: str, tables: set[str]) -> int:
    """The schema version of a database that must be a ledger written by this code or older."""
    if SchemaInfo.__tablename__ not in tables:
        raise NotALedgerError(
            f"{where} is not a ratchet ledger: it has tables {sorted(tables)} but no "
            f"{SchemaInfo.__tablename__}; open a ledger, or a new file or empty database"
        )
    row = connection.execute(select(SchemaInfo.application, SchemaInfo.version)).first()
    if row is None or row.application != APPLICATION_ID:
        found = None if row is None else row.application
        raise NotALedgerError(
            f"{where} is not a ratchet ledger: schema_info names application {found!r}, "
            f"expected {APPLICATION_ID!r}; open a ledger, or a new file or empty database"
        )
    if row.version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"ledger {where} has schema version {row.version}, this code reads version "
            f"{SCHEMA_VERSION}; upgrade ratchet to read it"
        )
    version: int = row.version
    return version


def _check_current_version(version: int, where: str) -> None:
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"ledger {where} has schema version {version} at migration {SCHEMA_REVISION!r}, "
            f"which has version {SCHEMA_VERSION}: schema_info was edited; restore the ledger "
            "from a backup"
        )


def trigger_problem(connection: Connection) -> str | None:
    """Describe the first append-only trigger that is missing, disabled or altered, if any."""
    if connection.dialect.name == "postgresql":
        return postgres.trigger_problem(connection, all_tables())
    return _sqlite_trigger_problem(connection)


def _sqlite_trigger_problem(connection: Connection) -> str | None:
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
