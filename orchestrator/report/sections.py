"""The report's main sections: what was searched, the result, the trajectory, the lineage, and
every experiment with its verdict and reason (negative results included, never dropped)."""

from __future__ import annotations

import enum
import shlex
from collections import Counter

from orchestrator.report.data import ReportData
from orchestrator.report.document import Block, Code, Details, Figure, Heading, Mono, Para, Table
from orchestrator.run_view import EvaluationTable, Ratio, VerdictClass
from search import Verdict


class FigureFile(enum.StrEnum):
    """The figures written beside the report."""

    TRAJECTORY_STEPS = "trajectory-steps.svg"
    TRAJECTORY_TIME = "trajectory-time.svg"
    LINEAGE = "lineage.svg"
    FRONTIER_CONFIGS = "frontier-configs.svg"


def x(value: float | None) -> str:
    """A speed ratio, or '-' where there is none."""
    return f"{value:.3f}x" if value is not None else "-"


def ci(ratio: Ratio | None) -> str:
    """A ratio with its 95% CI."""
    if ratio is None:
        return "-"
    return f"{ratio.median:.3f}x [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}]"


def short(sha: str | None) -> str:
    """A commit as the CLI prints it."""
    return sha[:10] if sha else "-"


def title_blocks(data: ReportData) -> list[Block]:
    """The title and where the report comes from: the ledger head it was read at."""
    run = data.run
    name = f"{run.workload} on {run.device}" if run else "a run not started yet"
    verify = (
        f"ratchet ledger verify --run-dir {shlex.quote(data.run_dir)} --expect-head {data.head}"
    )
    blocks: list[Block] = [
        Heading(1, f"Ratchet search report: {name}"),
        Para(
            (
                "Generated from the ledger alone (and the run's git repository for commit "
                "messages and diffs) of ",
                Mono(data.run_dir),
                " at ledger head ",
                Mono(data.head),
                f", on {data.generated_at}. Anyone holding the run dir can "
                "check that head is in its hash chain with ",
                Mono(verify),
                ".",
            )
        ),
    ]
    if not data.settled:
        blocks.append(
            Para(
                (
                    "Warning: a running search kept appending while this report was read; its "
                    "numbers come from reads close to the head above, not exactly at it.",
                )
            )
        )
    return blocks


def searched_blocks(data: ReportData) -> list[Block]:
    """Workload, configs, device, baseline (named exactly), objective, expander, budgets."""
    run = data.run
    if run is None:
        return [Heading(2, "What was searched"), Para(("The run has not started yet.",))]
    settings = run.settings
    rows: list[tuple[str, str]] = [
        ("workload", str(settings.get("workload") or run.workload)),
        ("device", run.device),
        ("config set", f"{run.config_set}: {', '.join(run.config_ids)}"),
        ("screening configs", ", ".join(run.screening_ids)),
        ("baseline (what every speedup is over)", run.baseline),
        ("objective", f"{settings.get('objective')} (cap {settings.get('objective_cap')})"),
        ("expander", str(settings.get("expander"))),
        ("search seed", str(run.seed)),
        ("budget (latest invocation)", _budget(data)),
        ("invocations of ratchet run", str(len(data.invocations))),
    ]
    model = settings.get("llm_model")
    if settings.get("expander") not in (None, "offline") and model:
        rows.insert(7, ("LLM model", str(model)))
    return [
        Heading(2, "What was searched"),
        Table(("what", "value"), tuple((k, v) for k, v in rows)),
    ]


def _budget(data: ReportData) -> str:
    latest = data.invocations[-1].settings if data.invocations else {}
    limit = latest.get("max_candidates")
    return f"{latest.get('minutes')} min" + (f", {limit} candidates" if limit else "")


CONFIG_HEADERS: tuple[str, ...] = (
    *("config", "correct", "ms", "baseline ms", "x baseline", "x parent"),
    *("time / roofline floor", "protocol", "taint"),
)
EXPERIMENT_HEADERS: tuple[str, ...] = (
    *("step", "sha", "parent", "idea", "verdict", "stage", "x baseline"),
    *("x parent", "taint", "reason"),
)


def config_table(table: EvaluationTable) -> Table:
    """One evaluation's per-config results."""
    rows = tuple(
        (
            row.config_id,
            "yes" if row.correct else "NO",
            f"{row.ms:.4g}" if row.ms is not None else "-",
            f"{row.baseline_ms:.4g}" if row.baseline_ms is not None else "-",
            ci(row.x_baseline),
            ci(row.x_parent),
            f"{row.floor_ratio:.2f}" if row.floor_ratio is not None else "-",
            row.protocol,
            "tainted" if row.tainted else "",
        )
        for row in table.rows
    )
    return Table(CONFIG_HEADERS, rows)


