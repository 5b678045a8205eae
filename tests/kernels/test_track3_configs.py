"""The track3 configurations: the official table of track3-workload.md and the CPU set."""

from __future__ import annotations

import pytest

from kernels.track3 import CONFIGS, CPU_CONFIGS, OFFICIAL_CONFIGS, Track3Config
from kernels.track3.workload import track3_workload

# The table of docs/track3-workload.md, typed in again: id -> (B, S, D, heads, FFN, layers).
SPEC_TABLE: dict[str, tuple[int, int, int, int, int, int]] = {
    "1": (64, 128, 128, 4, 128, 4),
    "2": (1, 128, 128, 4, 128, 4),
    "3": (4, 128, 128, 4, 128, 4),
    "4": (16, 128, 128, 4, 128, 4),
    "5": (128, 128, 128, 4, 128, 4),
    "6": (10000, 128, 128, 4, 128, 4),
    "7": (64, 128, 32, 4, 32, 4),
    "8": (64, 128, 1024, 4, 1024, 4),
    "9": (64, 128, 128, 1, 128, 4),
    "10": (64, 128, 128, 2, 128, 4),
    "11": (64, 128, 128, 16, 128, 4),
    "12": (64, 32, 128, 4, 128, 4),
    "13": (64, 1024, 128, 4, 128, 4),
    "14": (32, 100000, 1024, 16, 1024, 2),
}


def shape(cfg: Track3Config) -> tuple[int, int, int, int, int, int]:
    """A config as a table row."""
    return (
        cfg.batch_size,
        cfg.seq_len,
        cfg.d_model,
        cfg.num_heads,
        cfg.ffn_dim,
        cfg.num_layers,
    )


def test_official_configs_match_the_spec_table() -> None:
    assert list(OFFICIAL_CONFIGS) == list(SPEC_TABLE)
    for config_id, row in SPEC_TABLE.items():
        cfg = CONFIGS[config_id]
        assert shape(cfg) == row, config_id
        assert cfg.causal is True, config_id


def test_every_config_is_causal_float32_shaped_and_heads_divide_width() -> None:
    for config_id, cfg in CONFIGS.items():
        assert cfg.causal is True, config_id
        assert cfg.d_model % cfg.num_heads == 0, config_id


def test_all_configs_are_official_plus_cpu_with_disjoint_ids() -> None:
    assert set(CONFIGS) == set(OFFICIAL_CONFIGS) | set(CPU_CONFIGS)
    assert not set(OFFICIAL_CONFIGS) & set(CPU_CONFIGS)
    assert all(config_id.startswith("cpu-") for config_id in CPU_CONFIGS)


def test_cpu_set_has_the_documented_structure() -> None:
    assert CPU_CONFIGS, "the CPU set must exist"
    assert set(CPU_CONFIGS) >= {f"cpu-{i}" for i in range(1, 6)}
    for config_id, cfg in CPU_CONFIGS.items():
        assert cfg.batch_size in {1, 4}, config_id
        assert cfg.seq_len in {32, 128}, config_id
        assert cfg.d_model in {32, 128}, config_id
        assert cfg.num_heads in {1, 4, 16}, config_id
        assert cfg.d_model % cfg.num_heads == 0, config_id
    # Each dimension's values are all exercised, not just allowed.
    assert {c.batch_size for c in CPU_CONFIGS.values()} == {1, 4}
    assert {c.seq_len for c in CPU_CONFIGS.values()} == {32, 128}
    assert {c.d_model for c in CPU_CONFIGS.values()} == {32, 128}
    assert {c.num_heads for c in CPU_CONFIGS.values()} == {1, 4, 16}


def test_workload_config_sets_point_at_the_configs() -> None:
    workload = track3_workload()
    assert workload.config_set("official").config_ids == tuple(SPEC_TABLE)
    assert "14" not in workload.config_set("runnable").config_ids
    assert workload.config_set("cpu").config_ids == tuple(CPU_CONFIGS)
    assert workload.default_config_set == {"cpu": "cpu", "cuda": "runnable"}
    assert workload.tolerance.atol == 0.002 and workload.tolerance.rtol == 0.02
    assert workload.tolerance.comparator == "strict"
    assert [t.seed for t in workload.official_trials] == [1234, 1235, 1236, 1237, 1238]
    assert workload.timing_seed_offset == 100000


def test_configs_are_frozen_and_validated() -> None:
    with pytest.raises(ValueError):
        Track3Config(batch_size=0, seq_len=1, d_model=1, num_heads=1, ffn_dim=1, num_layers=1)
    cfg = CONFIGS["cpu-5"]
    with pytest.raises(ValueError):
        cfg.batch_size = 2  # type: ignore[misc]
