"""The declared lineage as an SVG tree: nodes coloured by verdict, the frontier's path drawn
heavy, failed expansions as leaves, and an edge git ancestry disagrees with drawn dashed red."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.report.figures import FRONTIER, legend, marker
from orchestrator.report.svg import Canvas
from orchestrator.run_view import Lineage, VerdictClass

DX, DY, MARGIN, TOP = 30.0, 64.0, 40.0, 50.0
DISAGREES = "#d81b60"


@dataclass
class _Node:
    """A node of the drawing: a candidate or a failed expansion."""

    key: str
    parent: str | None
    step: int
    kind: VerdictClass | None
    tip: str
    hollow: bool = False
    heavy: bool = False  # on the frontier's path
    frontier: bool = False
    disagrees: bool = False
    children: list[str] = field(default_factory=list)
    x: float = 0.0
    depth: int = 0


def _nodes(lineage: Lineage) -> dict[str, _Node]:
    nodes: dict[str, _Node] = {}
    for n in lineage.nodes:
        verdict = n.verdict or "not judged yet"
        speed = f", {n.objective:.3f}x" if n.objective is not None else ""
        nodes[n.sha] = _Node(
            key=n.sha,
            parent=n.parent_sha,
            step=n.step,
            kind=n.verdict_class,
            tip=f"{n.sha[:10]} step {n.step} ({n.idea_id or 'seed'}): {verdict}{speed}. {n.title}",
            heavy=n.on_frontier_path,
            frontier=n.is_frontier,
            disagrees=n.git_disagrees,
        )
    for failed in lineage.failed_expansions:
        key = f"expansion-{failed.step}"
        scored = "not scored" if failed.infrastructure else "scored against the idea"
        nodes[key] = _Node(
            key=key,
            parent=failed.parent_sha,
            step=failed.step,
            kind=VerdictClass.FAILED,
            tip=f"step {failed.step} ({failed.idea_id}): no commit, {failed.outcome} "
            f"({scored}): {failed.message[:200]}",
            hollow=True,
        )
    for node in nodes.values():
        if node.parent in nodes:
            nodes[node.parent].children.append(node.key)
    for node in nodes.values():
        node.children.sort(key=lambda key: nodes[key].step)
    return nodes


def _layout(nodes: dict[str, _Node]) -> int:
    """Leaves left to right in depth-first order, a parent above the middle of its children;
    returns the number of leaves."""
    roots = sorted((n for n in nodes.values() if n.parent not in nodes), key=lambda n: n.step)
    leaves = 0
    stack: list[tuple[_Node, int, bool]] = [(root, 0, False) for root in reversed(roots)]
    while stack:  # iterative: a long lineage is deeper than Python's recursion limit
        node, depth, done = stack.pop()
        if done:
            kids = [nodes[k] for k in node.children]
            node.x = (kids[0].x + kids[-1].x) / 2
            continue
        node.depth = depth
        if not node.children:
            node.x, leaves = MARGIN + leaves * DX, leaves + 1
            continue
        stack.append((node, depth, True))
        stack.extend((nodes[k], depth + 1, False) for k in reversed(node.children))
    return leaves


def lineage_svg(lineage: Lineage) -> str:
    """The whole declared tree, the seed on top."""
    nodes = _nodes(lineage)
    leaves = _layout(nodes)
    depth = max((n.depth for n in nodes.values()), default=0)
    width = max(560.0, MARGIN * 2 + leaves * DX + 170)
    height = TOP + depth * DY + 80
    title = "Declared lineage: every candidate under its declared parent"
    canvas = Canvas(width, max(height, 260.0), title)
    canvas.text(MARGIN, 22, title, size=13, font_weight="bold")
    for node in nodes.values():
        parent = nodes.get(node.parent or "")
        if parent is None:
            continue
        style: dict[str, object] = {"stroke": "#999", "stroke_width": 1.2}
        if node.heavy and parent.heavy:
            style = {"stroke": FRONTIER, "stroke_width": 3}
        if node.disagrees:
            style = {"stroke": DISAGREES, "stroke_width": 2, "stroke_dasharray": "4,3"}
        y1, y2 = TOP + parent.depth * DY, TOP + node.depth * DY
        canvas.line(parent.x, y1, node.x, y2, **style)
    for node in nodes.values():
        y = TOP + node.depth * DY
        if node.frontier:
            canvas.shape(
                "circle", None, cx=node.x, cy=y, r=10, fill="none", stroke=FRONTIER, stroke_width=2
            )
        marker(canvas, node.x, y, node.kind, node.hollow, node.tip)
        canvas.text(node.x, y + 20, str(node.step), size=9, text_anchor="middle", fill="#555")
    extra = ((FRONTIER, "frontier path"), (DISAGREES, "git disagrees"))
    legend(canvas, width - 150, TOP, extra)
    return canvas.render()