def result_blocks(data: ReportData, figures: dict[FigureFile, str]) -> list[Block]:
    """The frontier, its aggregate over the baseline with its CI, and its per-config table."""
    view = data.overview
    blocks: list[Block] = [Heading(2, "Result")]
    frontier = next((n for n in data.lineage.nodes if n.is_frontier), None)
    if frontier is None:
        return [*blocks, Para(("No candidate was promoted: there is no frontier yet.",))]
    seed = frontier.parent_sha is None
    blocks.append(
        Para(
            (
                "The frontier is ",
                Mono(frontier.sha),
                f" (step {frontier.step}, idea "
                f"{frontier.idea_id or 'none: the seed'}): {x(view.objective)} "
                f"{view.objective_kind or 'objective'} over the baseline ({ci(view.objective_ci)} "
                "paired aggregate with its 95% CI)."
                + (" No candidate beat the seed." if seed else ""),
            )
        )
    )
    if view.frontier_table is not None:
        blocks.append(config_table(view.frontier_table))
    if FigureFile.FRONTIER_CONFIGS in figures:
        caption = "The frontier's speed over the baseline on every config (median, 95% CI)."
        blocks.append(
            Figure(FigureFile.FRONTIER_CONFIGS, figures[FigureFile.FRONTIER_CONFIGS], caption)
        )
    return blocks


def trajectory_blocks(data: ReportData, figures: dict[FigureFile, str]) -> list[Block]:
    """The two trajectory figures and what they count."""
    classes = Counter(p.verdict_class.value for p in data.trajectory.points)
    counted = ", ".join(f"{classes.get(k.value, 0)} {k.value}" for k in VerdictClass)
    blocks: list[Block] = [
        Heading(2, "Trajectory"),
        Para(
            (
                f"{len(data.trajectory.points)} candidates judged ({counted}). Each point is one "
                "candidate, its shape and colour its verdict, hollow when it was decided on a "
                "sweep measured under contention; the line is the frontier. Candidates never "
                "swept (rejected by the screen, or failed) sit in the band at the bottom.",
            )
        ),
    ]
    for file, caption in (
        (FigureFile.TRAJECTORY_STEPS, "Objective over the baseline by step."),
        (FigureFile.TRAJECTORY_TIME, "Objective over the baseline by wall time."),
    ):
        blocks.append(Figure(file, figures[file], caption))
    return blocks


def lineage_blocks(data: ReportData, figures: dict[FigureFile, str]) -> list[Block]:
    """The declared tree, where git disagrees with it, and the frontier's path with diffs."""
    view = data.lineage
    git = (
        f"Git ancestry could not be read: {view.repository_problem}."
        if view.repository_problem
        else f"Git ancestry disagrees with the declared lineage on {view.disagreements} "
        "candidate(s)" + (" (dashed in the figure)." if view.disagreements else ".")
    )
    blocks: list[Block] = [
        Heading(2, "Lineage"),
        Para(
            (
                f"{len(view.nodes)} candidates and {len(view.failed_expansions)} steps "
                f"without a commit, under their declared parents. {git}",
            )
        ),
        Figure(FigureFile.LINEAGE, figures[FigureFile.LINEAGE], "The declared lineage tree."),
        Heading(3, "The frontier's path"),
    ]
    for step in data.frontier_path:
        head = f"step {step.step} {short(step.sha)}: {x(step.objective)}"
        inner: list[Block] = [
            Para(("idea: ", Mono(step.idea_id or "-"), f" {step.idea_text or ''}")),
            Code(step.message),
        ]
        inner.append(Code(step.diff, "diff") if step.diff else Para((step.diff_problem or "",)))
        blocks.append(Details(head, tuple(inner)))
    return blocks


def experiment_blocks(data: ReportData) -> list[Block]:
    """Every candidate, every step that committed nothing, every verification: with reasons."""
    verdicts = Counter(e.verdict or "not judged yet" for e in data.experiments)
    kinds = ", ".join(f"{verdicts.get(v.value, 0)} {v.value}" for v in Verdict)
    rows = tuple(
        (
            str(e.step),
            Mono(short(e.sha)),
            Mono(short(e.parent_sha)),
            e.idea_id or "-",
            (e.verdict or "not judged yet") + (" (demoted)" if e.demoted else ""),
            e.stage or "-",
            x(e.objective),
            x(e.vs_parent),
            "tainted" if e.tainted else "",
            e.reason,
        )
        for e in data.experiments
    )
    blocks: list[Block] = [
        Heading(2, "Every experiment"),
        Para(
            (
                f"Verdicts: {kinds}. Nothing is left out: rejected, inconclusive and failed "
                "candidates are listed with the reason the judge gave.",
            )
        ),
        Table(EXPERIMENT_HEADERS, rows),
    ]
    return [*blocks, *_no_commit_blocks(data), *_verification_blocks(data)]


def _no_commit_blocks(data: ReportData) -> list[Block]:
    failed = data.lineage.failed_expansions
    if not failed:
        return []
    rows = tuple(
        (
            str(f.step),
            Mono(short(f.parent_sha)),
            f.idea_id,
            f.outcome,
            "no (infrastructure)" if f.infrastructure else "yes",
            f.message,
        )
        for f in failed
    )
    headers = ("step", "parent", "idea", "outcome", "scored", "why")
    return [Heading(3, "Steps that committed nothing"), Table(headers, rows)]


def _verification_blocks(data: ReportData) -> list[Block]:
    if not data.verifications:
        return []
    rows = tuple(
        (Mono(short(v.sha)), Mono(short(v.against)), v.verdict, v.reason)
        for v in data.verifications
    )
    headers = ("frontier", "against", "verdict", "reason")
    return [Heading(3, "Verification of new frontiers"), Table(headers, rows)]
