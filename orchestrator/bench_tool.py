"""The expander's `benchmark` and `profile` tools: the real screen of a worktree on the run's
device (through the judge, behind the device lock), and its top kernels on one config."""

from __future__ import annotations

import itertools
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agents.tools import BenchReport, ToolError
from harness.models import (
    ArmKind,
    ArmSpec,
    EvaluationMode,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    TimingPlan,
)
from harness.runner import run_evaluation
from harness.trials import correctness_trials, new_salt, recheck_trials
from orchestrator.evaluation import BASELINE_ARM, Judging, commit_arm


@dataclass
class ScreenBench:
    """Benchmarks of one expansion's tree against its parent and the frontier."""

    judging: Judging
    parent_sha: str
    frontier_sha: str | None
    config_ids: list[str]
    timing: TimingPlan
    work_dir: Path
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def _tree_arm(self, tree: Path, work: Path) -> ArmSpec:
        copy = work / "arms" / "candidate"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        return ArmSpec(
            name="candidate",
            kind=ArmKind.MODULE,
            module_path=str(copy / self.judging.workload.candidate_file),
            entry_point=self.judging.workload.static_policy.entry_point,
        )

    def benchmark(self, tree: Path) -> BenchReport:
        """The screen of the tree as it is now: correctness, then interleaved timing."""
        work = self.work_dir / f"bench-{next(self.counter)}"
        arms = [
            self._tree_arm(tree, work),
            commit_arm(self.judging, "parent", self.parent_sha, work),
            ArmSpec(name=BASELINE_ARM, kind=ArmKind.REFERENCE),
        ]
        if self.frontier_sha and self.frontier_sha != self.parent_sha:
            arms.append(commit_arm(self.judging, "frontier", self.frontier_sha, work))
        salt = new_salt()
        request = EvaluationRequest(
            evaluation_id=f"bench:{work.name}",
            workload=self.judging.workload_ref,
            device=self.judging.device,
            config_ids=self.config_ids,
            arms=arms,
            trials=correctness_trials(self.judging.workload.official_trials[:2], salt),
            recheck_trials=recheck_trials(salt)[:1],
            device_peaks=self.judging.device_peaks,
            timing=self.timing,
            seed=secrets.randbelow(2**31),
            torch_threads=self.judging.torch_threads,
        )
        result = run_evaluation(request, work / "judge", self.judging.runner)
        return BenchReport(text=format_bench(result), device_s=result.wall_s)

    def profile(self, tree: Path, config_id: str | None) -> BenchReport:
        """Top operators of the tree by device time on one config (default: the first)."""
        chosen = config_id or self.config_ids[0]
        if chosen not in self.judging.workload.configs:
            known = ", ".join(self.config_ids)
            raise ToolError(f"no config {chosen!r}; profile one of the screen's: {known}")
        work = self.work_dir / f"profile-{next(self.counter)}"
        request = EvaluationRequest(
            evaluation_id=f"profile:{work.name}",
            workload=self.judging.workload_ref,
            device=self.judging.device,
            config_ids=[chosen],
            arms=[self._tree_arm(tree, work)],
            trials=correctness_trials(self.judging.workload.official_trials[:1], new_salt())[:1],
            mode=EvaluationMode.PROFILE,
            torch_threads=self.judging.torch_threads,
        )
        result = run_evaluation(request, work / "judge", self.judging.runner)
        if result.outcome is not Outcome.PASSED:
            text = f"profile failed ({result.outcome.value}): {result.message.strip()[-2000:]}"
            return BenchReport(text=text, device_s=result.wall_s)
        unit = "device" if self.judging.device.startswith("cuda") else "CPU"
        lines = [f"config {chosen}, top operators by {unit} self time over 5 calls:"]
        lines += ["| operator | calls | self us | share |", "|---|---:|---:|---:|"]
        lines += [
            f"| {row.name} | {row.calls} | {row.device_us:.1f} | {row.share:.1%} |"
            for row in result.profile
        ]
        return BenchReport(text="\n".join(lines), device_s=result.wall_s)


def _ratio(result_ratios: dict[str, float | None], other: str) -> str:
    value = result_ratios.get(other)
    return f"{value:.3f}x" if value else "-"


def format_bench(result: EvaluationResult) -> str:
    """The per-config table a model reads: correctness, ms, x parent, x frontier, protocol."""
    head = f"benchmark: {result.outcome.value}" + (" (TAINTED: not trustworthy)" * result.tainted)
    lines = [head, "| config | correct | ms | x parent | x frontier | x baseline | timed as |"]
    lines.append("|---|---|---:|---:|---:|---:|---|")
    for config in result.configs:
        medians = {t.arm: t.median_ns for t in config.timings}
        protocols = {t.arm: t.protocol for t in config.timings}
        ratios: dict[str, float | None] = {r.other: r.median for r in config.ratios}
        ms = f"{medians['candidate'] / 1e6:.4f}" if "candidate" in medians else "-"
        failed = sum(t.failed_elements for t in config.trials)
        correct = "yes" if config.correct else f"NO ({failed} failing elements)"
        lines.append(
            f"| {config.config_id} | {correct} | {ms} | {_ratio(ratios, 'parent')} | "
            f"{_ratio(ratios, 'frontier')} | {_ratio(ratios, BASELINE_ARM)} | "
            f"{protocols.get('candidate', '-')} |"
        )
    for other in ("parent", "frontier", BASELINE_ARM):
        aggregate = result.aggregate(other)
        if aggregate is not None:
            lines.append(
                f"geomean x {other}: {aggregate.median:.3f} "
                f"[{aggregate.ci_low:.3f}, {aggregate.ci_high:.3f}]"
            )
    if result.taint:
        lines.append("taint: " + "; ".join(result.taint))
    if result.outcome is not Outcome.PASSED:
        lines.append(result.message.strip()[-2500:])
    return "\n".join(lines)
