"""The judge subprocess end to end: every way a candidate can fail becomes an outcome."""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.models import EvaluationResult, Outcome, RejectReason
from harness.runner import RunnerSettings, run_evaluation
from tests.harness.conftest import host_pid_sleeper, softmax_request

WriteCandidate = Callable[..., Path]


def judge(
    module: Path, tmp_path: Path, settings: RunnerSettings, timing: bool = True
) -> EvaluationResult:
    return run_evaluation(softmax_request(module, timing), tmp_path / "work", settings)


def test_honest_candidate_passes_and_is_timed(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("good", "return torch.softmax(x, dim=-1)")
    result = judge(module, tmp_path, runner_settings)
    assert result.outcome is Outcome.PASSED, result.message
    assert [c.config_id for c in result.configs] == ["s1", "s3"]
    for config in result.configs:
        assert config.correct and len(config.trials) == 2
        arms = {t.arm: t for t in config.timings}
        assert set(arms) == {"candidate", "baseline"}
        # ABBA: every round times each arm twice.
        assert len(arms["candidate"].samples_ns) == 2 * config.rounds
        ratio = config.ratios[0]
        assert ratio.other == "baseline" and ratio.ci_low <= ratio.median <= ratio.ci_high
    assert result.aggregate("baseline") is not None
    assert result.fingerprint["torch"] and result.protocol.startswith("interleaved-abba")


def test_wrong_output_is_incorrect_and_never_timed(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("wrong", "return torch.softmax(x, dim=-1) * 1.01")
    result = judge(module, tmp_path, runner_settings)
    assert result.outcome is Outcome.INCORRECT
    assert all(not c.timings and not c.ratios for c in result.configs)
    assert result.configs[0].trials[0].failed_elements > 0


def test_input_mutation_is_caught(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    body = "out = torch.softmax(x, dim=-1)\nx.mul_(0.5)\nreturn out"
    result = judge(write_candidate("mutate", body), tmp_path, runner_settings, timing=False)
    assert result.outcome is Outcome.INCORRECT
    assert result.reason is RejectReason.INPUT_MUTATION


def test_tensor_subclass_output_is_rejected(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    body = "class Lazy(torch.Tensor):\n    pass\nreturn torch.softmax(x, dim=-1).as_subclass(Lazy)"
    result = judge(write_candidate("subclass", body), tmp_path, runner_settings, timing=False)
    assert result.outcome is Outcome.INCORRECT and result.reason is RejectReason.OUTPUT_TYPE
    assert "plain torch.Tensor" in (result.configs[0].trials[0].problem or "")


def test_syntax_error_is_a_compile_error(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("syntax", "def broken(:\n", whole=True)
    result = judge(module, tmp_path, runner_settings)
    assert result.outcome is Outcome.COMPILE_ERROR
    assert "SyntaxError" in result.message


def test_exception_in_forward_is_a_runtime_error(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("raises", "raise RuntimeError('kaboom')")
    result = judge(module, tmp_path, runner_settings)
    assert result.outcome is Outcome.RUNTIME_ERROR
    assert "kaboom" in result.message


def test_silent_exit_without_result_is_no_result(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("exit", "import os\nos._exit(0)")
    result = judge(module, tmp_path, runner_settings)
    assert result.outcome is Outcome.NO_RESULT
    assert "wrote no result" in result.message


def test_forged_result_file_is_rejected(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    body = """
import json, os, sys
fake = {"evaluation_id": "test:sweep", "nonce": "guess", "outcome": "passed"}
open(sys.argv[2], "w").write(json.dumps(fake))
os._exit(0)
"""
    result = judge(write_candidate("forge", body), tmp_path, runner_settings)
    assert result.outcome is Outcome.NO_RESULT
    assert "nonce" in result.message


def test_hang_times_out_and_the_process_group_dies(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    pid_file = tmp_path / "child.pid"
    body = f"""
import os, subprocess, time
{host_pid_sleeper(pid_file).format(session="")}
time.sleep(300)
"""
    settings = runner_settings.model_copy(update={"timeout_s": 12})
    started = time.monotonic()
    result = judge(write_candidate("hang", body), tmp_path, settings)
    assert result.outcome is Outcome.TIMEOUT
    assert time.monotonic() - started < 40
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _alive(child), "a process the candidate started survived the timeout"


def test_a_request_time_limit_shorter_than_the_runners_ends_it_as_a_timeout(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    module = write_candidate("slow", "time.sleep(0.5)\nreturn torch.softmax(x, dim=-1)")
    module.write_text("import time\n" + module.read_text())
    request = softmax_request(module, timing=False)
    # Two configs x two trials, plus the aliasing and inference-mode calls: seconds of sleep.
    limited = request.model_copy(update={"time_limit_s": 2.0})
    started = time.monotonic()
    result = run_evaluation(limited, tmp_path / "limited", runner_settings)
    assert result.outcome is Outcome.TIMEOUT
    assert "exceeded 2 s (its own time limit)" in result.message
    assert 2.0 <= result.wall_s < 20  # the seconds the cut judge ran, not 0
    assert time.monotonic() - started < 20
    # The same candidate under the runner's limit alone passes.
    assert run_evaluation(request, tmp_path / "free", runner_settings).outcome is Outcome.PASSED


def test_a_process_left_running_after_a_passing_run_is_a_rejection(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    pid_file = tmp_path / "bg.pid"
    start = textwrap.indent(host_pid_sleeper(pid_file).format(session=""), "    ")
    body = f"""
import os, subprocess, time
if not os.path.exists({str(pid_file)!r}):
{start}
return torch.softmax(x, dim=-1)
"""
    result = judge(write_candidate("bg", body), tmp_path, runner_settings, timing=False)
    assert result.outcome is Outcome.REJECTED, result.message
    assert result.reason is RejectReason.OUTLIVING_PROCESS and "sleep 300" in result.message
    assert not _alive(int(pid_file.read_text()))


def test_secrets_in_the_environment_do_not_reach_the_candidate(
    write_candidate: WriteCandidate,
    tmp_path: Path,
    runner_settings: RunnerSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret")
    body = """
import os
if any("sk-test" in v for v in os.environ.values()) or "ANTHROPIC_API_KEY" in os.environ:
    raise RuntimeError("saw a secret")
return torch.softmax(x, dim=-1)
"""
    result = judge(write_candidate("env", body), tmp_path, runner_settings, timing=False)
    assert result.outcome is Outcome.PASSED, result.message


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_orphaned_judge_kills_itself(tmp_path: Path) -> None:
    """A judge whose parent died must not keep running (and holding the device lock)."""
    script = f"""
import os, subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c",
     "from harness.watchdog import start_watchdog; import time; start_watchdog(None, 0.1);"
     "open({str(tmp_path / "pid")!r}, 'w').write(str(__import__('os').getpid())); time.sleep(60)"],
    start_new_session=True,
)
import time
while not os.path.exists({str(tmp_path / "pid")!r}):
    time.sleep(0.05)
os._exit(0)
"""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parents[2])
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_a_candidate_that_fails_under_inference_mode_is_refused(
    write_candidate: WriteCandidate, tmp_path: Path, runner_settings: RunnerSettings
) -> None:
    # Passes every plain trial; breaks once its weights are inference tensors (built and
    # called under torch.inference_mode()), as run 4's exported frontier did.
    body = """
if torch.is_inference_mode_enabled():
    raise RuntimeError("Inference tensors do not track version counter")
return torch.softmax(x, dim=-1)
"""
    result = judge(write_candidate("eager_only", body), tmp_path, runner_settings, timing=False)
    assert result.outcome is Outcome.INCORRECT, result.message
    assert result.reason is RejectReason.RUNTIME_ERROR
    assert "torch.inference_mode()" in result.message
    honest = judge(
        write_candidate("served", "return torch.softmax(x, dim=-1)"),
        tmp_path / "h",
        runner_settings,
        timing=False,
    )
    assert honest.outcome is Outcome.PASSED, honest.message
