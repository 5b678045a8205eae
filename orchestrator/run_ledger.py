"""A run's ledger as the commands open it: never created, its chain checked before work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger import Ledger, LedgerError, LedgerNotFoundError, VerifyReport
from orchestrator.ledger_location import LedgerLocationError, resolve_ledger
from orchestrator.ledger_location import chain_fix as location_chain_fix


class RatchetError(Exception):
    """A user-facing failure: the message says what failed, the value, and the fix."""


def _open_existing(run_dir: Path, given: str | None) -> Ledger:
    location = resolve_ledger(run_dir, given)
    try:
        return location.open(create=False)
    except LedgerNotFoundError:
        raise RatchetError(
            f"no Ratchet run in {run_dir} (no ledger at {location.shown}): start one with "
            f"'ratchet run --run-dir {run_dir}'"
        ) from None
    except LedgerLocationError:
        raise
    except LedgerError as exc:
        raise RatchetError(f"cannot open the ledger of {run_dir}: {exc}") from exc


def chain_fix(report: VerifyReport, run_dir: Path) -> str:
    """What to do about a ledger whose chain does not verify."""
    return location_chain_fix(report, resolve_ledger(run_dir, None))


def require_chain(ledger: Ledger, run_dir: Path, refused: str) -> VerifyReport:
    """The cheap chain check before work (incremental from the last verified head); a chain
    that does not verify refuses the command, saying what `refused` would have done."""
    report = ledger.check()
    if not report.ok:
        raise RatchetError(
            f"the ledger of {run_dir} does not verify: {report.problem}. {refused}. Run "
            f"'ratchet ledger verify --run-dir {run_dir}' for the full check. Fix: "
            f"{chain_fix(report, run_dir)}"
        )
    return report


@contextmanager
def open_run_ledger(run_dir: Path, ledger: str | None = None) -> Iterator[Ledger]:
    """The ledger of an existing run (never creates one); `ledger` is the --ledger setting,
    checked against the one the run dir records (ledger_location)."""
    opened = _open_existing(run_dir, ledger)
    try:
        yield opened
    finally:
        opened.close()
