"""`ratchet judge FILE.py`: the full judge on a standalone module, exactly as for candidates."""

from __future__ import annotations

import ast
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from harness.models import (
    ArmKind,
    ArmSpec,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    share_text,
)
from harness.runner import RunnerSettings, run_evaluation
from harness.static_checks import Finding, check_sources
from harness.trials import correctness_trials, new_salt, recheck_trials
from kernels.candidate_tree import CandidateTreeError, read_tree, write_tree
from kernels.source_ast import parse_python
from kernels.workload import Workload
from orchestrator.calibration import NotQualifiedError, qualify
from orchestrator.evaluation import Judging
from orchestrator.settings import default_timing

CANDIDATE_FILE = "candidate.py"


class JudgeFileError(ValueError):
    """The file or the options cannot be judged as given."""


class JudgeConfigRow(BaseModel):
    """One config's result for `ratchet judge`."""

    config_id: str = Field(description="Config id.")
    correct: bool = Field(description="All trials passed.")
    failed_elements: int = Field(description="Failing elements over all trials.")
    total_elements: int = Field(description="Elements compared.")
    max_abs_error: float | None = Field(description="Largest |out - ref| seen.")
    tolerance_used: float | None = Field(
        default=None,
        description="The largest share of its tolerance any element used, over all trials "
        "(below 1 passes; near 1, a pass a fresh input may undo; None: not reported).",
    )
    speedup: float | None = Field(description="Paired median ratio baseline/candidate.")
    ci_low: float | None = Field(description="Lower end of its 95% CI.")
    ci_high: float | None = Field(description="Upper end of its 95% CI.")
    candidate_median_ns: float | None = Field(description="Median per-call time.")
    baseline_median_ns: float | None = Field(description="Baseline median per-call time.")
    protocol: str = Field(description="Timing protocol of the row.")
    feasibility: dict[str, float] | None = Field(description="Oracle-only configs.")


class JudgeReport(BaseModel):
    """`ratchet judge --json`."""

    file: str = Field(description="The judged module.")
    workload: str = Field(description="Workload it was judged on.")
    device: str = Field(description="Device it was judged on.")
    baseline: str = Field(description="Exactly what 'speedup' is measured against.")
    entry_point: str = Field(description="Class that was instantiated.")
    verdict: str = Field(
        description="'passed', 'rejected', or 'no_result' (the judge's own work failed, e.g. "
        "out of device memory: nothing is known of the module)."
    )
    reason: str | None = Field(description="The rejection cause (a RejectReason value).")
    message: str = Field(description="Human explanation.")
    static_findings: list[Finding] = Field(description="Static-check findings.")
    configs: list[JudgeConfigRow] = Field(description="Per-config results.")
    speedup: float | None = Field(description="Geometric mean of the paired ratios.")
    ci_low: float | None = Field(description="Its 95% CI, lower end.")
    ci_high: float | None = Field(description="Its 95% CI, upper end.")
    tainted: bool = Field(description="Contention or throttling seen while timing.")
    taint: list[str] = Field(description="What tainted it.")
    fingerprint: dict[str, object] = Field(description="Environment of the measurement.")

    @property
    def passed(self) -> bool:
        """Whether the judge accepted the module."""
        return self.verdict == "passed"

    @property
    def trustworthy(self) -> bool:
        """Accepted, and timed with no contention or throttling seen."""
        return self.passed and not self.tainted


def _entry_point(source: str, workload: Workload) -> str:
    names = {n.name for n in parse_python(source).body if isinstance(n, ast.ClassDef)}
    policy = workload.static_policy
    for name in (policy.entry_point, *policy.entry_aliases):
        if name in names:
            return name
    return policy.entry_point


def _rows(result: EvaluationResult) -> list[JudgeConfigRow]:
    rows = []
    for config in result.configs:
        ratio = next((r for r in config.ratios if r.other == "baseline"), None)
        medians = {t.arm: t.median_ns for t in config.timings}
        errors = [t.max_abs_error for t in config.trials if t.max_abs_error is not None]
        rows.append(
            JudgeConfigRow(
                config_id=config.config_id,
                correct=config.correct,
                failed_elements=sum(t.failed_elements for t in config.trials),
                total_elements=sum(t.total_elements for t in config.trials),
                max_abs_error=max(errors) if errors else None,
                tolerance_used=config.tolerance_used,
                speedup=ratio.median if ratio else None,
                ci_low=ratio.ci_low if ratio else None,
                ci_high=ratio.ci_high if ratio else None,
                candidate_median_ns=medians.get("candidate"),
                baseline_median_ns=medians.get("baseline"),
                protocol=config.protocol,
                feasibility=config.feasibility,
            )
        )
    return rows


