"""Static checks of candidate source before anything runs: imports, forbidden constructs,
shape special-casing in dispatch predicates (read from compiled bytecode), CONSTRAINTs."""

from __future__ import annotations

import ast
import hashlib
import types
from collections.abc import Callable, Iterator, Mapping

from harness.escape_checks import FORBIDDEN_ATTRIBUTES, escape_findings
from harness.static_models import (
    Constraint,
    Finding,
    Rule,
    StaticReport,
    parse_constraint,
)
from kernels.candidate_tree import local_modules
from kernels.source_ast import compile_expression, parse_python
from kernels.workload import StaticPolicy

# What callers reach through this module.
__all__ = [
    "FORBIDDEN_ATTRIBUTES",
    "FORBIDDEN_CALLS",
    "Constraint",
    "FileFindingsCache",
    "Finding",
    "Rule",
    "StaticReport",
    "check_sources",
    "parse_constraint",
    "read_literal",
]

FORBIDDEN_CALLS = frozenset(
    {"open", "exec", "eval", "compile", "__import__", "breakpoint", "input", "globals", "vars"}
)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _code_constants(code: types.CodeType) -> Iterator[object]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_constants(const)
        elif isinstance(const, tuple | frozenset):
            yield from const
        else:
            yield const


def _predicates(tree: ast.AST) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            yield node.test
        elif isinstance(node, ast.comprehension):
            yield from node.ifs
        elif isinstance(node, ast.Match):
            yield node.subject


def _is_equality_test(expr: ast.expr) -> bool:
    ops = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
    return any(
        isinstance(node, ast.Compare) and any(isinstance(op, ops) for op in node.ops)
        for node in ast.walk(expr)
    )


def _shape_findings(tree: ast.Module, file: str, policy: StaticPolicy) -> Iterator[Finding]:
    forbidden = set(policy.shape_constants)
    for test in _predicates(tree):
        if not _is_equality_test(test):
            continue
        # Read the constants the predicate really compiles to (folded tuples and sets included).
        code = compile_expression(test, file)
        hits = sorted(
            {c for c in _code_constants(code) if type(c) is int and c in forbidden}, key=int
        )
        if hits:
            yield Finding(
                rule=Rule.SHAPE_SPECIAL_CASE,
                file=file,
                line=test.lineno,
                message=f"dispatch predicate compares against official shape constants {hits}; "
                "dispatch on measured device properties or size thresholds, never exact shapes",
            )


def _relative_finding(node: ast.ImportFrom, file: str, local: set[str]) -> Finding | None:
    """A relative import is allowed in one form: 'from .MODULE import NAME' of the tree's own."""
    if node.level == 1 and node.module in local:
        return None
    target = "." * node.level + (node.module or "")
    return Finding(
        rule=Rule.FORBIDDEN_IMPORT,
        file=file,
        line=node.lineno,
        message=f"relative import from {target!r}: a candidate imports its own modules as "
        f"'from .MODULE import NAME' with MODULE one of {sorted(local) or 'its files'}",
    )


def _import_findings(
    tree: ast.Module, file: str, policy: StaticPolicy, local: set[str]
) -> Iterator[Finding]:
    allowed = set(policy.allowed_imports)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            finding = _relative_finding(node, file, local)
            if finding is not None:
                yield finding
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            if name.split(".")[0] not in allowed:
                hint = f" (its own module: 'from .{name} import NAME')" if name in local else ""
                yield Finding(
                    rule=Rule.FORBIDDEN_IMPORT,
                    file=file,
                    line=getattr(node, "lineno", 0),
                    message=f"import of {name!r} is not allowed{hint}; allowed: {sorted(allowed)}",
                )


def _call_findings(tree: ast.Module, file: str, constraints: list[Constraint]) -> Iterator[Finding]:
    banned = {c.name: c for c in constraints if c.name}
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Name) and called.id in FORBIDDEN_CALLS:
            yield Finding(
                rule=Rule.FORBIDDEN_CALL,
                file=file,
                line=called.lineno,
                message=f"call of {called.id}() is not allowed in a candidate",
            )
        dotted = _dotted(node) if isinstance(node, ast.Attribute | ast.Name) else None
        for name, constraint in banned.items():
            if dotted and (dotted == name or dotted.endswith("." + name)):
                yield Finding(
                    rule=Rule.CONSTRAINT,
                    file=file,
                    line=getattr(node, "lineno", 0),
                    message=f"uses {dotted}, forbidden by CONSTRAINT {constraint.text!r}",
                )


