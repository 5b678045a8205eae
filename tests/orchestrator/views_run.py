"""One real softmax run for the tests of the views (status, ledger show, report), built once per
session: promoted, rejected or inconclusive and failed candidates, an injected IDEA with markup
in it, a LITERATURE message, and a CONSTRAINT every candidate fails, then retracted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.static_checks import parse_constraint
from ledger import Ledger, MessageRecord
from orchestrator import service
from tests.orchestrator.conftest import ListReporter, fast_settings

SCRIPT_IDEA = "<script>alert('x')</script> Normalize with the fused softmax kernel"
BAD_CONSTRAINT = "forbid torch.exp"  # the frontier breaks it: every later candidate fails


def _build(root: Path) -> None:
    service.run_search(fast_settings(root, max_candidates=2), ListReporter())
    service.inject_message(root, "IDEA", SCRIPT_IDEA, "tester")
    service.inject_message(root, "LITERATURE", "Online softmax (Milakov & Gimelshein, 2018)")
    service.run_search(fast_settings(root, max_candidates=4), ListReporter())
    # `inject` refuses this CONSTRAINT; a ledger written before that check could hold it.
    payload = parse_constraint(BAD_CONSTRAINT).model_dump(mode="json")
    with Ledger.open_path(root / "ledger.sqlite", create=False) as ledger:
        bad = ledger.append(
            MessageRecord(kind="CONSTRAINT", text=BAD_CONSTRAINT, author="old", payload=payload)
        )
    service.run_search(fast_settings(root, max_candidates=5), ListReporter())
    service.inject_message(root, "RETRACT", str(bad), "tester")


def views_run(factory: pytest.TempPathFactory) -> Path:
    """The run dir, built by the first test module of the session that asks for it."""
    base = factory.getbasetemp() / "views-run"
    base.mkdir(exist_ok=True)
    root, done = base / "run", base / "done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)  # a build that failed half-way
        _build(root)
        done.touch()
    return root
