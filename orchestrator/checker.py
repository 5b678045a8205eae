"""The quick check an LLM expander runs on its worktree: static checks, then a short CPU
correctness check in a judge subprocess (a copy of the tree, so nothing is written back)."""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import git

from agents.tools import CheckReport
from harness.models import ArmKind, ArmSpec, EvaluationRequest, Outcome
from harness.runner import RunnerSettings, run_evaluation
from harness.static_checks import check_sources, parse_constraint
from harness.trials import correctness_trials, new_salt
from kernels.workload import Workload

QUICK_SALTED_TRIALS = 2
TRITON_MARK = "triton.jit"


def changed_files(tree: Path) -> list[str]:
    """Files of a worktree that differ from its HEAD commit (edited, added or untracked)."""
    try:
        status = git.Repo(tree).git.status("--porcelain", "--untracked-files=all")
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError):
        return []  # not a worktree: nothing is known to have changed
    return [line[3:].split(" -> ")[-1] for line in status.splitlines() if len(line) > 3]


@dataclass
class HarnessChecker:
    """Static checks and quick correctness on the CPU screening configs."""

    workload: Workload
    constraints: list[str]
    runner: RunnerSettings
    work_dir: Path
    config_ids: list[str]
    workload_ref: str | None = None  # a plug-in's 'module:factory' (None: the name)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def _sources(self, tree: Path) -> dict[str, str]:
        return {
            str(p.relative_to(tree)): p.read_text(encoding="utf-8", errors="replace")
            for p in tree.rglob("*.py")
            if ".git" not in p.relative_to(tree).parts
        }

    def check(self, tree: Path) -> CheckReport:
        """Both checks; the text is what the model reads. An edit that touched Triton kernels
        is checked with Triton's interpreter, so the kernels really run on the CPU."""
        parsed = [parse_constraint(c) for c in self.constraints]
        policy, entry = self.workload.static_policy, self.workload.candidate_file
        sources = self._sources(tree)
        static = check_sources(sources, policy, entry, parsed)
        if not static.passed:
            return CheckReport(passed=False, text="static checks failed:\n" + static.summary())
        interpret = any(TRITON_MARK in sources.get(path, "") for path in changed_files(tree))
        report = self._correctness(tree, interpret)
        if interpret:
            note = (
                "(Triton kernels ran through Triton's interpreter on the CPU: the edit touched "
                "them; they run only where the candidate takes its Triton path)"
            )
            report = report.model_copy(update={"text": f"{report.text}\n{note}"})
        return report

    def _correctness(self, tree: Path, interpret: bool) -> CheckReport:
        policy, entry = self.workload.static_policy, self.workload.candidate_file
        copy = self.work_dir / f"check-{next(self.counter)}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy / "tree", ignore=shutil.ignore_patterns(".git", "__pycache__"))
        trials = correctness_trials(self.workload.official_trials[:1], new_salt())
        request = EvaluationRequest(
            evaluation_id=f"quick-check:{copy.name}",
            workload=self.workload_ref or self.workload.name,
            device="cpu",
            config_ids=self.config_ids,
            arms=[
                ArmSpec(
                    name="candidate",
                    kind=ArmKind.MODULE,
                    module_path=str(copy / "tree" / entry),
                    entry_point=policy.entry_point,
                )
            ],
            trials=trials[: 1 + QUICK_SALTED_TRIALS],
            torch_threads=1,
        )
        runner = self.runner.model_copy(update={"triton_interpret": interpret})
        result = run_evaluation(request, copy / "judge", runner)
        lines = [f"static checks: ok; quick CPU correctness: {result.outcome.value}"]
        for config in result.configs:
            failed = sum(t.failed_elements for t in config.trials)
            worst = max((t.max_abs_error or 0.0 for t in config.trials), default=0.0)
            problem = next((t.problem for t in config.trials if t.problem), "")
            lines.append(
                f"  config {config.config_id}: {'ok' if config.correct else 'FAILED'}, "
                f"{failed} failing elements, max |err| {worst:.3g} {problem or ''}".rstrip()
            )
        if result.outcome is not Outcome.PASSED:
            lines.append(result.message.strip()[-2500:])
        return CheckReport(passed=result.outcome is Outcome.PASSED, text="\n".join(lines))