def read_literal(tree: ast.Module, name: str) -> object | None:
    """The literal value assigned to a module-level name (e.g. TUNABLES), or None."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _tunable_findings(
    tree: ast.Module, file: str, constraints: list[Constraint]
) -> Iterator[Finding]:
    tunables, space = read_literal(tree, "TUNABLES"), read_literal(tree, "TUNABLE_SPACE")
    if not isinstance(tunables, dict):
        return
    line = next(
        (
            node.lineno
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "TUNABLES" for t in node.targets)
        ),
        0,
    )
    for key, value in tunables.items():
        allowed = space.get(key, {}).get("values") if isinstance(space, dict) else None
        if allowed is not None and value not in allowed:
            yield Finding(
                rule=Rule.TUNABLE_OUT_OF_SPACE,
                file=file,
                line=line,
                message=f"TUNABLES[{key!r}] = {value!r} is not one of {allowed}",
            )
        for c in constraints:
            if c.tunable == key and c.value == value:
                yield Finding(
                    rule=Rule.CONSTRAINT,
                    file=file,
                    line=line,
                    message=f"TUNABLES[{key!r}] = {value!r} is forbidden by CONSTRAINT {c.text!r}",
                )


class FileFindingsCache:
    """Findings of files already checked, by everything they depend on: a search's
    candidates share most of their files with their parents, and checking one costs tens of
    milliseconds of the CPU the judges need."""

    def __init__(self) -> None:
        self._findings: dict[tuple[str, ...], list[Finding]] = {}

    def __len__(self) -> int:
        """Files checked and stored."""
        return len(self._findings)

    def findings(self, key: tuple[str, ...], check: Callable[[], list[Finding]]) -> list[Finding]:
        """The findings stored under `key`, checked (and stored) on first use."""
        if key not in self._findings:
            self._findings[key] = check()
        return list(self._findings[key])


def _file_findings(
    file: str, text: str, policy: StaticPolicy, local: set[str], constraints: list[Constraint]
) -> list[Finding]:
    try:
        tree = parse_python(text, filename=file)
    except SyntaxError as exc:
        return [Finding(rule=Rule.SYNTAX, file=file, line=exc.lineno or 0, message=str(exc.msg))]
    return [
        *_import_findings(tree, file, policy, local),
        *_call_findings(tree, file, constraints),
        *escape_findings(tree, file),
        *_shape_findings(tree, file, policy),
        *_tunable_findings(tree, file, constraints),
    ]


def _entry_findings(file: str, text: str, policy: StaticPolicy) -> list[Finding]:
    try:
        tree = parse_python(text, filename=file)
    except SyntaxError:
        return []  # the syntax finding says what is wrong
    entries = {policy.entry_point, *policy.entry_aliases}
    if any(isinstance(n, ast.ClassDef) and n.name in entries for n in tree.body):
        return []
    message = f"{file} must define class {policy.entry_point}"
    return [Finding(rule=Rule.MISSING_ENTRY_POINT, file=file, line=0, message=message)]


def check_sources(
    sources: Mapping[str, str],
    policy: StaticPolicy,
    entry_file: str,
    constraints: list[Constraint] | None = None,
    cache: FileFindingsCache | None = None,
) -> StaticReport:
    """Run every static rule over a candidate's Python files (a flat package: its top-level
    modules may import each other relatively); `cache` keeps the findings of files seen
    before with the same text, policy, sibling modules and constraints."""
    constraints = constraints or []
    findings: list[Finding] = []
    local = local_modules(sources)
    context = (policy.model_dump_json(), repr(sorted(local)), repr(constraints))
    for file, text in sorted(sources.items()):
        entry = file == entry_file

        def check(file: str = file, text: str = text, entry: bool = entry) -> list[Finding]:
            found = _file_findings(file, text, policy, local, constraints)
            return found + (_entry_findings(file, text, policy) if entry else [])

        if cache is None:
            findings.extend(check())
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        findings.extend(cache.findings((file, digest, str(entry), *context), check))
    if entry_file not in sources:
        findings.append(
            Finding(
                rule=Rule.MISSING_ENTRY_POINT,
                file=entry_file,
                line=0,
                message=f"the candidate tree has no {entry_file}",
            )
        )
    return StaticReport(findings=findings)
