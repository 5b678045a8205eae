"""Per-config scores on one footing: paired ratios chained to the anchor, not each baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels.workload import TrialSpec
from ledger import Ledger
from orchestrator.events import ConfigSummary, EvaluationSummary, EventKind, InheritedCheck, Stage
from orchestrator.regime_scores import measured_scores

F, X, Y = "f" * 40, "a" * 40, "b" * 40


def ratio(other: str, median: float, spread: float = 0.002) -> dict[str, object]:
    return {
        "arm": "candidate",
        "other": other,
        "median": median,
        "ci_low": median * (1 - spread),
        "ci_high": median * (1 + spread),
        "rounds": 10,
    }


def summary(
    sha: str, stage: Stage, arms: dict[str, str], configs: dict[str, list[dict[str, object]]]
) -> EvaluationSummary:
    return EvaluationSummary(
        step=1,
        sha=sha,
        evaluation_id=f"{sha}:{stage}",
        stage=stage,
        outcome="passed",
        message="",
        wall_s=1.0,
        protocol="interleaved-abba",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={"candidate": sha, **arms},
        configs=[
            ConfigSummary(
                config_id=cid,
                correct=bool(ratios),
                trials=5,
                failed_elements=0 if ratios else 3,
                total_elements=10,
                max_abs_error=0.0,
                problem=None,
                ratios=ratios,
            )
            for cid, ratios in configs.items()
        ],
        aggregates=[],
        trial_seeds=[1],
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open_path(tmp_path / "ledger.sqlite")
    baseline = {"baseline": "reference"}
    events = [
        # The frontier against the baseline.
        summary(
            F,
            Stage.SWEEP,
            baseline,
            {"c1": [ratio("baseline", 3.47)], "c2": [ratio("baseline", 2.0)]},
        ),
        # X behaves as F does (paired: 1.000x) but its own sweep's baseline read slower.
        summary(
            X,
            Stage.SWEEP,
            {"parent": F, **baseline},
            {
                "c1": [ratio("parent", 1.0), ratio("baseline", 3.67)],
                "c2": [ratio("parent", 1.0), ratio("baseline", 2.1)],
            },
        ),
        # Y, screened against X only: 1.5x on c1, wrong on c2.
        summary(Y, Stage.SCREEN, {"parent": X}, {"c1": [ratio("parent", 1.5)], "c2": []}),
    ]
    tainted = summary(Y, Stage.SWEEP, {"parent": X, **baseline}, {"c1": [ratio("parent", 9.0)]})
    tainted = tainted.model_copy(update={"taint": ["other processes used 2 CPU cores"]})
    ledger.append_many([e.to_event(EventKind.EVALUATION) for e in [*events, tainted]])
    return ledger


def test_scores_chain_paired_ratios_to_the_anchor(ledger: Ledger) -> None:
    scores = measured_scores(ledger, anchor=F)
    assert scores[F]["c1"].median == pytest.approx(3.47)
    # Through the paired 1.000x to F, not its own sweep's 3.67x: the same code reads the same.
    assert scores[X]["c1"].median == pytest.approx(3.47)
    assert scores[X]["c2"].median == pytest.approx(2.0)
    # Chained through X (the tainted 9.0x is not used); never where it was wrong.
    assert scores[Y]["c1"].median == pytest.approx(1.5 * 3.47)
    assert "c2" not in scores[Y]
    # Chained intervals widen: they hold every link's bounds.
    y = scores[Y]["c1"]
    assert y.low < 1.5 * 3.47 * 0.998 < y.high
    assert "reference" not in scores


def test_without_a_path_to_the_baseline_there_is_no_score(ledger: Ledger) -> None:
    # Anchored on a commit never measured: nothing can be read on its footing.
    assert measured_scores(ledger, anchor="c" * 40) == {}


def test_a_chain_of_ratios_never_crosses_devices(tmp_path: Path) -> None:
    ledger = Ledger.open_path(tmp_path / "devices.sqlite")
    baseline = {"baseline": "reference"}
    on = {"device_slot": "cuda:0"}
    events = [
        summary(F, Stage.SWEEP, baseline, {"c1": [ratio("baseline", 3.0)]}).model_copy(update=on),
        summary(
            X, Stage.SWEEP, {"parent": F, **baseline}, {"c1": [ratio("parent", 1.2)]}
        ).model_copy(update=on),
        # Y was only measured on the other GPU: its 2x against X cannot join cuda:0's chain.
        summary(Y, Stage.SCREEN, {"parent": X}, {"c1": [ratio("parent", 2.0)]}).model_copy(
            update={"device_slot": "cuda:1"}
        ),
    ]
    ledger.append_many([e.to_event(EventKind.EVALUATION) for e in events])
    scores = measured_scores(ledger, anchor=F)
    assert scores[X]["c1"].median == pytest.approx(3.6)
    assert Y not in scores
    ledger.close()


def test_an_incorrect_sweep_scores_where_it_was_right_never_where_it_failed(
    tmp_path: Path,
) -> None:
    """A sweep timed past its failures (time_past_failures): the config that failed its
    re-check after timing carries ratios but is not correct, so it is never scored."""
    ledger = Ledger.open_path(tmp_path / "incorrect.sqlite")
    baseline = {"baseline": "reference"}
    frontier = summary(
        F, Stage.SWEEP, baseline, {c: [ratio("baseline", 2.0)] for c in ("c1", "c2", "c3")}
    )
    failed = summary(
        X,
        Stage.SWEEP,
        {"parent": F, **baseline},
        {c: [ratio("parent", 3.0), ratio("baseline", 6.0)] for c in ("c1", "c2", "c3")},
    )
    rechecked = failed.configs[1].model_copy(update={"correct": False, "failed_elements": 1})
    configs = [failed.configs[0], rechecked, failed.configs[2]]
    failed = failed.model_copy(update={"outcome": "incorrect", "configs": configs})
    ledger.append_many([e.to_event(EventKind.EVALUATION) for e in (frontier, failed)])
    scores = measured_scores(ledger, anchor=F)
    assert set(scores[X]) == {"c1", "c3"}
    assert scores[X]["c3"].median == pytest.approx(6.0)
    ledger.close()


def test_a_config_failed_anywhere_is_never_scored_though_a_screen_passed_it(
    tmp_path: Path,
) -> None:
    """X's screen passed c2, its sweep failed c2 by one element on other inputs: c2 is not
    X's to serve. A failure in a tainted evaluation counts too."""
    ledger = Ledger.open_path(tmp_path / "screen-then-fail.sqlite")
    baseline = {"baseline": "reference"}
    frontier = summary(
        F, Stage.SWEEP, baseline, {c: [ratio("baseline", 2.0)] for c in ("c1", "c2", "c3")}
    )
    screen = summary(X, Stage.SCREEN, {"parent": F}, {"c2": [ratio("parent", 3.0)]})
    sweep = summary(
        X,
        Stage.SWEEP,
        {"parent": F, **baseline},
        {c: [ratio("parent", 3.0), ratio("baseline", 6.0)] for c in ("c1", "c2", "c3")},
    )
    failed_c2 = sweep.configs[1].model_copy(update={"correct": False, "failed_elements": 1})
    sweep = sweep.model_copy(
        update={"outcome": "incorrect", "configs": [sweep.configs[0], failed_c2, sweep.configs[2]]}
    )
    tainted = summary(X, Stage.SWEEP, {"parent": F, **baseline}, {"c3": [ratio("parent", 3.0)]})
    failed_c3 = tainted.configs[0].model_copy(update={"correct": False, "failed_elements": 2})
    tainted = tainted.model_copy(
        update={"outcome": "incorrect", "configs": [failed_c3], "taint": ["contention"]}
    )
    records = [e.to_event(EventKind.EVALUATION) for e in (frontier, screen, sweep, tainted)]
    ledger.append_many(records)
    assert set(measured_scores(ledger, anchor=F)[X]) == {"c1"}
    ledger.close()


