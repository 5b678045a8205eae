"""`ratchet judge FILE.py`: exit 0 and 'passed' for an honest module, 2 and a reason otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runner import RunnerSettings
from kernels.candidate_tree import write_tree
from kernels.track3.workload import track3_workload
from orchestrator import cli
from orchestrator.judge_file import slow_set_warning, temporary_judging
from tests.harness.cheat_corpus import CHEATS

pytestmark = pytest.mark.slow


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = cli.main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith("{") else {}


def test_the_seed_candidate_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    module = tmp_path / "submission.py"
    module.write_text(track3_workload().seed_bundle())
    code, report = _run(
        ["judge", str(module), "--device", "cpu", "--configs", "cpu-2,cpu-5", "--json"], capsys
    )
    assert code == 0 and report["verdict"] == "passed" and report["reason"] is None
    rows = report["configs"]
    assert isinstance(rows, list) and [r["config_id"] for r in rows] == ["cpu-2", "cpu-5"]
    assert all(r["correct"] and r["speedup"] for r in rows)
    assert report["entry_point"] == "OptimizedTransformer"


def test_a_package_directory_is_judged_with_all_its_modules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    seed = str(track3_workload().seed_candidate)  # the package itself, not a bundle
    code, report = _run(["judge", seed, "--device", "cpu", "--configs", "cpu-2", "--json"], capsys)
    assert code == 0 and report["verdict"] == "passed", report.get("message")
    # A sibling module breaking a rule rejects the package (every file is checked).
    tree = tmp_path / "pkg"
    write_tree({**track3_workload().seed_sources(), "extra.py": "import os\n"}, tree)
    code, report = _run(["judge", str(tree), "--device", "cpu", "--json"], capsys)
    assert code == 2 and report["reason"] == "static_check"
    assert "extra.py" in str(report["message"])


def test_a_directory_without_the_entry_module_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "other.py").write_text("x = 1\n")
    code = cli.main(["judge", str(tmp_path), "--device", "cpu"])
    assert code == 2 and "without candidate.py" in capsys.readouterr().err


def test_a_cheat_is_rejected_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    cheat = next(c for c in CHEATS if c.name == "mask_ignored")
    module = tmp_path / "cheat.py"
    module.write_text(
        cheat.source().replace("class OptimizedTransformer", "class UserOptimizedTransformer")
    )
    code, report = _run(
        ["judge", str(module), "--device", "cpu", "--configs", "screen", "--json"], capsys
    )
    assert code == 2 and report["verdict"] == "rejected" and report["reason"] == "wrong_output"
    assert report["entry_point"] == "UserOptimizedTransformer"


def test_static_rejection_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import os\nclass OptimizedTransformer:\n    pass\n")
    code, report = _run(["judge", str(module), "--device", "cpu", "--json"], capsys)
    assert code == 2 and report["reason"] == "static_check"
    assert cli.main(["judge", str(tmp_path / "missing.py"), "--device", "cpu"]) == 2
    assert "not a file" in capsys.readouterr().err
    assert cli.main(["judge", str(module), "--device", "cpu", "--configs", "nope"]) == 2
    assert "unknown configs" in capsys.readouterr().err


def test_version_and_no_abbreviated_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("ratchet ")
    # `--max-cand` once meant --max-candidates and `run --config` meant --configs.
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--max-cand", "3"])
    assert info.value.code == 2 and "unrecognized arguments: --max-cand" in capsys.readouterr().err
    missing = "/nonexistent/ratchet.toml"
    assert cli.main(["run", "--config", missing, "--run-dir", "/nonexistent/run"]) == 2
    assert f"config file {missing} does not exist" in capsys.readouterr().err


def test_messages_name_the_users_file_and_never_end_on_an_empty_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    module = tmp_path / "my_kernel.py"
    module.write_text("import torch\nimport os\n" + track3_workload().seed_bundle())
    code, report = _run(["judge", str(module), "--device", "cpu", "--json"], capsys)
    assert code == 2 and f"{module}:2:" in str(report["message"])
    assert "candidate.py" not in str(report["message"])
    wrong = next(c for c in CHEATS if c.name == "mask_ignored")
    module.write_text(wrong.source())
    code, report = _run(
        ["judge", str(module), "--device", "cpu", "--configs", "screen", "--json"], capsys
    )
    message = str(report["message"])
    assert code == 2 and "elements outside the tolerance" in message, message
    assert not message.rstrip().endswith(":")


def test_progress_goes_to_stderr_config_by_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    module = tmp_path / "submission.py"
    module.write_text(track3_workload().seed_bundle())
    code = cli.main(["judge", str(module), "--device", "cpu", "--configs", "cpu-2,cpu-5"])
    captured = capsys.readouterr()
    assert code in (0, 3), captured.out
    for config in ("cpu-2", "cpu-5"):
        assert f"config {config}: correctness" in captured.err
        assert f"config {config}: timing" in captured.err
    assert "2/2 configs" in captured.err and captured.out.startswith(("PASSED", "TAINTED"))


def test_a_tainted_pass_is_not_trustworthy_and_has_its_own_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    module = tmp_path / "submission.py"
    module.write_text(track3_workload().seed_bundle())
    burn = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(2)]
    try:
        code = cli.main(["judge", str(module), "--device", "cpu", "--configs", "cpu-2"])
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    out = capsys.readouterr().out
    assert code == cli.EXIT_TAINTED == 3, out
    assert out.startswith("TAINTED PASSED") and "NOT trustworthy" in out


def test_a_long_judge_on_the_cpu_is_announced() -> None:
    workload = track3_workload()
    runner = RunnerSettings(lock_dir=Path("/tmp"), code_root=Path("."))
    judging, scratch = temporary_judging(workload, "cpu", runner)
    with scratch:
        official = list(workload.config_set("official").config_ids)
        warning = slow_set_warning(judging, official)
        assert warning and "oracle" in warning and "--configs screen" in warning
        assert slow_set_warning(judging, ["cpu-2"]) is None


def test_the_judges_own_failure_is_no_result_not_a_rejection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A workload plug-in whose reference raises MemoryError: the judge's step, not the module's.
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(tmp_path / "locks"))
    module = tmp_path / "softmax.py"
    module.write_text(
        "import torch\n\n\nclass OptimizedSoftmax(torch.nn.Module):\n"
        "    def __init__(self, config):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n"
    )
    workload = "tests.harness.judge_fault_workload:reference_fault_workload"
    argv = ["judge", str(module), "--workload", workload, "--device", "cpu", "--configs", "s1"]
    code, report = _run([*argv, "--json"], capsys)
    assert code == cli.EXIT_TAINTED and report["verdict"] == "no_result", report
    assert "simulated" in str(report["message"]) and report["tainted"]
    code = cli.main(argv)
    out = capsys.readouterr().out
    assert code == 3 and out.startswith("NO_RESULT") and "not the module" in out, out
