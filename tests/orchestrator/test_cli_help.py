"""Issue 17, a CLI that explains itself: every subcommand's help has a description and examples,
`inject --help` gives every message kind's text format, and a broken `--workload` plug-in is a
clean error that writes nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from orchestrator import cli, service
from orchestrator.messages import FORMATS, MessageKind
from tests.orchestrator.conftest import ListReporter, fast_settings

SUBCOMMANDS = (
    *("run", "inject", "status", "checkout", "export", "judge", "ledger", "dashboard"),
    "report",
)


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


def _subcommands() -> set[str]:
    parser = cli._build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(actions[0].choices)


def test_every_subcommand_is_covered() -> None:
    assert _subcommands() == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help_has_a_description_and_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help([command, "--help"], capsys)
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"usage: ratchet {command}")
    description = rest.split("\n\n")[0]
    assert len(description.split()) >= 12, description  # a sentence, not the option list
    examples = text.split("examples:\n", 1)[1].splitlines()
    assert examples and all(line.startswith(f"  ratchet {command}") for line in examples if line)


def test_inject_help_gives_the_format_of_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help(["inject", "--help"], capsys).split())  # unwrapped
    for kind in MessageKind:
        assert f" {kind.value} {' '.join(FORMATS[kind].split())}" in text, kind
    assert "RETRACT" in text and "forbid TUNABLE=VALUE" in text


def test_run_help_says_both_budgets_count_the_whole_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = " ".join(_help(["run", "--help"], capsys).split())
    assert "--minutes MINUTES wall-clock budget of the whole run" in text
    assert "stop once the whole run holds N candidates" in text
    assert "new candidates" not in text


PLUGINS = {
    "bad_values": (
        "from kernels.softmax.workload import softmax_workload\n"
        "from kernels.workload import Workload\n"
        "def factory():\n"
        "    data = softmax_workload().model_dump()\n"
        "    data['tolerance'] = {'atol': -1.0, 'rtol': 0.0}\n"
        "    return Workload(**data)\n",
        ["builds an invalid Workload", "tolerance.atol", "greater than 0"],
    ),
    "not_a_workload": ("def factory():\n    return 42\n", ["returned int", "expected"]),
    "broken_import": ("def factory(:\n    pass\n", ["SyntaxError", "failed while its module"]),
    "raises_at_import": ("raise RuntimeError('no GPU here')\n", ["RuntimeError: no GPU here"]),
}


@pytest.mark.parametrize("module", sorted(PLUGINS))
def test_a_broken_workload_plugin_is_a_clean_error_that_writes_nothing(
    module: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, needles = PLUGINS[module]
    name = f"ratchet_test_plugin_{module}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    run_dir = tmp_path / "run"
    argv = ["run", "--run-dir", str(run_dir), "--workload", f"{name}:factory", "--device", "cpu"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ratchet run: error: workload") or "returned int" in err, err
    assert all(needle in err for needle in needles), err
    assert "Traceback" not in err and "nothing was written" in err
    assert not run_dir.exists()


@pytest.mark.slow
def test_a_run_of_a_workload_plugin_can_be_resumed_inspected_and_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "ratchet_test_plugin_renamed"
    (tmp_path / f"{name}.py").write_text(
        "from kernels.softmax.workload import softmax_workload\n"
        "def factory():\n"
        "    return softmax_workload().model_copy(update={'name': 'renamed-softmax'})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # Judges are subprocesses: they find the plug-in on the path they inherit.
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    run_dir = tmp_path / "run"
    settings = fast_settings(run_dir, workload=f"{name}:factory", max_candidates=1)
    assert service.run_search(settings, ListReporter()).reason == "reached 1 candidates"
    # The run records its name, 'renamed-softmax'; status and export find the plug-in by the
    # spec it was started with, not by that name.
    assert cli.main(["status", "--run-dir", str(run_dir)]) == 0
    assert cli.main(["export", "--run-dir", str(run_dir), "--out", str(tmp_path / "x")]) == 0
    assert (tmp_path / "x" / "manifest.json").exists(), capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_bad_dashboard_port_is_a_usage_error_not_a_validation_dump(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["dashboard", "--run-dir", str(tmp_path), "--port", port])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"'{port}' is not" in err and "validation error" not in err
