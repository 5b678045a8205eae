"""A sweep verdict read on the configs a settings change reaches, in a real run directory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agents.tunables import read_tunables, write_tunables
from harness.models import ArmTiming, ConfigResult, EvaluationResult, Outcome, RatioStats
from orchestrator import service
from orchestrator.change_scope import change_scope, config_floors
from orchestrator.evaluation import BASELINE_ARM
from orchestrator.loop import current_state
from orchestrator.measured import SweepJob, decide
from orchestrator.workspace import read_file
from search import Verdict
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.test_screen_scope import _child


def _timed(config: str, vs_parent: tuple[float, float, float]) -> ConfigResult:
    median = vs_parent[0]
    stats = [
        RatioStats(arm="candidate", other=other, median=m, ci_low=lo, ci_high=hi, rounds=20)
        for other, (m, lo, hi) in (("parent", vs_parent), (BASELINE_ARM, (2.0, 1.9, 2.1)))
    ]
    timings = [
        ArmTiming(arm=arm, calls_per_block=1, samples_ns=[ns], median_ns=ns)
        for arm, ns in (("candidate", 1000.0 / median), (BASELINE_ARM, 2000.0))
    ]
    return ConfigResult(config_id=config, ratios=stats, timings=timings)


def _sweep(gains: dict[str, tuple[float, float, float]], whole: float) -> EvaluationResult:
    aggregate = RatioStats(
        arm="candidate",
        other="parent",
        median=whole,
        ci_low=whole - 0.004,
        ci_high=whole + 0.004,
        rounds=20,
    )
    return EvaluationResult(
        evaluation_id="x:sweep",
        nonce="n",
        outcome=Outcome.PASSED,
        configs=[_timed(c, g) for c, g in gains.items()],
        aggregates=[aggregate],
    )


def test_a_change_read_on_one_config_is_judged_there(tmp_path: Path) -> None:
    ctx = service.prepare_run(
        fast_settings(tmp_path / "run", workload="matchain"), ListReporter()
    ).ctx
    state = current_state(ctx)
    seed = str(state.seed_sha)
    source = read_file(ctx.repo, seed, ctx.workload.candidate_file)
    tunables = read_tunables(source)
    layout = _child(
        ctx, seed, write_tunables(source, {**tunables, "middle_layout": "contiguous"}), "c/lay"
    )
    edited = _child(ctx, seed, source + "\n# edited\n", "c/code")
    configs = list(ctx.config_set.config_ids)
    assert len(configs) >= 2
    # The seed's code read middle_layout on the first config only.
    state.settings_read[seed] = {c: {"association"} for c in configs}
    state.settings_read[seed][configs[0]].add("middle_layout")
    state.noise_floors["cpu"] = {
        "per_config": {configs[0]: {"median": 1.0, "ci_low": 0.97, "ci_high": 1.03}}
    }
    assert config_floors(state) == {configs[0]: 1.03 - 1.0}

    scope = change_scope(ctx, state, (seed, layout), configs)
    assert scope.configs == [configs[0]]
    assert scope.floor == max(ctx.noise_floor, 1.03 - 1.0)
    assert change_scope(ctx, state, (seed, edited), configs).configs is None  # a code edit
    assert change_scope(ctx, state, (seed, seed), configs).configs is None
    state.settings_read[seed][configs[1]].add("middle_layout")  # reached everywhere it is read
    assert change_scope(ctx, state, (seed, layout), configs).configs == sorted(configs[:2])
    state.settings_read[seed][configs[1]].discard("middle_layout")

    # 17% on the reached config, identical code elsewhere: the whole objective reads 1.03x,
    # which a 5% floor refuses; read on its scope, it is promoted.
    ctx = replace(ctx, noise_floor=0.05)
    state.frontier_sha = seed
    gains = {c: (1.0, 0.99, 1.01) for c in configs} | {configs[0]: (1.17, 1.15, 1.19)}
    job = SweepJob(step=1, sha=layout, parent_sha=seed)
    decision, details, _ = decide(ctx, state, job, _sweep(gains, whole=1.03))
    assert decision.verdict is Verdict.PROMOTED, decision.reason
    assert details.scope == [configs[0]] and f"on configs {configs[0]}" in decision.reason
    assert details.scope_vs_parent is not None and details.scope_vs_parent["median"] == 1.17
    # The same readings from a code edit (no scope): judged on the whole objective.
    job = SweepJob(step=1, sha=edited, parent_sha=seed)
    decision, details, _ = decide(ctx, state, job, _sweep(gains, whole=1.03))
    assert decision.verdict is Verdict.REJECTED and details.scope is None
    ctx.ledger.close()
