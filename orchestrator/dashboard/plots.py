"""Inline SVG figures drawn on the server: the trajectory and the lineage tree (every text
escaped here, since the templates insert the SVG as markup)."""

from __future__ import annotations

import math
from html import escape

from orchestrator.run_view import Lineage, LineageNode, Trajectory

COLORS = {
    "promoted": "#2e7d32",
    "rejected": "#ef6c00",
    "inconclusive": "#5c6bc0",
    "failed": "#c62828",
    None: "#9e9e9e",
}
WIDTH, HEIGHT, PAD = 860, 360, 48
FAIL_BAND = 22  # below the axis: judged candidates with no value (failed, screen rejects)


def _scale(low: float, high: float, size: float, start: float) -> tuple[float, float]:
    span = (high - low) or 1.0
    return size / span, start - low * size / span


class _Frame:
    """Where a (x, value) pair lands in the trajectory plot."""

    def __init__(self, xs: list[float], values: list[float]) -> None:
        self.low, self.high = min([1.0, *values]) * 0.95, max([1.0, *values]) * 1.05
        self.x_low, self.x_high = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
        self.plot_h = HEIGHT - 2 * PAD - FAIL_BAND
        self.ky, self.by = _scale(self.low, self.high, -self.plot_h, PAD + self.plot_h)
        self.kx, self.bx = _scale(self.x_low, self.x_high, WIDTH - 2 * PAD, PAD)

    def point(self, x: float, value: float | None) -> tuple[float, float]:
        y = self.ky * value + self.by if value is not None else HEIGHT - PAD + FAIL_BAND / 2
        return self.kx * x + self.bx, y


def trajectory_svg(view: Trajectory, x_axis: str, config: str | None) -> str:
    """Every judged candidate as a point (its objective, or its speedup on one config), the
    frontier as a step line, the baseline at 1x; points link to candidate pages."""
    values = {p.sha: p.per_config.get(config) if config else p.objective for p in view.points}

    def x_of(elapsed: float, step: int) -> float:
        return float(step) if x_axis == "step" else elapsed

    xs = [x_of(p.elapsed_s, p.step) for p in view.points] or [0.0, 1.0]
    frame = _Frame(xs, [v for v in values.values() if v is not None])
    parts = [
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="trajectory" xmlns="http://www.w3.org/2000/svg">',
        _axes(frame, x_axis),
    ]
    steps = [
        frame.point(x_of(c.elapsed_s, c.step), values.get(c.sha))
        for c in view.frontier
        if values.get(c.sha) is not None
    ]
    if steps:
        path = f"M{steps[0][0]:.1f},{steps[0][1]:.1f}"
        path += "".join(f" H{px:.1f} V{py:.1f}" for px, py in steps[1:]) + f" H{WIDTH - PAD}"
        parts.append(f'<path class="frontier" d="{path}" fill="none" stroke="#1b5e20"/>')
    for p in view.points:
        value = values.get(p.sha)
        cx, cy = frame.point(x_of(p.elapsed_s, p.step), value)
        shown = f"{value:.3f}x" if value is not None else "no value"
        label = escape(f"step {p.step} {p.sha[:10]} {p.verdict} {shown}: {p.title}")
        faded = ' fill-opacity="0.35"' if p.tainted else ""
        parts.append(
            f'<a href="/candidate/{escape(p.sha)}" class="point {p.verdict_class.value}">'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{COLORS[p.verdict_class.value]}"'
            f"{faded}><title>{label}</title></circle></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _axes(frame: _Frame, x_axis: str) -> str:
    axis_y = HEIGHT - PAD - FAIL_BAND
    out = [
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{axis_y}" stroke="#555"/>',
        f'<line x1="{PAD}" y1="{axis_y}" x2="{WIDTH - PAD}" y2="{axis_y}" stroke="#555"/>',
    ]
    for tick in _ticks(frame.low, frame.high):
        y = frame.ky * tick + frame.by
        out.append(
            f'<text x="{PAD - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{tick:g}x</text>'
        )
    base = frame.ky * 1.0 + frame.by
    out.append(
        f'<line x1="{PAD}" y1="{base:.1f}" x2="{WIDTH - PAD}" y2="{base:.1f}" '
        'stroke="#999" stroke-dasharray="4 4"/>'
        f'<text x="{WIDTH - PAD}" y="{base - 4:.1f}" text-anchor="end" class="tick">baseline</text>'
    )
    for tick in _ticks(frame.x_low, frame.x_high):
        x = frame.kx * tick + frame.bx
        out.append(
            f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle" class="tick">{tick:g}</text>'
        )
    unit = "step" if x_axis == "step" else "seconds since the run started"
    out.append(
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 4}" text-anchor="middle" class="tick">{unit}; '
        "points below the axis: judged with no value (failed, screen rejects)</text>"
    )
    return "".join(out)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if raw <= m * step)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(count + 2) if first + i * step <= high]


