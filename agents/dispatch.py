"""Reading and rewriting a candidate's dispatch block: per-regime tunables and their predicate."""

from __future__ import annotations

import ast
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.tunables import BLOCK_END as TUNABLES_END
from agents.tunables import BLOCK_START as TUNABLES_START
from agents.tunables import TunablesError
from kernels.source_ast import parse_shared

BLOCK_START = "# --- ratchet:dispatch"
BLOCK_END = "# --- end ratchet:dispatch ---"
SIZES_ARG = "sizes"


class RegimeBranch(BaseModel):
    """`sizes.FEATURE < THRESHOLD` picks `below`, else `above`; a leaf is a REGIMES name, or
    None for the candidate's own TUNABLES."""

    model_config = ConfigDict(frozen=True)

    feature: str = Field(description="Size the predicate reads, e.g. 'd_model'.")
    threshold: float = Field(description="Boundary between the two regimes.")
    below: RegimeBranch | str | None = Field(description="Served when the size is below.")
    above: RegimeBranch | str | None = Field(description="Served when the size is not below.")


class Regime(BaseModel):
    """One entry of REGIMES: the tunables it runs and where they were measured."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Key in REGIMES, e.g. 'r1'.")
    tunables: dict[str, str] = Field(description="Every tunable's value in this regime.")
    source_sha: str = Field(description="The measured candidate these tunables come from.")


def has_dispatch_block(source: str) -> bool:
    """True when the source declares a dispatch block the composition step can rewrite."""
    start = source.find(BLOCK_START)
    return start >= 0 and source.find(BLOCK_END) > start


def read_regimes(source: str) -> dict[str, dict[str, str]]:
    """The REGIMES dict of a candidate ({} when it dispatches nowhere)."""
    tree = parse_shared(source)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            targets: list[ast.expr] = [node.target]
            value_node = node.value
        elif isinstance(node, ast.Assign):
            targets, value_node = list(node.targets), node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "REGIMES" for t in targets):
            value: Any = ast.literal_eval(value_node) if value_node is not None else {}
            if not isinstance(value, dict):
                raise TunablesError("REGIMES must be a dict of name -> {tunable: value}")
            return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in value.items()}
    return {}


def code_outside_blocks(source: str) -> str:
    """The source without its tunables and dispatch blocks: two candidates that differ only
    in those blocks run the same code under different settings."""
    for start_marker, end_marker in ((TUNABLES_START, TUNABLES_END), (BLOCK_START, BLOCK_END)):
        start = source.find(start_marker)
        end = source.find(end_marker)
        if start >= 0 and end > start:
            source = source[:start] + source[end + len(end_marker) :]
    return source.rstrip()  # `git show` drops the final newline; it changes no code


def _branch_lines(node: RegimeBranch | str | None, indent: str) -> list[str]:
    if not isinstance(node, RegimeBranch):
        return [f"{indent}return {json.dumps(node) if node is not None else 'None'}"]
    # Ordered comparisons only: a regime is a range of sizes, never one exact shape.
    return [
        f"{indent}if {SIZES_ARG}.{node.feature} < {node.threshold!r}:",
        *_branch_lines(node.below, indent + "    "),
        *_branch_lines(node.above, indent),
    ]


def render_dispatch(regimes: list[Regime], tree: RegimeBranch | str | None) -> str:
    """The body of a dispatch block: REGIMES and the choose_regime predicate."""
    lines = ["REGIMES = {"]
    for regime in regimes:
        lines.append(f"    # measured as candidate {regime.source_sha[:12]}")
        lines.append(f"    {json.dumps(regime.name)}: {{")
        lines += [f"        {json.dumps(k)}: {json.dumps(v)}," for k, v in regime.tunables.items()]
        lines.append("    },")
    lines += [
        "}",
        "",
        "",
        f"def choose_regime({SIZES_ARG}):",
        '    """The REGIMES entry that serves inputs of these sizes (None: TUNABLES)."""',
        *_branch_lines(tree, "    "),
    ]
    return "\n".join(lines) + "\n\n\n"  # the two blank lines a formatter wants


def write_dispatch(source: str, regimes: list[Regime], tree: RegimeBranch | str | None) -> str:
    """Replace the body of the dispatch block, keeping everything else byte for byte."""
    if not has_dispatch_block(source):
        raise TunablesError(
            f"the candidate has no dispatch block ({BLOCK_START!r} ... {BLOCK_END!r})"
        )
    start = source.find(BLOCK_START)
    header_end = source.index("\n", start) + 1
    end = source.find(BLOCK_END)
    rewritten = source[:header_end] + render_dispatch(regimes, tree) + source[end:]
    try:
        round_trip = read_regimes(rewritten)
    except (SyntaxError, ValueError) as exc:
        raise TunablesError(f"rewritten dispatch block does not parse: {exc}") from exc
    if round_trip != {r.name: r.tunables for r in regimes}:
        raise TunablesError("rewriting the dispatch block did not round-trip")
    return rewritten
