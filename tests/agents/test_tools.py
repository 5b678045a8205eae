"""The expander's tools stay inside their worktree and only commit checked, described trees."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from agents.llm.conversation import ToolCall
from agents.tools import BenchAccess, BenchReport, CheckReport, ToolError, WorktreeTools, confined
from tests.agents.conftest import make_repo


class Checker:
    """A checker whose verdict the test sets."""

    def __init__(self, passed: bool = True) -> None:
        self.passed = passed
        self.calls = 0

    def check(self, tree: Path) -> CheckReport:
        self.calls += 1
        return CheckReport(passed=self.passed, text="ok" if self.passed else "static: import os")


@pytest.fixture
def tools(tmp_path: Path, softmax_source: str) -> WorktreeTools:
    make_repo(tmp_path / "wt", softmax_source)
    return WorktreeTools(tmp_path / "wt", Checker(), known_trees=set())


def call(tools: WorktreeTools, name: str, **args: object) -> tuple[str, bool]:
    outcome = tools.call(ToolCall(call_id="c", name=name, arguments=dict(args)))
    return outcome.output, outcome.is_error


@pytest.mark.parametrize("path", ["../escape.py", "/etc/passwd", "~/x", ".git/config", "a/../../b"])
def test_paths_outside_the_tree_or_into_git_are_refused(tools: WorktreeTools, path: str) -> None:
    output, error = call(tools, "write_file", path=path, content="x")
    assert error and ("tree" in output or ".git" in output)
    output, error = call(tools, "read_file", path=path)
    assert error


def test_a_symlink_cannot_lead_outside(tools: WorktreeTools, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tools.root / "link")
    with pytest.raises(ToolError, match="leaves the candidate tree"):
        confined(tools.root, "link/file.py")


def test_read_write_list(tools: WorktreeTools) -> None:
    output, error = call(tools, "write_file", path="pkg/helper.py", content="X = 1\n")
    assert not error and "wrote pkg/helper.py" in output
    listing, _ = call(tools, "list_files")
    assert "candidate.py" in listing and "pkg/helper.py" in listing and ".git" not in listing
    text, _ = call(tools, "read_file", path="pkg/helper.py")
    assert text == "    1| X = 1"


def test_commit_needs_passing_checks_on_the_current_tree_and_a_described_message(
    tools: WorktreeTools,
) -> None:
    message = "Change\n\nIdea: i\nHypothesis: h\nPredicted effect: p"
    call(tools, "write_file", path="candidate.py", content="# changed\n")
    output, error = call(tools, "commit", message=message)
    assert error and "run_checks" in output
    call(tools, "run_checks")
    output, error = call(tools, "commit", message="just do it")
    assert error and "Hypothesis" in output
    call(tools, "write_file", path="candidate.py", content="# changed again\n")
    output, error = call(tools, "commit", message=message)
    assert error and "run_checks" in output, "the tree changed after the checks"
    call(tools, "run_checks")
    output, error = call(tools, "commit", message=message)
    assert not error and tools.committed
    assert git.Repo(tools.root).head.commit.message == message


def test_failing_checks_block_the_commit_and_known_trees_are_refused(
    tmp_path: Path, softmax_source: str
) -> None:
    repo, _ = make_repo(tmp_path / "wt", softmax_source)
    known = {str(repo.head.commit.tree.hexsha)}
    tools = WorktreeTools(tmp_path / "wt", Checker(passed=False), known_trees=known)
    message = "Change\n\nIdea: i\nHypothesis: h\nPredicted effect: p"
    output, _ = call(tools, "run_checks")
    assert output.startswith("FAILED") and "import os" in output
    output, error = call(tools, "commit", message=message)
    assert error and "already a candidate" in output  # the unchanged tree is the parent's


def test_unknown_tools_and_malformed_arguments_show_what_is_expected(tools: WorktreeTools) -> None:
    output, error = call(tools, "rm_rf")
    assert error and "list_files" in output
    bad = tools.call(ToolCall(call_id="c", name="read_file", error="arguments are not valid JSON"))
    assert bad.is_error and "expected a JSON object" in bad.output


class FakeBench:
    """A bench that reports fixed device time (the orchestrator's real one is tested end to
    end in tests/orchestrator/test_engineer_run.py)."""

    def __init__(self, device_s: float) -> None:
        self.device_s = device_s
        self.calls: list[str] = []

    def benchmark(self, tree: Path) -> BenchReport:
        self.calls.append("benchmark")
        return BenchReport(text="| config | ms |", device_s=self.device_s)

    def profile(self, tree: Path, config_id: str | None) -> BenchReport:
        self.calls.append(f"profile:{config_id}")
        return BenchReport(text="| operator |", device_s=self.device_s)


def test_bench_tools_are_offered_only_with_a_bench(tools: WorktreeTools) -> None:
    assert {"benchmark", "profile"}.isdisjoint(s.name for s in tools.specs())
    output, error = call(tools, "benchmark")
    assert error and "unknown tool" in output
    tools.bench = BenchAccess(bench=FakeBench(1.0), budget_s=10.0)
    assert {"benchmark", "profile", "note"} <= {s.name for s in tools.specs()}


def test_the_benchmark_budget_is_counted_and_enforced(tools: WorktreeTools) -> None:
    bench = FakeBench(device_s=6.0)
    tools.bench = BenchAccess(bench=bench, budget_s=10.0)
    output, error = call(tools, "benchmark")
    assert not error and "| config | ms |" in output and "4 s of budget left" in output
    output, error = call(tools, "profile", config_id="s1")
    assert not error and bench.calls == ["benchmark", "profile:s1"]
    output, error = call(tools, "benchmark")
    assert error and "budget of 10 device-seconds is spent" in output
    assert bench.calls == ["benchmark", "profile:s1"], "nothing runs once the budget is spent"
    output, error = call(tools, "profile", config_id=3)
    assert error and "must be a string" in output
    assert tools.wall_s["benchmark"] >= 0 and set(tools.wall_s) == {"benchmark", "profile"}


def test_notes_are_kept_bounded_and_checked(tools: WorktreeTools) -> None:
    output, error = call(tools, "note", lesson="  ")
    assert error and "one or two sentences" in output
    for i in range(10):
        assert not call(tools, "note", lesson=f"lesson {i}")[1]
    output, error = call(tools, "note", lesson="one more")
    assert error and "already noted 10" in output
    assert tools.notes == [f"lesson {i}" for i in range(10)]