def _rejected_before_running(base: dict[str, Any], reason: str, message: str) -> JudgeReport:
    """A rejection with nothing measured: the module never ran."""
    return JudgeReport(
        **base,
        verdict="rejected",
        reason=reason,
        message=message,
        configs=[],
        speedup=None,
        ci_low=None,
        ci_high=None,
        tainted=False,
        taint=[],
        fingerprint={},
    )


def _read_module_or_package(path: Path, workload: Workload) -> dict[str, str]:
    """A module file, or a package directory whose entry module is the workload's
    candidate_file; by path inside the judged tree."""
    if path.is_dir():
        entry = path / workload.candidate_file
        if not entry.is_file():
            raise JudgeFileError(
                f"{path} is a directory without {workload.candidate_file}: a candidate package "
                f"has its entry module there (its siblings imported as 'from .MODULE import X')"
            )
        try:
            sources = read_tree(path, workload.candidate_file)
        except (CandidateTreeError, UnicodeDecodeError, OSError) as exc:
            raise JudgeFileError(f"cannot read the package {path}: {exc}") from exc
        return {CANDIDATE_FILE: sources.pop(workload.candidate_file), **sources}
    if not path.is_file():
        raise JudgeFileError(
            f"{path} is not a file (nor a directory); pass the module to judge (a .py file) "
            f"or a package directory holding {workload.candidate_file}"
        )
    try:
        return {CANDIDATE_FILE: path.read_text(encoding="utf-8")}
    except (UnicodeDecodeError, OSError) as exc:
        raise JudgeFileError(f"cannot read {path}: {exc}") from exc


def _user_file(path: Path, file: str) -> str:
    """Where a file of the judged tree is on the user's disk (the tree calls its entry
    candidate.py, whatever the user named it)."""
    if path.is_dir():
        return str(path / file)
    return str(path) if file == CANDIDATE_FILE else file


def _in_user_terms(text: str, path: Path, tree: Path | None, files: list[str]) -> str:
    """A judge message with the judged copies' names replaced by the user's files."""
    for file in sorted(files, key=len, reverse=True):
        if tree is not None:
            text = text.replace(str(tree / file), _user_file(path, file))
        text = text.replace(f'"{file}"', f'"{_user_file(path, file)}"')
        text = text.replace(f"{file}:", f"{_user_file(path, file)}:")
    return text


def _user_findings(findings: list[Finding], path: Path) -> list[Finding]:
    return [f.model_copy(update={"file": _user_file(path, f.file)}) for f in findings]


class ProgressPrinter:
    """Judge progress lines with the time spent so far and, per config, a pace estimate."""

    def __init__(self, emit: Callable[[str], None], total_configs: int) -> None:
        self.emit, self.total = emit, total_configs
        self.started, self.seen = time.monotonic(), 0

    def __call__(self, line: str) -> None:
        elapsed = time.monotonic() - self.started
        if line.endswith("correctness") or "correctness (" in line:
            self.seen += 1
        estimate = ""
        if self.seen > 1 and self.total > self.seen:
            left = elapsed / (self.seen - 1) * (self.total - self.seen + 1)
            estimate = f", about {left / 60:.1f} min left at this pace"
        self.emit(f"  [{elapsed:6.1f} s] {line} ({self.seen}/{self.total} configs{estimate})")


def slow_set_warning(judging: Judging, config_ids: list[str]) -> str | None:
    """A warning before a judge that will take long on this device (oracle configs on a CPU)."""
    oracle = [c for c in config_ids if c not in judging.runnable_ids]
    if judging.device != "cpu" or not (oracle or len(config_ids) > 6):
        return None
    via = f", {len(oracle)} of them ({', '.join(oracle)}) through the memory-bounded oracle"
    return (
        f"judging {len(config_ids)} configs on the CPU{via if oracle else ''}: this takes many "
        "minutes (progress below, per config); `--configs screen` is the quick check"
    )


