"""What composition may build from: plain candidates, and each regime of dispatching ones."""

from __future__ import annotations

import pytest

from agents.dispatch import Regime, RegimeBranch, write_dispatch
from agents.tunables import TunablesError, read_tunables
from kernels.track3.workload import track3_workload
from orchestrator.composition import REGIME_MARK, composable_parts, short_id, variant_settings
from search import CompositionSettings, RegimeVariant, plan_dispatch

SIZES = {c: track3_workload().dispatch_features(c) for c in ("1", "2", "7", "8")}
SHA = "f" * 40


def _dispatching(source: str) -> str:
    defaults = read_tunables(source)
    regimes = [
        Regime(name="r1", tunables={**defaults, "fused_kernel": "triton"}, source_sha="a" * 40),
        Regime(name="r2", tunables={**defaults, "gelu": "tanh"}, source_sha="b" * 40),
    ]
    tree = RegimeBranch(feature="d_model", threshold=362.0, below="r1", above=None)
    return write_dispatch(source, regimes, tree)


@pytest.fixture(scope="module")
def seed() -> str:
    return track3_workload().seed_bundle()


def test_a_plain_candidate_is_one_variant_for_every_config(seed: str) -> None:
    code, parts = composable_parts(seed, SHA, SIZES)
    assert parts == [(SHA, read_tunables(seed), None)]
    assert composable_parts(_dispatching(seed), SHA, SIZES)[0] == code  # same code


def test_each_serving_regime_of_a_dispatching_candidate_is_a_variant(seed: str) -> None:
    source = _dispatching(seed)
    _, parts = composable_parts(source, SHA, SIZES)
    by_id = {variant: (settings, served) for variant, settings, served in parts}
    # r2 serves no config: nothing was measured with it, so it takes no part
    assert set(by_id) == {f"{SHA}#TUNABLES", f"{SHA}#r1"}
    assert by_id[f"{SHA}#r1"][1] == {"1", "2", "7"} and by_id[f"{SHA}#TUNABLES"][1] == {"8"}
    assert by_id[f"{SHA}#r1"][0]["fused_kernel"] == "triton"
    assert variant_settings(source, f"{SHA}#r1") == by_id[f"{SHA}#r1"][0]
    assert variant_settings(source, f"{SHA}#TUNABLES") == read_tunables(source)
    assert variant_settings(source, SHA) == read_tunables(source)
    assert short_id(f"{SHA}#r1") == "ffffffffff#r1" and short_id(SHA) == "ffffffffff"
    unreadable = source.replace("sizes.d_model < 362.0", "sizes.d_model % 3")
    with pytest.raises(TunablesError):
        composable_parts(unreadable, SHA, SIZES)


def test_a_regime_of_the_frontier_can_serve_its_configs_in_a_new_plan() -> None:
    # The incumbent is plain and measured everywhere; the frontier's r1 (measured where it
    # serves) wins the narrow configs, a plain challenger wins the wide one.
    features = {c: {"d_model": d} for c, d in (("1", 128.0), ("7", 32.0), ("8", 1024.0))}
    variants = [
        RegimeVariant(variant_id="plain", scores={"1": 2.0, "7": 2.0, "8": 1.0}),
        RegimeVariant(variant_id=f"front{REGIME_MARK}r1", scores={"1": 8.0, "7": 6.0}),
        RegimeVariant(variant_id="wide", scores={"1": 1.0, "7": 1.0, "8": 2.0}),
    ]
    plan = plan_dispatch(features, variants, "plain", CompositionSettings(noise_floor=0.01))
    assert plan is not None
    assert plan.assignment == {"1": "front#r1", "7": "front#r1", "8": "wide"}
