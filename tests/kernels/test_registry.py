"""Workload resolution: built-in names, prefixes, plug-ins, config sets, and no torch on import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels.registry import UnknownWorkloadError, builtin_workloads, resolve_workload
from kernels.softmax.workload import softmax_workload
from kernels.track3.workload import track3_workload
from kernels.workload import ConfigSet, Workload
from tests.kernels.conftest import load_module

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_builtin_names_resolve() -> None:
    assert set(builtin_workloads()) == {"track3", "softmax", "matchain"}
    track3 = resolve_workload("track3")
    softmax = resolve_workload("softmax")
    assert isinstance(track3, Workload) and track3.name == "track3"
    assert isinstance(softmax, Workload) and softmax.name == "softmax"
    assert track3.static_policy.entry_point == "OptimizedTransformer"
    assert softmax.static_policy.entry_point == "OptimizedSoftmax"


@pytest.mark.parametrize(
    ("prefix", "name"), [("t", "track3"), ("tra", "track3"), ("soft", "softmax")]
)
def test_unique_prefix_resolves(prefix: str, name: str) -> None:
    assert resolve_workload(prefix).name == name


def test_ambiguous_prefix_names_the_candidates() -> None:
    registry = {"track3": track3_workload, "track4": track3_workload, "softmax": softmax_workload}
    with pytest.raises(UnknownWorkloadError, match="ambiguous") as info:
        resolve_workload("track", registry)
    assert "track3" in str(info.value) and "track4" in str(info.value)
    assert resolve_workload("track4", registry).name == "track3"


@pytest.mark.parametrize("name", ["nope", "", "track3x", "Track3"])
def test_unknown_name_lists_the_known_ones(name: str) -> None:
    with pytest.raises(UnknownWorkloadError) as info:
        resolve_workload(name)
    message = str(info.value)
    assert "track3" in message and "softmax" in message
    assert "package.module:factory" in message
    assert isinstance(info.value, ValueError)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path holding a tiny plug-in module."""
    (tmp_path / "ratchet_test_plugin.py").write_text(
        textwrap.dedent(
            '''
            """A plug-in workload for the registry tests."""
            from kernels.softmax.workload import softmax_workload


            def make():
                return softmax_workload().model_copy(update={"name": "plugged"})


            INSTANCE = make()


            def wrong():
                return {"name": "not a workload"}
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ratchet_test_plugin", None)
    yield tmp_path
    sys.modules.pop("ratchet_test_plugin", None)


def test_plugin_factory_resolves(plugin_dir: Path) -> None:
    workload = resolve_workload("ratchet_test_plugin:make")
    assert isinstance(workload, Workload)
    assert workload.name == "plugged"
    assert resolve_workload("ratchet_test_plugin:INSTANCE").name == "plugged"


def test_plugin_returning_the_wrong_type_errors(plugin_dir: Path) -> None:
    with pytest.raises(
        UnknownWorkloadError, match=r"returned dict, expected kernels\.workload\.Workload"
    ):
        resolve_workload("ratchet_test_plugin:wrong")


def test_plugin_missing_attribute_or_module_errors(plugin_dir: Path) -> None:
    with pytest.raises(UnknownWorkloadError, match="no attribute 'absent'"):
        resolve_workload("ratchet_test_plugin:absent")
    with pytest.raises(UnknownWorkloadError, match="cannot import"):
        resolve_workload("ratchet_no_such_module_xyz:make")


def test_resolve_config_ids() -> None:
    workload = track3_workload()
    assert workload.resolve_config_ids("official") == tuple(str(i) for i in range(1, 15))
    assert workload.resolve_config_ids("cpu") == ("cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5")
    assert workload.resolve_config_ids("1,cpu-3") == ("1", "cpu-3")
    assert workload.resolve_config_ids(" 2 , 13 ,") == ("2", "13")


@pytest.mark.parametrize("spec", ["", ",", "15", "1,99", "gpu", "cpu-9"])
def test_resolve_config_ids_rejects_unknown_specs(spec: str) -> None:
    workload = track3_workload()
    with pytest.raises(ValueError, match="unknown configs") as info:
        workload.resolve_config_ids(spec)
    assert "official" in str(info.value) and "cpu" in str(info.value)


def test_config_set_errors_list_known_sets() -> None:
    workload = track3_workload()
    assert workload.config_set("cpu").screening_ids == ("cpu-1", "cpu-3")
    with pytest.raises(ValueError, match="no config set 'gpu'") as info:
        workload.config_set("gpu")
    assert "cpu, official, runnable" in str(info.value)


def test_config_set_screen_must_be_a_nonempty_subset() -> None:
    with pytest.raises(ValueError, match="not in config set"):
        ConfigSet(name="x", config_ids=("a",), screening_ids=("b",))
    with pytest.raises(ValueError, match="empty screening subset"):
        ConfigSet(name="x", config_ids=("a",), screening_ids=())
    assert ConfigSet(name="x", config_ids=("a", "b"), screening_ids=("b",)).screening_ids == ("b",)


def test_ideas_load_and_target_declared_tunable_values() -> None:
    for workload in (track3_workload(), softmax_workload()):
        ideas = workload.load_ideas()
        assert ideas and len({i.slug for i in ideas}) == len(ideas)
        space = load_module(workload.seed_candidate, f"ratchet_test_{workload.name}_ideas")
        for idea in ideas:
            for name, value in idea.targets.items():
                assert name in space.TUNABLE_SPACE, (workload.name, idea.slug, name)
                allowed = space.TUNABLE_SPACE[name]["values"]
                assert value is None or value in allowed[1:], (workload.name, idea.slug, value)


def _imports_torch(code: str) -> bool:
    check = f"{code}\nimport sys\nprint('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout.strip().splitlines()[-1] == "True"


def test_workload_declarations_do_not_import_torch() -> None:
    assert not _imports_torch(
        "import kernels.track3, kernels.registry\n"
        "w = kernels.registry.resolve_workload('track3')\n"
        "w.config_set('cpu'); w.load_ideas(); kernels.registry.resolve_workload('softmax')"
    )
    # The check can see torch: the lazy reference attribute does import it.
    assert _imports_torch("import kernels.track3\nkernels.track3.Transformer")


def test_resolve_config_ids_accepts_screen_sets() -> None:
    workload = track3_workload()
    assert workload.resolve_config_ids("screen:cpu") == ("cpu-1", "cpu-3")
    assert workload.resolve_config_ids("screen:official") == ("2", "1", "7", "8", "13")
    with pytest.raises(ValueError, match="no config set"):
        workload.resolve_config_ids("screen:nope")


def test_dispatch_features_are_a_configs_numeric_sizes() -> None:
    track3 = resolve_workload("track3")
    assert track3.dispatch_features("7") == {
        "batch_size": 64.0,
        "seq_len": 128.0,
        "d_model": 32.0,
        "num_heads": 4.0,
        "ffn_dim": 32.0,
        "num_layers": 4.0,
    }  # `causal` is a flag, not a size
    assert resolve_workload("matchain").dispatch_features("tall") == {
        "m": 1024.0,
        "k": 256.0,
        "n": 256.0,
        "p": 8.0,
    }


def test_a_feasibility_config_cannot_also_be_swept() -> None:
    from kernels.workload import ConfigSet

    with pytest.raises(ValueError, match=r"feasibility ids \['a'\] of config set s"):
        ConfigSet(name="s", config_ids=("a", "b"), screening_ids=("a",), feasibility_ids=("a",))
    assert resolve_workload("track3").config_set("runnable").feasibility_ids == ("14",)
