"""A/A noise floors are reused across runs on an unchanged device, seed, config set and timing
plan, and measured afresh when any of them changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.models import TimingPlan
from kernels.registry import resolve_workload
from ledger import Ledger
from orchestrator import service
from orchestrator.device_cache import floor_key, load_floor
from orchestrator.run_dir import hold_run_dir
from orchestrator.settings import Settings
from orchestrator.state import derive_state
from tests.orchestrator.conftest import ListReporter, fast_settings


def _floor_event(run_dir: Path) -> dict[str, object]:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return derive_state(ledger).noise_floors["cpu"]


def _start_run(settings: Settings) -> list[str]:
    """A run's start, as `ratchet run` makes it: the run dir, the seed, the device's trust and
    its noise floor (measured or reused). What follows (the seed's judge, the steps) never
    reads or writes the floor's cache, so it is left out; the reporter's lines come back."""
    reporter = ListReporter()
    with hold_run_dir(settings.run_dir.resolve()):
        service.prepare_run(settings, reporter).ctx.ledger.close()
    return reporter.lines


@pytest.mark.slow
def test_a_second_run_on_the_same_device_reuses_the_noise_floor(tmp_path: Path) -> None:
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    lock_dir = tmp_path / "locks"
    one = _start_run(fast_settings(first, lock_dir=lock_dir))
    assert any("calibrating the noise floor" in line for line in one)
    two = _start_run(fast_settings(second, lock_dir=lock_dir))
    assert not any("calibrating the noise floor" in line for line in two), two
    assert any(f"reused from {first.resolve()}" in line for line in two), two
    assert not (second / "evals" / "calibration").exists()  # no A/A judge ran
    measured, reused = _floor_event(first), _floor_event(second)
    assert reused["floor"] == measured["floor"] and reused["reused_from"] == str(first.resolve())
    # Turned off, every run calibrates.
    three = _start_run(fast_settings(third, lock_dir=lock_dir, reuse_noise_floor=False))
    assert any("calibrating the noise floor" in line for line in three)


def test_the_cache_key_changes_with_what_the_floor_depends_on(tmp_path: Path) -> None:
    config_set = resolve_workload("softmax").config_set("cpu")
    plan = TimingPlan()
    key = floor_key("fp-1", "softmax", config_set, "tree-1", plan)
    assert load_floor(tmp_path, key) is None
    variants = [
        floor_key("fp-2", "softmax", config_set, "tree-1", plan),  # another GPU or driver
        floor_key("fp-1", "softmax", config_set, "tree-2", plan),  # another seed
        floor_key("fp-1", "softmax", config_set, "tree-1", TimingPlan(min_rounds=7)),
        key.model_copy(update={"minimum_floor": 0.05}),
    ]
    assert len({v.digest() for v in variants} | {key.digest()}) == 5
