"""The report's figures as SVG: the trajectory (over steps and over time), the declared lineage
tree, and the frontier's speedup per config."""

from __future__ import annotations

import enum

from orchestrator.report.svg import Canvas, Plot, Scale, nice_ticks
from orchestrator.run_view import EvaluationTable, Trajectory, VerdictClass

COLORS = {
    VerdictClass.PROMOTED: "#2e7d32",
    VerdictClass.REJECTED: "#c62828",
    VerdictClass.INCONCLUSIVE: "#e69f00",
    VerdictClass.FAILED: "#616161",
}
UNJUDGED = "#9e9e9e"
FRONTIER = "#1f3a93"


class Axis(enum.StrEnum):
    """What the trajectory's x axis counts."""

    STEP = "step"
    TIME = "time"


def marker(
    canvas: Canvas, x: float, y: float, kind: VerdictClass | None, hollow: bool, tip: str
) -> None:
    """One candidate's mark: its shape and colour say its verdict class (hollow: tainted)."""
    color = COLORS.get(kind, UNJUDGED) if kind else UNJUDGED
    fill = "white" if hollow else color
    style = {"fill": fill, "stroke": color, "stroke_width": 1.5}
    if kind is VerdictClass.REJECTED:
        canvas.shape("rect", tip, x=x - 4.5, y=y - 4.5, width=9, height=9, **style)
    elif kind is VerdictClass.INCONCLUSIVE:
        points = f"{x:.1f},{y - 6:.1f} {x + 6:.1f},{y:.1f} {x:.1f},{y + 6:.1f} {x - 6:.1f},{y:.1f}"
        canvas.shape("polygon", tip, points=points, **style)
    elif kind is VerdictClass.FAILED:
        a, b, c, d = x - 4, y - 4, x + 4, y + 4
        path = f"M{a:.1f},{b:.1f} L{c:.1f},{d:.1f} M{a:.1f},{d:.1f} L{c:.1f},{b:.1f}"
        canvas.shape("path", tip, d=path, stroke=color, stroke_width=2.2, fill="none")
    else:
        canvas.shape("circle", tip, cx=x, cy=y, r=5, **style)


def legend(canvas: Canvas, x: float, y: float, extra: tuple[tuple[str, str], ...] = ()) -> None:
    """The verdict classes' marks, then `extra` (colour, label) lines."""
    for index, kind in enumerate(VerdictClass):
        marker(canvas, x + 6, y + index * 18, kind, False, kind.value)
        canvas.text(x + 18, y + index * 18 + 4, kind.value, size=10)
    marker(canvas, x + 6, y + 4 * 18, VerdictClass.INCONCLUSIVE, True, "tainted")
    canvas.text(x + 18, y + 4 * 18 + 4, "tainted (hollow)", size=10)
    for index, (color, label) in enumerate(extra, start=5):
        canvas.line(x, y + index * 18, x + 12, y + index * 18, stroke=color, stroke_width=2.5)
        canvas.text(x + 18, y + index * 18 + 4, label, size=10)


def _x_of(axis: Axis, step: int, elapsed_s: float) -> float:
    return float(step) if axis is Axis.STEP else elapsed_s / 60.0


