"""The GPU kernel check's variant sets, before any GPU time goes into them: every variant is a
valid setting of the seed, and a malformed extra input is refused with the expected format."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kernels.candidate_tree import load_candidate
from kernels.track3.workload import track3_workload

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks/gpu/issue13_kernel_check.py"


def _kernel_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("issue13_kernel_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_check() -> ModuleType:
    saved = list(sys.path)
    try:
        return _kernel_check()
    finally:
        sys.path[:] = saved  # the script puts its own folders first


def test_every_variant_of_every_set_is_a_valid_setting_of_the_seed(
    kernel_check: ModuleType,
) -> None:
    from kernels.track3 import CONFIGS

    seed = load_candidate(track3_workload().seed_entry(), "seed_kernel_check_sets")
    config = CONFIGS["cpu-2"]
    checked = 0
    for name, variants in kernel_check.VARIANT_SETS.items():
        assert variants, f"variant set {name} is empty"
        for tunables in variants.values():
            settings = {**kernel_check.BASE, **tunables}
            # The constructor checks every name and value against the declared space.
            seed.OptimizedTransformer(config, settings)
            checked += 1
    assert checked >= 20


def test_a_set_with_an_unknown_tunable_is_refused_by_the_same_construction(
    kernel_check: ModuleType,
) -> None:
    # The check above can fail: a misspelt tunable stops the seed's constructor.
    from kernels.track3 import CONFIGS

    seed = load_candidate(track3_workload().seed_entry(), "seed_kernel_check_typo")
    config = next(iter(CONFIGS.values()))
    with pytest.raises(ValueError, match="unknown tunable 'fused_attention_operand'"):
        seed.OptimizedTransformer(config, {**kernel_check.BASE, "fused_attention_operand": "fp16"})


def test_extra_inputs_parse_and_a_malformed_one_names_the_format(kernel_check: ModuleType) -> None:
    trials = kernel_check.parse_trials("373791598:0.25:0.5,7:0:1")
    assert [(t.seed, t.padding_ratio, t.input_scale) for t in trials] == [
        (373791598, 0.25, 0.5),
        (7, 0.0, 1.0),
    ]
    with pytest.raises(SystemExit, match="expected SEED:PADDING:SCALE"):
        kernel_check.parse_trials("373791598:0.25")


def test_several_sets_run_as_one_table_and_an_unknown_one_names_the_known(
    kernel_check: ModuleType,
) -> None:
    both = kernel_check.chosen_variants("softmax,precision-groups")
    softmax = kernel_check.VARIANT_SETS["softmax"]
    groups = kernel_check.VARIANT_SETS["precision-groups"]
    assert list(both) == list(softmax) + [name for name in groups if name not in softmax]
    assert kernel_check.chosen_variants("softmax") == softmax
    with pytest.raises(SystemExit, match=r"unknown variant set\(s\) \['sofmax'\]; known: "):
        kernel_check.chosen_variants("sofmax,precision")
    with pytest.raises(SystemExit, match="comma-separated"):
        kernel_check.chosen_variants(",")
