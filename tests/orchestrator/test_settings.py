"""Settings layer defaults -> file -> environment -> flags, and refuse what they cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.measured import SCREEN_FLOOR_S, screen_time_limit
from orchestrator.settings import DeviceChoice, SettingsError, default_timing, load_settings


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_need_nothing() -> None:
    settings = load_settings({}, environ={})
    assert settings.workload == "track3" and settings.device is DeviceChoice.AUTO
    assert settings.run_dir == Path("ratchet-run") and settings.max_candidates is None


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    cfg = write(tmp_path / "r.toml", "[ratchet]\nminutes = 7\nseed = 3\nworkload = 'softmax'\n")
    env = {"RATCHET_MINUTES": "9", "RATCHET_NOISE_FLOOR": "0.02"}
    settings = load_settings({"seed": 11, "device": None}, environ=env, config_file=cfg)
    assert settings.workload == "softmax"  # file
    assert settings.minutes == 9  # environment beats file
    assert settings.seed == 11  # flag beats file
    assert settings.noise_floor == 0.02


def test_run_dir_config_is_read_when_present(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write(run_dir / "ratchet.toml", "minutes = 2.5\n[screen_timing]\nmax_rounds = 9\n")
    settings = load_settings({"run_dir": run_dir}, environ={})
    assert settings.minutes == 2.5
    assert settings.screen_timing is not None and settings.screen_timing.max_rounds == 9


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings({}, environ={}, config_file=tmp_path / "nope.toml")
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings({}, environ={"RATCHET_CONFIG": str(tmp_path / "gone.toml")})


def test_bad_values_and_unknown_names_are_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="minutes"):
        load_settings({"minutes": -1}, environ={})
    with pytest.raises(SettingsError, match="RATCHET_MINUTS"):
        load_settings({}, environ={"RATCHET_MINUTS": "3"})
    cfg = write(tmp_path / "bad.toml", "[ratchet]\nminuts = 3\n")
    with pytest.raises(SettingsError, match="minuts"):
        load_settings({}, environ={}, config_file=cfg)
    broken = write(tmp_path / "broken.toml", "minutes = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings({}, environ={}, config_file=broken)


def test_timing_defaults_depend_on_the_device() -> None:
    assert (
        default_timing("cuda", "sweep").warmup_calls > default_timing("cpu", "sweep").warmup_calls
    )
    assert default_timing("cpu", "screen").budget_s < default_timing("cpu", "sweep").budget_s


def test_a_screen_may_take_its_share_of_the_budget_within_bounds() -> None:
    def limit(**flags: object) -> float:
        return screen_time_limit(load_settings(flags, environ={}))

    assert limit(minutes=14) == pytest.approx(84.0)  # a tenth of the run
    assert limit(minutes=3) == SCREEN_FLOOR_S  # a first kernel build still fits
    assert limit(minutes=480) == 600.0  # never past the cap of any evaluation
    assert limit(minutes=480, eval_timeout_s=900) == 900.0
    assert limit(minutes=14, screen_time_share=0.5) == pytest.approx(420.0)
    with pytest.raises(SettingsError, match="screen_time_share"):
        load_settings({"screen_time_share": 0}, environ={})
