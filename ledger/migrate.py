"""Schema migrations: the alembic environment shipped in ledger/migrations, run programmatically."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, column, inspect, select, table

from ledger.models import LEGACY_REVISION, MIGRATION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR: Final = Path(__file__).with_name("migrations")


def _config(connection: Connection) -> Config:
    # alembic is imported only here: it is needed to create or upgrade a ledger, never to open
    # one that is current, and importing it costs every CLI command otherwise.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection) -> None:
    """Bring the database to the head revision inside the caller's transaction (which must
    hold the write lock): create the schema in an empty database, or apply what is missing."""
    from alembic import command

    config = _config(connection)
    tables = set(inspect(connection).get_table_names())
    if tables and MIGRATION_TABLE not in tables:
        # A ledger created before migrations existed: its schema is exactly LEGACY_REVISION.
        command.stamp(config, LEGACY_REVISION)
    command.upgrade(config, "head")


def stored_revision(connection: Connection, tables: set[str]) -> str | None:
    """The revision the database was last migrated to; None when it has no revision table
    (several rows, or none, come back joined: never a revision this code knows)."""
    if MIGRATION_TABLE not in tables:
        return None
    versions = table(MIGRATION_TABLE, column("version_num"))
    found = connection.execute(select(versions.c.version_num)).scalars().all()
    return ",".join(sorted(str(revision) for revision in found))


def known_revisions() -> set[str]:
    """Every revision the shipped migrations define."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(MIGRATIONS_DIR))
    return {script.revision for script in scripts.walk_revisions()}


def head_revision() -> str | None:
    """The head of the shipped migrations."""
    from alembic.script import ScriptDirectory

    head: str | None = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    return head
