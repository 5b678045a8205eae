"""Alembic environment of the ledger: migrations run on the connection ledger.migrate passes."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from ledger.models import MIGRATION_TABLE, Base


def run_on_given_connection() -> None:
    """Run the migrations inside the caller's transaction (which holds the write lock)."""
    if context.is_offline_mode():
        raise RuntimeError(
            "the ledger's migrations cannot run offline (--sql): open the ledger with "
            "Ledger.open(URL), which applies them on the database itself"
        )
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError(
            "the ledger's migrations run only through ledger.migrate (Ledger.open), which "
            "passes the connection; there is no alembic.ini: open the ledger with "
            "Ledger.open(URL) instead of running alembic"
        )
    context.configure(
        connection=connection, target_metadata=Base.metadata, version_table=MIGRATION_TABLE
    )
    with context.begin_transaction():
        context.run_migrations()


run_on_given_connection()