def _rows(nodes: list[LineageNode]) -> dict[str, float]:
    """Tree layout: leaves on consecutive rows, a parent at the middle of its children."""
    children: dict[str | None, list[LineageNode]] = {}
    known = {n.sha for n in nodes}
    for node in sorted(nodes, key=lambda n: n.step):
        parent = node.parent_sha if node.parent_sha in known else None
        children.setdefault(parent, []).append(node)
    rows: dict[str, float] = {}

    def place(node: LineageNode) -> float:
        kids = [k for k in children.get(node.sha, []) if k.sha not in rows]
        if not kids:
            rows[node.sha] = float(len([r for r in rows.values() if r >= 0]))
            return rows[node.sha]
        rows[node.sha] = -1.0  # placed: a cycle in a damaged lineage cannot loop forever
        placed = [place(kid) for kid in kids]
        rows[node.sha] = (placed[0] + placed[-1]) / 2
        return rows[node.sha]

    for root in children.get(None, []):
        place(root)
    return rows


def lineage_svg(view: Lineage) -> str:
    """The declared tree left to right by generation; the frontier path drawn thick, nodes
    coloured by verdict, and a dashed red ring where git ancestry disagrees."""
    rows = _rows(view.nodes)
    dx, dy = 150, 34
    depth = max((n.depth for n in view.nodes), default=0)
    width = PAD * 2 + dx * depth + 160
    height = PAD * 2 + dy * max(1.0, max(rows.values(), default=0.0) + 1)
    at = {n.sha: (PAD + dx * n.depth, PAD + dy * rows.get(n.sha, 0.0)) for n in view.nodes}
    on_path = {n.sha for n in view.nodes if n.on_frontier_path}
    parts = [
        f'<svg class="tree" viewBox="0 0 {width} {height:.0f}" width="{width}" '
        f'height="{height:.0f}" role="img" aria-label="lineage" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for node in view.nodes:
        if node.parent_sha in at:
            (x1, y1), (x2, y2) = at[node.parent_sha], at[node.sha]
            thick = node.sha in on_path and node.parent_sha in on_path
            cls = "edge path" if thick else "edge"
            parts.append(
                f'<path class="{cls}" d="M{x1},{y1:.1f} C{x1 + dx / 2},{y1:.1f} '
                f'{x2 - dx / 2},{y2:.1f} {x2},{y2:.1f}" fill="none"/>'
            )
    for node in view.nodes:
        x, y = at[node.sha]
        color = COLORS[node.verdict_class.value if node.verdict_class else None]
        ring = (
            f'<circle cx="{x}" cy="{y:.1f}" r="11" class="disagrees" fill="none"/>'
            if node.git_disagrees
            else ""
        )
        frontier = ' stroke="#000" stroke-width="3"' if node.is_frontier else ""
        label = escape(f"{node.sha[:8]} s{node.step}" + (" git≠" if node.git_disagrees else ""))
        tip = escape(
            f"step {node.step} {node.sha[:10]} {node.verdict or 'not judged yet'}: {node.title}"
        )
        parts.append(
            f'<a href="/candidate/{escape(node.sha)}" class="node">{ring}'
            f'<circle cx="{x}" cy="{y:.1f}" r="7" fill="{color}"{frontier}>'
            f"<title>{tip}</title></circle>"
            f'<text x="{x + 12}" y="{y + 4:.1f}" class="label">{label}</text></a>'
        )
    parts.append("</svg>")
    return "".join(parts)
