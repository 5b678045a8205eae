"""PostgreSQL specifics: the append lock, the append-only triggers and their check, URLs."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from sqlalchemy import Connection, Table, text
from sqlalchemy.engine import URL

from ledger.errors import LedgerError

# Key of the transaction-level advisory lock every append takes (first 8 bytes of
# sha256("ratchet-ledger append"), signed). Advisory locks are per database, so two ledgers in
# two databases never wait for each other.
APPEND_LOCK_KEY: Final = 0x394401561A4F0E17
# The driver's own placeholder: the lock is taken through exec_driver_sql and, on the
# pipelined append path (ledger/pg_append.py), through psycopg itself.
APPEND_LOCK_SQL: Final = "SELECT pg_advisory_xact_lock(%s)"
REFUSE_FUNCTION: Final = "ratchet_ledger_refuse_change"
# The body of the trigger function, compared character for character by verify. No '%'
# placeholders: the driver would take them for its own parameters.
REFUSE_BODY: Final = (
    "\nBEGIN\n"
    "  RAISE EXCEPTION USING MESSAGE = 'ratchet ledger is append-only: ' || TG_OP || ' on ' "
    "|| TG_TABLE_NAME || ' refused';\n"
    "END\n"
)
# pg_trigger.tgtype bits: BEFORE (2) | DELETE (8) | UPDATE (16) | TRUNCATE (32), statement
# level (no ROW bit 1).
TRIGGER_TYPE: Final = 2 | 8 | 16 | 32
# 'A': fires always, even under session_replication_role = replica ('O' would skip it there).
TRIGGER_ENABLED: Final = "A"
CONNECT_TIMEOUT_S: Final = 10
DRIVER: Final = "postgresql+psycopg"


def normalized_url(url: URL) -> URL:
    """The URL with the one supported driver: psycopg 3 (plain postgresql:// means it too)."""
    if url.drivername == "postgresql":
        return url.set(drivername=DRIVER)
    if url.drivername != DRIVER:
        raise LedgerError(
            f"cannot open ledger {url.render_as_string(hide_password=True)}: driver "
            f"{url.drivername!r} is not supported; use a {DRIVER}://USER:PASSWORD@HOST/DB URL "
            "(psycopg 3 is installed with ratchet)"
        )
    return url


def connect_args(url: URL) -> dict[str, Any]:
    """Driver arguments: a bounded connect wait unless the URL sets its own."""
    return {} if "connect_timeout" in url.query else {"connect_timeout": CONNECT_TIMEOUT_S}


def lock_for_append(connection: Connection) -> None:
    """Wait for the ledger's append lock; held until this transaction commits or rolls back,
    so the head read after it is the head every other writer left."""
    connection.exec_driver_sql(APPEND_LOCK_SQL, (APPEND_LOCK_KEY,))


def trigger_name(target: Table | str) -> str:
    """Name of the append-only trigger of a table."""
    name = target if isinstance(target, str) else target.name
    return f"ratchet_{name}_append_only"


def install_triggers(connection: Connection, tables: list[Table]) -> None:
    """Create the refusing function and one statement-level trigger per table, enabled
    ALWAYS. Statement level: refused even when no row matches, and TRUNCATE (which fires no
    row triggers) is covered; INSERT ... ON CONFLICT DO UPDATE and MERGE fire UPDATE too."""
    connection.exec_driver_sql(
        f"CREATE FUNCTION {REFUSE_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $body${REFUSE_BODY}$body$"
    )
    for target in tables:
        trigger = trigger_name(target)
        connection.exec_driver_sql(
            f"CREATE TRIGGER {trigger} BEFORE UPDATE OR DELETE OR TRUNCATE ON {target.name} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {REFUSE_FUNCTION}()"
        )
        connection.exec_driver_sql(f"ALTER TABLE {target.name} ENABLE ALWAYS TRIGGER {trigger}")


class _Trigger(NamedTuple):
    """What pg_trigger and pg_proc say about one trigger."""

    tgtype: int
    enabled: str
    conditional: bool
    columns: int
    function: str
    body: str


_TRIGGERS_SQL: Final = text(
    "SELECT c.relname AS table_name, t.tgname AS name, t.tgtype AS tgtype, "
    "t.tgenabled AS enabled, t.tgqual IS NOT NULL AS conditional, "
    "coalesce(array_length(t.tgattr::int2[], 1), 0) AS columns, "
    "p.proname AS function, p.prosrc AS body "
    "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid "
    "WHERE NOT t.tgisinternal AND pg_table_is_visible(c.oid)"
)


def trigger_problem(connection: Connection, tables: list[Table]) -> str | None:
    """The first append-only trigger that is missing, disabled or altered, if any."""
    present = {
        (row.table_name, row.name): _Trigger(
            int(row.tgtype), str(row.enabled), row.conditional, row.columns, row.function, row.body
        )
        for row in connection.execute(_TRIGGERS_SQL)
    }
    for target in tables:
        name = trigger_name(target)
        found = present.get((target.name, name))
        state = _trigger_state(found)
        if state is not None:
            return (
                f"append-only trigger {name} on table {target.name} is {state}: the database "
                "no longer refuses changes to that table; treat this ledger as tampered"
            )
    return None


def _trigger_state(found: _Trigger | None) -> str | None:
    if found is None:
        return "missing"
    if found.enabled == "D":
        return "disabled"
    if found.enabled != TRIGGER_ENABLED:
        return f"not enabled ALWAYS (tgenabled {found.enabled!r}: replication sessions skip it)"
    if found.tgtype != TRIGGER_TYPE or found.conditional or found.columns:
        return "altered (it no longer fires before every UPDATE, DELETE and TRUNCATE)"
    if found.function != REFUSE_FUNCTION or found.body != REFUSE_BODY:
        return f"altered (its function {found.function}() no longer refuses the change)"
    return None