def trajectory_svg(traj: Trajectory, axis: Axis) -> str:
    """Every judged candidate as a point (objective over the baseline against step or time),
    the frontier as a step line; candidates never swept sit in a band at the bottom."""
    width, height, left, right, top, bottom = 780.0, 345.0, 64.0, 610.0, 34.0, 300.0
    measured = [p.objective for p in traj.points if p.objective is not None]
    low = min([1.0, *measured]) * 0.9
    high = max([1.1, *measured]) * 1.06
    xs = [_x_of(axis, p.step, p.elapsed_s) for p in traj.points] or [0.0]
    x_high = max(xs) if max(xs) > min(xs) else min(xs) + 1
    x_scale = Scale(min(0.0, min(xs)), x_high, left + 8, right - 8)
    plot = Plot(x=x_scale, y=Scale(low, high, bottom - 34, top), base=bottom)
    kind = traj.objective_kind or "objective"
    title = f"Trajectory over {'steps' if axis is Axis.STEP else 'time'}: {kind} over the baseline"
    canvas = Canvas(width, height, title)
    canvas.text(left, 20, title, size=13, font_weight="bold")
    canvas.shape("rect", None, x=left, y=bottom - 24, width=right - left, height=24, fill="#f4f4f4")
    canvas.text(left + 4, bottom - 8, "not swept (screen rejects, failures)", size=9, fill="#666")
    x_label = "step" if axis is Axis.STEP else "minutes since the run's first start"
    plot.axes(canvas, x_label, f"{kind} (x baseline)", "{:.2f}x")
    baseline = plot.y(1.0)
    canvas.line(left, baseline, right, baseline, stroke="#777", stroke_dasharray="5,4")
    canvas.text(right - 4, baseline - 4, "baseline", size=9, text_anchor="end", fill="#555")
    _frontier_line(canvas, plot, traj, axis, right)
    for point in traj.points:
        x = plot.x(_x_of(axis, point.step, point.elapsed_s))
        y = plot.y(point.objective) if point.objective is not None else bottom - 12
        tip = f"{point.sha[:10]} step {point.step}: {point.verdict}"
        if point.objective is not None:
            tip += f", {point.objective:.3f}x"
        marker(canvas, x, y, point.verdict_class, point.tainted, f"{tip}: {point.reason}")
    legend(canvas, right + 26, top + 10, ((FRONTIER, "frontier"),))
    return canvas.render()


def _frontier_line(canvas: Canvas, plot: Plot, traj: Trajectory, axis: Axis, right: float) -> None:
    changes = [f for f in traj.frontier if f.objective is not None]
    changes.sort(key=lambda f: _x_of(axis, f.step, f.elapsed_s) if axis is Axis.TIME else f.seq)
    points: list[tuple[float, float]] = []
    for change in changes:
        assert change.objective is not None
        x = plot.x(_x_of(axis, change.step, change.elapsed_s))
        if axis is Axis.STEP and points:
            x = max(x, points[-1][0])  # a demotion reinstates an older step: no step back
        y = plot.y(change.objective)
        if points:
            points.append((x, points[-1][1]))
        points.append((x, y))
    if points:
        points.append((right - 8, points[-1][1]))
        canvas.polyline(points, stroke=FRONTIER, stroke_width=2.2)


def configs_svg(table: EvaluationTable, title: str) -> str:
    """The frontier's speedup over the baseline on each config, with its 95% CI."""
    rows = [r for r in table.rows if r.x_baseline is not None]
    width, left, right, top = 780.0, 110.0, 700.0, 40.0
    height = top + 24 * max(1, len(rows)) + 56
    bottom = height - 50
    high = max([1.2, *(r.x_baseline.ci_high for r in rows if r.x_baseline)]) * 1.08
    plot = Plot(x=Scale(0.0, high, left, right), y=Scale(0.0, 1.0, bottom, top))
    canvas = Canvas(width, height, title)
    canvas.text(left, 22, title, size=13, font_weight="bold")
    for index, row in enumerate(rows):
        ratio = row.x_baseline
        assert ratio is not None
        y = top + 24 * index + 6
        color = COLORS[VerdictClass.INCONCLUSIVE] if row.tainted else FRONTIER
        tip = f"{row.config_id}: {ratio.median:.3f}x [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}]"
        bar = plot.x(ratio.median) - left
        canvas.shape("rect", tip, x=left, y=y, width=bar, height=14, fill=color, opacity=0.8)
        low, up = plot.x(ratio.ci_low), plot.x(ratio.ci_high)
        canvas.line(low, y + 7, up, y + 7, stroke="#111", stroke_width=1.4)
        canvas.text(left - 6, y + 11, row.config_id, size=10, text_anchor="end")
        canvas.text(up + 6, y + 11, f"{ratio.median:.2f}x", size=10)
    for tick in nice_ticks(0.0, high):
        x = plot.x(tick)
        canvas.line(x, bottom, x, bottom + 4)
        canvas.text(x, bottom + 16, f"{tick:g}x", size=10, text_anchor="middle")
    canvas.line(left, bottom, right, bottom)
    one = plot.x(1.0)
    canvas.line(one, top - 4, one, bottom, stroke="#777", stroke_dasharray="5,4")
    canvas.text(one + 3, bottom - 4, "baseline", size=9, fill="#555")
    canvas.text(
        (left + right) / 2,
        bottom + 34,
        "speed over the baseline (median, 95% CI)",
        text_anchor="middle",
    )
    return canvas.render()
