"""Each config's judging records the wall time of its phases, also for a failing candidate."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.models import Outcome
from harness.runner import RunnerSettings, run_evaluation
from harness.stage_clock import JudgePhase, ProcessPhase, phase_clock, seconds_since_process_start
from tests.harness.conftest import CODE_ROOT, softmax_request

STAGE_TIMES = CODE_ROOT / "benchmarks/stage_times.py"


def test_a_phase_is_clocked_when_its_block_raises() -> None:
    record: dict[str, float] = {}
    with phase_clock(record, JudgePhase.RECHECK):
        pass
    with pytest.raises(ValueError), phase_clock(record, JudgePhase.CHECK_BUILD):
        raise ValueError("the candidate failed to build")
    assert set(record) == {"recheck", "check_build"}
    assert all(seconds >= 0.0 for seconds in record.values())


@pytest.mark.slow
def test_the_judge_records_every_phase_of_every_config(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    good = write_candidate("good", "return torch.softmax(x, dim=-1)")
    result = run_evaluation(softmax_request(good), tmp_path / "good", runner_settings)
    assert result.outcome is Outcome.PASSED, result.message
    for config in result.configs:
        assert set(config.phase_s) == {phase.value for phase in JudgePhase}, config.config_id
        assert config.phase_s["timing_rounds"] > 0.0
    assert sum(sum(c.phase_s.values()) for c in result.configs) <= result.wall_s
    assert set(result.phase_s) == {phase.value for phase in ProcessPhase}
    inside = result.phase_s["import"] + result.phase_s["open"] + result.phase_s["load"]
    assert result.phase_s["import"] > 0.0 and result.phase_s["open"] > 0.0
    phases = sum(sum(c.phase_s.values()) for c in result.configs) + inside
    # What no phase covers is small: the phases account for the judge's time.
    assert phases <= result.wall_s < phases + 0.5, (phases, result.wall_s)
    assert result.phase_s["interpreter"] > 0.0  # python and its first imports, before wall_s
    wrong = write_candidate("wrong", "return torch.softmax(x, dim=-1) * 1.01")
    failed = run_evaluation(softmax_request(wrong), tmp_path / "wrong", runner_settings)
    assert failed.outcome is Outcome.INCORRECT
    assert set(failed.configs[0].phase_s) == {"check_build", "check_trials"}


@pytest.mark.slow
def test_stage_times_sums_the_phases_of_a_run_dirs_evaluations(
    write_candidate: Callable[..., Path], tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    good = write_candidate("good", "return torch.softmax(x, dim=-1)")
    work = tmp_path / "run" / "evals" / "step-00001-sweep"
    result = run_evaluation(softmax_request(good), work, runner_settings)
    assert (work / "result.json").is_file()
    spec = importlib.util.spec_from_file_location("stage_times", STAGE_TIMES)
    assert spec is not None and spec.loader is not None
    stage_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage_times)
    (row,) = stage_times.phase_rows(tmp_path / "run")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["sweep", "1"]
    assert float(cells[3]) == pytest.approx(result.wall_s, abs=0.05)
    rounds = float(cells[4 + [p.value for p in JudgePhase].index("timing_rounds")])
    total = sum(c.phase_s["timing_rounds"] for c in result.configs)
    assert rounds == pytest.approx(total, abs=0.05)
    imported, opened = (float(cells[4 + len(JudgePhase) + i]) for i in (0, 1))
    assert imported == pytest.approx(result.phase_s["import"], abs=0.05)
    assert opened == pytest.approx(result.phase_s["open"], abs=0.05)
    assert float(cells[-1]) == pytest.approx(result.phase_s["interpreter"], abs=0.05)


def test_this_process_started_before_now_and_not_long_ago() -> None:
    seconds = seconds_since_process_start()
    assert seconds is not None and 0.0 <= seconds < 24 * 3600.0


def test_stage_times_skips_a_torn_result_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torn = tmp_path / "run" / "evals" / "step-00001-sweep" / "result.json"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"evaluation_id": "x"')
    spec = importlib.util.spec_from_file_location("stage_times", STAGE_TIMES)
    assert spec is not None and spec.loader is not None
    stage_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage_times)
    assert stage_times.phase_rows(tmp_path / "run") == []
    assert "skipped" in capsys.readouterr().err