def test_a_config_its_child_showed_it_failing_is_not_scored(ledger: Ledger) -> None:
    """X failed c2 when judged on the inputs its child failed there with X's own code."""
    assert "c2" in measured_scores(ledger, anchor=F)[X]
    check = InheritedCheck(
        step=5,
        child_sha=Y,
        parent_sha=X,
        configs=["c2"],
        trials=[TrialSpec(seed=7)],
        outcome="incorrect",
        parent_failed=True,
        message="failed correctness on configs ['c2']",
    )
    ledger.append(check.to_event(EventKind.INHERITED_CHECK))
    scores = measured_scores(ledger, anchor=F)
    assert "c2" not in scores[X] and "c1" in scores[X]


def test_where_inputs_demoted_a_frontier_only_candidates_judged_on_them_are_scored(
    ledger: Ledger,
) -> None:
    """Inputs that demoted a frontier on c2 (seed 7): F and X were judged before they were
    found (seed 1 only), so c2 is no longer theirs to serve, c1 still is; X judged again
    with them, and F passing its recheck on them, serve c2 again."""
    Z = "c" * 40
    demoted = InheritedCheck(
        step=5,
        child_sha=Y,
        parent_sha=Z,
        configs=["c2"],
        trials=[TrialSpec(seed=7, padding_ratio=0.25, input_scale=0.5)],
        outcome="incorrect",
        parent_failed=True,
        message="failed correctness on configs ['c2']",
    )
    ledger.append(demoted.to_event(EventKind.INHERITED_CHECK))
    scores = measured_scores(ledger, anchor=F)
    assert "c2" not in scores[X] and "c2" not in scores[F] and "c1" in scores[X]
    again = summary(X, Stage.SCREEN, {"parent": F}, {"c2": [ratio("parent", 1.0)]})
    recheck = demoted.model_copy(
        update={"parent_sha": F, "parent_failed": False, "recheck_of": [5], "outcome": "passed"}
    )
    ledger.append_many(
        [
            again.model_copy(update={"trial_seeds": [1, 7]}).to_event(EventKind.EVALUATION),
            recheck.to_event(EventKind.INHERITED_CHECK),
        ]
    )
    scores = measured_scores(ledger, anchor=F)
    assert scores[F]["c2"].median == pytest.approx(2.0)
    assert scores[X]["c2"].median == pytest.approx(2.0)
