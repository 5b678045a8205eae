"""The expansion prompt's context: sections from the ledger, each within its share of the budget."""

from __future__ import annotations

from orchestrator.events import ConfigSummary, EvaluationSummary, Stage
from orchestrator.expansion_context import SHARES, config_table, cut


def test_cut_keeps_short_text_and_says_what_it_cut() -> None:
    assert cut("short", 100) == "short"
    long = "x" * 1000
    out = cut(long, 200)
    assert len(out) <= 200 + 40 and out.endswith("characters cut]")
    assert "860 characters cut" in out and out.startswith("x" * 140)


def test_shares_fit_the_budget() -> None:
    assert abs(sum(SHARES.values()) - 1.0) < 1e-9


def test_a_sweep_table_shows_correctness_and_ratios() -> None:
    ratio = {"arm": "candidate", "other": "baseline", "median": 2.5, "ci_low": 2.4, "ci_high": 2.6}
    summary = EvaluationSummary(
        step=1,
        sha="a" * 40,
        evaluation_id="e",
        stage=Stage.SWEEP,
        outcome="passed",
        message="",
        wall_s=1.0,
        protocol="p",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={},
        configs=[
            ConfigSummary(
                config_id="7",
                correct=False,
                trials=3,
                failed_elements=2,
                total_elements=10,
                max_abs_error=0.0021,
                tolerance_used=1.05,
                problem=None,
                ratios=[ratio],
            )
        ],
        aggregates=[],
        trial_seeds=[1],
    )
    table = config_table(summary)
    assert "| 7 | NO (2 failing) | 2.10e-03 | 105.0% | 2.500x [2.400, 2.600] | - |" in table
    assert config_table(None) == "(no full sweep recorded)"
