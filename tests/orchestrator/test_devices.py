"""Device slots: which devices --devices names, and what each one's judge is given."""

from __future__ import annotations

import pytest

from harness.contention import busy_ticks
from orchestrator.devices import DeviceSpecError, resolve_slots, visible_gpus
from orchestrator.settings import Settings, SettingsError, load_settings


def test_no_spec_is_the_one_device_of_a_serial_run() -> None:
    assert resolve_slots("cpu", None) == []
    assert resolve_slots("cuda", None, gpu_count=4) == []


def test_cpu_slots_pin_one_core_each() -> None:
    slots = resolve_slots("cpu", "0,1", cores=[2, 5, 7])
    assert [(s.name, s.cpus) for s in slots] == [("cpu:0", (2,)), ("cpu:1", (5,))]
    assert len(resolve_slots("cpu", "all", cores=[0, 1, 2])) == 3


def test_gpu_slots_narrow_the_judge_to_the_gpu_as_the_host_numbers_it() -> None:
    environ = {"CUDA_VISIBLE_DEVICES": "3,1"}
    slots = resolve_slots("cuda", "all", gpu_count=2, environ=environ)
    assert [(s.name, s.visible_gpu) for s in slots] == [("cuda:0", "3"), ("cuda:1", "1")]
    assert visible_gpus({}, 2) == ["0", "1"]


def test_a_device_that_is_not_there_is_named_with_the_fix() -> None:
    with pytest.raises(DeviceSpecError, match=r"--devices 0,4: CPU slot 4 does not exist.*0-1"):
        resolve_slots("cpu", "0,4", cores=[0, 1])
    with pytest.raises(DeviceSpecError, match="GPU 1 does not exist"):
        resolve_slots("cuda", "1", gpu_count=1, environ={})


@pytest.mark.parametrize(
    ("value", "message"), [("0,0", "listed twice"), ("a,1", "comma-separated"), ("-1", "indices")]
)
def test_settings_refuse_a_malformed_device_list(value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings({"devices": value}, environ={})


def test_settings_normalize_the_device_list() -> None:
    assert Settings(devices=" 01, 2").devices == "1,2"
    assert Settings(devices="ALL").devices == "all"
    assert Settings(expanders=3).expanders == 3


def test_contention_of_a_pinned_judge_counts_only_its_own_cores() -> None:
    stat = [
        "cpu  100 0 50 1000 0 0 0 0 0 0",
        "cpu0 60 0 30 500 0 0 0 0 0 0",
        "cpu1 40 0 20 500 0 0 0 0 0 0",
        "intr 12345",
    ]
    assert busy_ticks(stat, None) == 150
    assert busy_ticks(stat, {1}) == 60
    assert busy_ticks(stat, {0, 1}) == 150
