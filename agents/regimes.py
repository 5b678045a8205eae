"""A dispatching candidate's regimes: which settings serve which sizes, and what a change reaches.

The composition step writes ``choose_regime`` as nested ``if sizes.F < T: return NAME``
tests (agents/dispatch.py). Read back in that form, it says which regime serves each
configuration, so a change to one regime is known to reach only that regime's configurations.
Any other form (an agent's own predicate) is not interpreted: every configuration may change.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Mapping

from agents.dispatch import SIZES_ARG, RegimeBranch, read_regimes
from agents.mutation import SearchSpace
from agents.tunables import TunablesError, read_requirements, read_space, read_tunables
from kernels.source_ast import parse_shared

DEFAULT_REGIME = "TUNABLES"
_FUNCTION = "choose_regime"


def _leaf(node: ast.stmt) -> str | None:
    if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Constant):
        raise TunablesError("choose_regime returns something other than a regime name or None")
    value = node.value.value
    if value is not None and not isinstance(value, str):
        raise TunablesError(f"choose_regime returns {value!r}, not a regime name or None")
    return value


def _branch(body: list[ast.stmt]) -> RegimeBranch | str | None:
    """`if sizes.F < T: <below>` followed by <above>, or a lone return."""
    first = body[0]
    if not isinstance(first, ast.If):
        if len(body) != 1:
            raise TunablesError("choose_regime has statements after its return")
        return _leaf(first)
    test = first.test
    ok = (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Lt)
        and isinstance(test.left, ast.Attribute)
        and isinstance(test.left.value, ast.Name)
        and test.left.value.id == SIZES_ARG
        and isinstance(test.comparators[0], ast.Constant)
        and isinstance(test.comparators[0].value, int | float)
    )
    if not ok or first.orelse or len(body) < 2:
        raise TunablesError("choose_regime is not a tree of `if sizes.F < T:` tests")
    assert isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute)
    threshold = test.comparators[0]
    assert isinstance(threshold, ast.Constant) and isinstance(threshold.value, int | float)
    return RegimeBranch(
        feature=test.left.attr,
        threshold=float(threshold.value),
        below=_branch(first.body),
        above=_branch(body[1:]),
    )


def read_dispatch_tree(source: str) -> RegimeBranch | str | None:
    """choose_regime as a tree (a leaf is a REGIMES name, or None for TUNABLES); a
    TunablesError when it is missing or written in any other form."""
    for node in parse_shared(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == _FUNCTION:
            body = [s for s in node.body if not _is_docstring(s)]
            if not body:
                raise TunablesError("choose_regime has no body")
            return _branch(body)
    raise TunablesError("the candidate defines no choose_regime")


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def regime_for(tree: RegimeBranch | str | None, sizes: Mapping[str, float]) -> str | None:
    """The regime the tree picks for these sizes (a size it does not know reads as 0)."""
    while isinstance(tree, RegimeBranch):
        tree = tree.below if sizes.get(tree.feature, 0.0) < tree.threshold else tree.above
    return tree


def regime_settings(source: str) -> dict[str, dict[str, str]]:
    """Every regime's full settings: DEFAULT_REGIME for TUNABLES, then the REGIMES entries
    (each over TUNABLES, as the candidate builds them)."""
    defaults = read_tunables(source)
    regimes = {DEFAULT_REGIME: defaults}
    for name, values in read_regimes(source).items():
        regimes[name] = {**defaults, **values}
    return regimes


def serving_regimes(
    source: str, sizes: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, str]]:
    """The regimes (full settings by name) that serve at least one of these configurations;
    every regime when the sizes are not given or the dispatch cannot be read."""
    regimes = regime_settings(source)
    served = served_configs(source, sizes) if sizes else None
    if served is None:
        return regimes
    return {name: settings for name, settings in regimes.items() if served.get(name)} or regimes


def served_configs(
    source: str, sizes: Mapping[str, Mapping[str, float]]
) -> dict[str, list[str]] | None:
    """Each regime's configurations among these (DEFAULT_REGIME's too), or None when the
    dispatch cannot be read in the composition step's form."""
    regimes = regime_settings(source)
    try:
        tree = read_dispatch_tree(source) if len(regimes) > 1 else DEFAULT_REGIME
    except (TunablesError, SyntaxError):
        return None
    served: dict[str, list[str]] = {name: [] for name in regimes}
    for config, point in sizes.items():
        served.setdefault(regime_for(tree, point) or DEFAULT_REGIME, []).append(config)
    return served