def judge_module(
    path: Path,
    workload: Workload,
    judging: Judging,
    config_ids: list[str],
    progress: Callable[[str], None] | None = None,
) -> JudgeReport:
    """Static checks, then correctness, timing against the reference, re-checks."""
    sources = _read_module_or_package(path, workload)
    report = check_sources(sources, workload.static_policy, CANDIDATE_FILE)
    report = report.model_copy(update={"findings": _user_findings(report.findings, path)})
    entry = (
        _entry_point(sources[CANDIDATE_FILE], workload)
        if not report.findings
        else workload.static_policy.entry_point
    )
    base = {
        "file": str(path),
        "workload": workload.name,
        "device": judging.device,
        "baseline": workload.baseline,
        "entry_point": entry,
        "static_findings": report.findings,
    }
    if not report.passed:
        return _rejected_before_running(base, "static_check", report.summary())
    try:
        peaks, _ = qualify(judging)
    except NotQualifiedError as exc:
        return _rejected_before_running(base, "no_run", str(exc))
    work = judging.evals_dir
    tree = work / "arms" / "candidate"
    tree.mkdir(parents=True, exist_ok=True)
    write_tree(sources, tree)
    module = tree / CANDIDATE_FILE
    salt = new_salt()
    request = EvaluationRequest(
        evaluation_id=f"judge:{secrets.token_hex(4)}",
        workload=judging.workload_ref,
        device=judging.device,
        config_ids=config_ids,
        arms=[
            ArmSpec(
                name="candidate", kind=ArmKind.MODULE, module_path=str(module), entry_point=entry
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=correctness_trials(workload.official_trials, salt),
        recheck_trials=recheck_trials(salt),
        oracle_config_ids=[c for c in config_ids if c not in judging.runnable_ids],
        device_peaks=peaks,
        timing=default_timing(judging.device, "sweep"),
        seed=secrets.randbelow(2**31),
        torch_threads=judging.torch_threads,
    )
    printer = ProgressPrinter(progress, len(config_ids)) if progress else None
    result = run_evaluation(request, work / "judge", judging.runner, printer)
    aggregate = result.aggregate("baseline")
    passed = result.outcome is Outcome.PASSED
    reason = None if passed else (result.reason.value if result.reason else result.outcome.value)
    return JudgeReport(
        **base,
        verdict=verdict_of(result),
        reason=reason,
        message=_in_user_terms(result.message.strip(), path, tree, list(sources))[:4000],
        configs=_rows(result),
        speedup=aggregate.median if aggregate else None,
        ci_low=aggregate.ci_low if aggregate else None,
        ci_high=aggregate.ci_high if aggregate else None,
        tainted=result.tainted,
        taint=result.taint,
        fingerprint=result.fingerprint,
    )


def verdict_of(result: EvaluationResult) -> str:
    """'passed', 'rejected', or 'no_result' when the judge's own step failed (a rejection
    timed under contention is still 'rejected', tainted)."""
    if result.outcome is Outcome.PASSED:
        return "passed"
    return "no_result" if result.judge_failed else "rejected"


def resolve_configs(workload: Workload, spec: str | None, device: str) -> list[str]:
    """'screen' (the device's screening subset), a set name, 'screen:SET' or 'ID,ID'."""
    default = workload.default_config_set[device]
    if spec is None:
        return list(workload.config_set(default).config_ids)
    if spec == "screen":
        return list(workload.config_set(default).screening_ids)
    try:
        return list(workload.resolve_config_ids(spec))
    except ValueError as exc:
        raise JudgeFileError(str(exc)) from exc


def temporary_judging(
    workload: Workload, device: str, runner: RunnerSettings, spec: str | None = None
) -> tuple[Judging, tempfile.TemporaryDirectory[str]]:
    """A judging context with its own scratch directory (no run dir, ledger or repository)."""
    scratch = tempfile.TemporaryDirectory(prefix="ratchet-judge-")
    oracle_only = workload.oracle_only_ids()
    judging = Judging(
        workload=workload,
        device=device,
        repo=None,
        evals_dir=Path(scratch.name),
        runner=runner,
        torch_threads=1 if device == "cpu" else None,
        runnable_ids=tuple(c for c in workload.configs if c not in oracle_only),
        workload_spec=spec,
    )
    return judging, scratch


def format_judge_report(report: JudgeReport) -> str:
    """Human-readable judge report with the per-config table."""
    head = f"{report.verdict.upper()}: {report.file} on {report.workload}/{report.device}"
    lines = [head + (f" ({report.reason})" if report.reason else "")]
    if report.verdict == "no_result":
        lines.append(
            "the judge's own work failed (below), not the module: nothing is known of it; "
            "judge again (a card with more free memory, or an idle machine)"
        )
    elif report.tainted:
        lines[0] = "TAINTED " + lines[0]
        lines.append(
            "the timing is NOT trustworthy: other work ran on the device while it was timed "
            "(below); judge again on an idle machine"
        )
    if report.message and not report.passed:
        lines.append(report.message)
    lines.append(f"baseline: {report.baseline}")
    for row in report.configs:
        speed = f"{row.speedup:.3f}x [{row.ci_low:.3f}, {row.ci_high:.3f}]" if row.speedup else "-"
        status = "ok" if row.correct else f"FAILED {row.failed_elements}/{row.total_elements}"
        if row.tolerance_used is not None:  # how close a pass came to failing
            status += f", {share_text(row.tolerance_used)} of tol"
        lines.append(f"  config {row.config_id:>8}: {status:<24} {speed}  {row.protocol}")
    if report.speedup is not None:
        lines.append(
            f"geomean speedup {report.speedup:.3f}x [{report.ci_low:.3f}, {report.ci_high:.3f}]"
        )
    if report.tainted:
        lines.append("tainted by: " + "; ".join(report.taint))
    return "\n".join(lines)
