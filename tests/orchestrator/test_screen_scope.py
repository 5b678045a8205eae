"""Which configs a screen measures, given what the child's change reaches."""

from __future__ import annotations

from orchestrator.screen_scope import REGIME_SCREEN_CONFIGS, pick_screen

SCREENING = ["2", "1", "7", "13"]
FLOPS = {"1": 5.0, "2": 1.0, "6": 900.0, "7": 2.0, "8": 300.0, "13": 40.0, "9": 4.0}


def test_a_change_that_reaches_every_config_is_screened_as_the_workload_says() -> None:
    assert pick_screen(SCREENING, set(FLOPS), FLOPS.__getitem__) == SCREENING
    assert pick_screen(SCREENING, None, FLOPS.__getitem__) == SCREENING  # cannot tell
    assert pick_screen(SCREENING, set(), FLOPS.__getitem__) == SCREENING  # reaches nothing


def test_the_screening_configs_a_regime_serves_and_only_those() -> None:
    assert pick_screen(SCREENING, {"1", "13", "9", "6"}, FLOPS.__getitem__) == ["1", "13"]


def test_a_regime_no_screening_config_reaches_is_screened_on_its_cheapest() -> None:
    got = pick_screen(SCREENING, {"6", "8", "9"}, FLOPS.__getitem__)
    assert got == ["9", "8"] and len(got) == REGIME_SCREEN_CONFIGS
    assert pick_screen(SCREENING, {"6"}, FLOPS.__getitem__) == ["6"]