def regime_reads(
    source: str,
    sizes: Mapping[str, Mapping[str, float]],
    parent_read: Mapping[str, Collection[str]],
) -> dict[str, set[str] | None]:
    """Per regime, the tunables the parent's code read on the configurations it serves (its
    recorder's report from the parent's sweep), or None where one of them was not reported
    (anything may act there). A tunable no served configuration read cannot change what
    runs in that regime: the torch path's precision where the fused kernels serve."""
    served = served_configs(source, sizes)
    if served is None:
        return {name: None for name in regime_settings(source)}
    reads: dict[str, set[str] | None] = {}
    for name, configs in served.items():
        known = [parent_read.get(c) for c in configs]
        if not configs or any(r is None for r in known):
            reads[name] = None
        else:
            reads[name] = set().union(*(set(r) for r in known if r is not None))
    return reads


def acts_in(names: Collection[str], reads: set[str] | None) -> bool:
    """A change of these tunables can alter what runs where these reads were made (unknown
    reads, or no names to judge by: it may)."""
    return reads is None or not names or bool(set(names) & reads)


def settings_by_config(
    source: str, features: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, str]] | None:
    """The effective settings (those that act) each configuration runs with, or None when
    the candidate's dispatch cannot be read in the composition step's form."""
    try:
        space = SearchSpace(values=read_space(source), requires=read_requirements(source))
        regimes = regime_settings(source)
        tree = read_dispatch_tree(source) if len(regimes) > 1 else None
    except (TunablesError, SyntaxError, ValueError):
        return None
    chosen = {}
    for config, sizes in features.items():
        name = regime_for(tree, sizes) or DEFAULT_REGIME
        if name not in regimes:
            return None
        chosen[config] = space.effective(regimes[name])
    return chosen


def changed_settings(
    parent: str, child: str, features: Mapping[str, Mapping[str, float]]
) -> dict[str, set[str]] | None:
    """Per configuration, the tunables whose effective values differ between two candidates
    that run the same code, or None when that cannot be told."""
    before = settings_by_config(parent, features)
    after = settings_by_config(child, features)
    if before is None or after is None:
        return None
    return {
        config: {
            name
            for name in before[config].keys() | after[config].keys()
            if before[config].get(name) != after[config].get(name)
        }
        for config in features
    }


def changed_configs(
    parent: str, child: str, features: Mapping[str, Mapping[str, float]]
) -> set[str] | None:
    """The configurations whose effective settings differ between two candidates that run
    the same code, or None when that cannot be told (then any configuration may change)."""
    changed = changed_settings(parent, child, features)
    if changed is None:
        return None
    return {config for config, names in changed.items() if names}


def write_regime(source: str, name: str, tunables: Mapping[str, str], parent_sha: str) -> str:
    """The source with REGIMES[name] replaced by these settings (the rest byte for byte);
    its provenance comment says which candidate's regime it was changed from."""
    for node in parse_shared(source).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or not isinstance(node.value, ast.Dict):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(isinstance(t, ast.Name) and t.id == "REGIMES" for t in targets):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == name:
                return _replaced(source, key, value, tunables, parent_sha)
    raise TunablesError(f"REGIMES has no entry {name!r} to rewrite")


def _replaced(
    source: str, key: ast.Constant, value: ast.expr, tunables: Mapping[str, str], parent_sha: str
) -> str:
    lines = source.splitlines(keepends=True)
    indent = " " * key.col_offset
    body = "".join(f"{indent}    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in tunables.items())
    assert value.end_lineno is not None and value.end_col_offset is not None
    head = lines[value.lineno - 1][: value.col_offset]
    tail = lines[value.end_lineno - 1][value.end_col_offset :]
    new = [head + "{\n", body, indent + "}" + tail]
    above = value.lineno - 2  # the provenance comment render_dispatch writes over each entry
    start = value.lineno - 1
    if above >= 0 and lines[above].strip().startswith("# "):
        start = above
        new.insert(0, f"{indent}# changed from candidate {parent_sha[:12]}'s {key.value!s}\n")
    rewritten = "".join(lines[:start] + new + lines[value.end_lineno :])
    if read_regimes(rewritten).get(str(key.value)) != dict(tunables):
        raise TunablesError("rewriting the regime did not round-trip")
    return rewritten
