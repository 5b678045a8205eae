"""Which configs a screen measures, given what the child's change reaches."""

from __future__ import annotations

from orchestrator.screen_scope import REGIME_SCREEN_CONFIGS, pick_screen, reached_configs

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


def test_a_change_reaches_only_where_the_parent_read_what_it_changed() -> None:
    # r1 serves 1, 8 and 13; the child set fp16 torch-path islands in it. The parent's code
    # read matmul_precision only on 8 (the fused kernels serve 1 and 13), and 9's reads are
    # not known: 8 and 9 are reached, 1 and 13 run exactly the parent's code.
    changed = {c: {"matmul_precision"} for c in ("1", "8", "9", "13")} | {"2": set()}
    read = {
        "1": {"fused_kernel", "fused_rows"},
        "8": {"fused_kernel", "matmul_precision"},
        "13": {"fused_kernel", "fused_rows"},
        "2": {"matmul_precision"},
    }
    assert reached_configs(changed, read) == {"8", "9"}
    assert reached_configs(changed, {}) == {"1", "8", "9", "13"}  # nothing known: as before
    assert pick_screen(SCREENING, reached_configs(changed, read), FLOPS.__getitem__) == ["9", "8"]
