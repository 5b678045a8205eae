"""Reading and rewriting a candidate's declared tunables (the TUNABLES block)."""

from __future__ import annotations

import ast
import json
from typing import Any

from kernels.source_ast import parse_shared

BLOCK_START = "# --- ratchet:tunables"
BLOCK_END = "# --- end ratchet:tunables ---"


class TunablesError(ValueError):
    """A candidate whose tunables cannot be read or rewritten."""


def _literal(source: str, name: str) -> object:
    tree = parse_shared(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise TunablesError(f"the candidate defines no literal {name} at module level")


def _space(source: str) -> dict[str, dict[str, Any]]:
    value = _literal(source, "TUNABLE_SPACE")
    expected = "TUNABLE_SPACE = {name: {'values': [...], 'doc': '...'}}"
    if not isinstance(value, dict):
        raise TunablesError(f"TUNABLE_SPACE must be a dict; expected {expected}")
    for name, entry in value.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("values"), list | tuple):
            raise TunablesError(
                f"TUNABLE_SPACE[{name!r}] has no 'values' list; expected {expected}"
            )
    return value


def read_tunables(source: str) -> dict[str, str]:
    """The TUNABLES dict of a candidate source."""
    value = _literal(source, "TUNABLES")
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise TunablesError("TUNABLES must be a dict of str -> str")
    return {str(k): v for k, v in value.items()}


def read_space(source: str) -> dict[str, list[str]]:
    """Allowed values of every tunable (TUNABLE_SPACE[name]['values'])."""
    space = _space(source)
    return {str(k): [str(v) for v in entry["values"]] for k, entry in space.items()}


def read_requirements(source: str) -> dict[str, dict[str, str]]:
    """What each tunable needs elsewhere before it does anything
    (TUNABLE_SPACE[name]['requires'], e.g. a fused kernel's block size needs the fused kernel).

    A tunable without 'requires' always acts. A requirement naming an undeclared tunable or
    value is a TunablesError: the operator would otherwise set a value the kernel refuses.
    """
    space = _space(source)
    expected = "'requires': {'other_tunable': 'value it must have'}"
    requirements: dict[str, dict[str, str]] = {}
    for name, entry in space.items():
        needs = entry.get("requires", {})
        if not isinstance(needs, dict):
            raise TunablesError(f"TUNABLE_SPACE[{name!r}]['requires'] must be a dict; {expected}")
        for other, value in needs.items():
            values = [str(v) for v in space.get(other, {}).get("values", [])]
            if str(value) not in values:
                raise TunablesError(
                    f"TUNABLE_SPACE[{name!r}] requires {other}={value!r}, which is not a "
                    f"declared value (declared: {values or 'no such tunable'}); {expected}"
                )
        requirements[str(name)] = {str(k): str(v) for k, v in needs.items()}
    return requirements


def read_docs(source: str) -> dict[str, str]:
    """One-line description of every tunable."""
    return {str(k): str(v.get("doc", "")) for k, v in _space(source).items()}


def idea_applied(targets: dict[str, str | None], tunables: dict[str, str]) -> bool:
    """True when every concrete setting an idea asks for already holds (nothing left to do).

    Ideas without concrete targets (free text, 'change X') are never considered applied.
    """
    concrete = {k: v for k, v in targets.items() if v is not None}
    if not concrete or len(concrete) != len(targets):
        return False
    return all(tunables.get(k) == v for k, v in concrete.items())


def write_tunables(source: str, tunables: dict[str, str]) -> str:
    """Replace the body of the TUNABLES block, keeping everything else byte for byte."""
    start = source.find(BLOCK_START)
    end = source.find(BLOCK_END)
    if start < 0 or end < start:
        raise TunablesError(
            f"the candidate has no tunables block ({BLOCK_START!r} ... {BLOCK_END!r})"
        )
    header_end = source.index("\n", start) + 1
    # JSON string literals are valid Python string literals (quotes and escapes included).
    items = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in tunables.items())
    rewritten = source[:header_end] + "TUNABLES = {\n" + items + "}\n" + source[end:]
    try:
        round_trip = read_tunables(rewritten)
    except SyntaxError as exc:
        raise TunablesError(f"rewritten tunables block does not parse: {exc}") from exc
    if round_trip != tunables:
        raise TunablesError("rewriting the tunables block did not round-trip")
    return rewritten
