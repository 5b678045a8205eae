"""Which ledger a run dir uses: its own SQLite file, or the database its `ledger.url` names.

A run on a database ledger records the database's URL, without its password, in
RUN_DIR/ledger.url when it starts; every later command on the run dir opens that database (the
password from the command's own --ledger, or PGPASSWORD / ~/.pgpass, which psycopg reads). A
--ledger that names another ledger than the one the run dir records is refused, never opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ledger import (
    JournalPolicy,
    Ledger,
    LedgerError,
    LedgerUnavailableError,
    ProblemKind,
    VerifyReport,
)
from ledger.postgres import DRIVER

LEDGER_URL_FILE = "ledger.url"
SQLITE_FILE = "ledger.sqlite"
# The head journal of a database ledger: each run dir anchors the chain it appends to.
DATABASE_JOURNAL = "ledger.heads"


class LedgerLocationError(LedgerError):
    """The ledger asked for is not the one the run dir uses (or the run dir records none)."""


def without_password(url: str) -> str:
    """The URL as recorded and compared: no password (nor a password query parameter), and
    the one PostgreSQL driver spelled out (plain postgresql:// means psycopg too)."""
    parsed = _parse(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername=DRIVER)
    bare: URL = parsed._replace(password=None).difference_update_query(["password"])
    return bare.render_as_string(hide_password=False)


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise LedgerLocationError(
            f"ledger {url!r} is not a database URL; use postgresql+psycopg://USER@HOST/DATABASE"
        ) from None


@dataclass(frozen=True)
class LedgerLocation:
    """The ledger of one run dir: `url` None is its own SQLite file RUN_DIR/ledger.sqlite."""

    run_dir: Path
    url: str | None = None  # what is opened: the password included when one was given
    recorded: bool = False  # the run dir's ledger.url already names it

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file of the ledger, if it is one."""
        if self.url is None:
            return self.run_dir / SQLITE_FILE
        parsed = make_url(self.url)
        return Path(parsed.database or "") if parsed.get_backend_name() == "sqlite" else None

    @property
    def shown(self) -> str:
        """Where the ledger is, for messages: its file, or its URL without the password."""
        path = self.sqlite_path
        return str(path) if path is not None else without_password(str(self.url))

    @property
    def journal(self) -> Path | JournalPolicy:
        """Its head journal: beside a SQLite file, else RUN_DIR/ledger.heads."""
        if self.sqlite_path is not None:
            return JournalPolicy.BESIDE
        return self.run_dir / DATABASE_JOURNAL

    @property
    def journal_path(self) -> Path:
        """The head journal's file."""
        journal = self.journal
        if isinstance(journal, Path):
            return journal
        path = self.sqlite_path
        assert path is not None
        return path.with_name(path.name + ".heads")

    def open(self, create: bool) -> Ledger:
        """The ledger itself (LedgerError when it cannot be opened)."""
        url = self.url if self.url is not None else f"sqlite:///{self.run_dir / SQLITE_FILE}"
        try:
            return Ledger.open(url, create=create, journal=self.journal)
        except LedgerUnavailableError as exc:
            if make_url(url).password is not None or "password" not in str(exc):
                raise
            # The URL from ledger.url has no password: say where else it may come from.
            raise LedgerUnavailableError(
                f"{exc}; no password was given: pass --ledger with it, or set PGPASSWORD "
                "(or a ~/.pgpass line) for this user"
            ) from None

    def record(self) -> None:
        """Write RUN_DIR/ledger.url (once, without the password) for a database ledger."""
        if self.url is None or self.recorded:
            return
        target = self.run_dir / LEDGER_URL_FILE
        scratch = target.with_name(target.name + ".tmp")
        scratch.write_text(without_password(self.url) + "\n", encoding="utf-8")
        os.replace(scratch, target)  # never a half-written URL


def recorded_url(run_dir: Path) -> str | None:
    """The URL in RUN_DIR/ledger.url, or None when the run dir uses its SQLite file."""
    path = run_dir / LEDGER_URL_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerLocationError(f"cannot read {path}: {exc}; restore the file") from exc
    if not text:
        raise LedgerLocationError(
            f"{path} is empty; write the run's ledger URL into it (without the password)"
        )
    return text


def _is_own_file(url: str, run_dir: Path) -> bool:
    parsed = _parse(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return False
    return Path(parsed.database).resolve() == (run_dir / SQLITE_FILE).resolve()


def resolve_ledger(run_dir: Path, given: str | None, starting: bool = False) -> LedgerLocation:
    """The ledger of `run_dir` given the `ledger` setting (None: not set); only a starting
    `ratchet run` (`starting`) may put a new run dir on a database ledger."""
    recorded = recorded_url(run_dir)
    if recorded is not None:
        if given is not None and without_password(given) != without_password(recorded):
            raise LedgerLocationError(
                f"{run_dir} is a run on the ledger {recorded} (its {LEDGER_URL_FILE}), not "
                f"on {without_password(given)}; nothing was opened. Pass --ledger {recorded} "
                "(the password in it or in PGPASSWORD / ~/.pgpass), or drop --ledger"
            )
        return LedgerLocation(run_dir, given or recorded, recorded=True)
    if given is None or _is_own_file(given, run_dir):
        return LedgerLocation(run_dir)
    if (run_dir / SQLITE_FILE).exists():
        raise LedgerLocationError(
            f"{run_dir} is a run on its own SQLite ledger {run_dir / SQLITE_FILE}, not on "
            f"{without_password(given)}; nothing was opened. Drop --ledger (and the `ledger` "
            "setting), or start the database run in a new --run-dir"
        )
    if not starting:
        raise LedgerLocationError(
            f"no Ratchet run in {run_dir} on the ledger {without_password(given)} (the run dir "
            f"has no {LEDGER_URL_FILE}); start one with 'ratchet run --run-dir {run_dir} "
            "--ledger URL', or pass the run dir that run used"
        )
    return LedgerLocation(run_dir, given)


def chain_fix(report: VerifyReport, location: LedgerLocation) -> str:
    """What to do about a ledger whose chain does not verify."""
    where, journal = location.shown, location.journal_path
    if location.sqlite_path is None:
        where = f"the database {where}"
    if report.problem_kind is ProblemKind.DAMAGED:
        return (
            f"restore {where} from a backup (until then nothing in {location.run_dir} can be "
            "trusted)"
        )
    if report.problem_kind is ProblemKind.JOURNAL:
        return (
            f"restore {journal} from a backup; if {where} itself was restored from an older "
            f"backup on purpose, move {journal.name} and {journal.name}.verified aside (the "
            "chain then has no anchor for what came before)"
        )
    return (
        f"the ledger was changed outside Ratchet: restore {where} (and its head journal "
        f"{journal}) from a backup, or start a new --run-dir; this run's results are not "
        "evidence until then"
    )
