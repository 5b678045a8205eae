"""Static checks of candidate source before anything runs: imports, forbidden constructs,
shape special-casing in dispatch predicates (read from compiled bytecode), CONSTRAINTs."""

from __future__ import annotations

import ast
import enum
import hashlib
import re
import types
from collections.abc import Callable, Iterator, Mapping

from pydantic import BaseModel, ConfigDict, Field

from kernels.candidate_tree import local_modules
from kernels.workload import StaticPolicy

FORBIDDEN_CALLS = frozenset(
    {"open", "exec", "eval", "compile", "__import__", "breakpoint", "input", "globals", "vars"}
)
# Modules that reach the process, files, threads or the network: refused as imports by the
# allow-list, and as attributes of allowed modules (torch.os, torch.cuda.threading,
# collections._sys...), under their plain and their private (underscore) names.
_ESCAPE_MODULES = (
    "sys",
    "os",
    "posix",
    "subprocess",
    "builtins",
    "threading",
    "thread",
    "multiprocessing",
    "concurrent",
    "asyncio",
    "socket",
    "ctypes",
    "importlib",
    "imp",
    "shutil",
    "pathlib",
    "tempfile",
    "io",
    "mmap",
    "pty",
    "select",
    "selectors",
    "signal",
    "gc",
    "inspect",
)
# Ways out of the sandbox the import rule alone would miss (torch.sys, torch.os, frames...).
FORBIDDEN_ATTRIBUTES = frozenset(
    {name for module in _ESCAPE_MODULES for name in (module, "_" + module)}
    | {
        "__builtins__",
        "__globals__",
        "__subclasses__",
        "__code__",
        "__dict__",
        "_getframe",
        "__import__",
        "__loader__",
        "__spec__",
    }
)
# Calls that read an attribute by a name computed at run time.
_DYNAMIC_GETTERS = frozenset({"getattr", "setattr", "delattr", "attrgetter"})
_CONSTRAINT_FORM = re.compile(r"^forbid\s+(?P<target>\S+)$")


class Rule(enum.StrEnum):
    """Which static rule a finding breaks."""

    SYNTAX = "syntax"
    FORBIDDEN_IMPORT = "forbidden_import"
    FORBIDDEN_CALL = "forbidden_call"
    SHAPE_SPECIAL_CASE = "shape_special_case"
    FORBIDDEN_ATTRIBUTE = "forbidden_attribute"
    MONKEYPATCH = "monkeypatch"
    MISSING_ENTRY_POINT = "missing_entry_point"
    TUNABLE_OUT_OF_SPACE = "tunable_out_of_space"
    CONSTRAINT = "constraint"


class Finding(BaseModel):
    """One violation, located."""

    model_config = ConfigDict(frozen=True)

    rule: Rule = Field(description="The rule broken.")
    file: str = Field(description="File name inside the candidate tree.")
    line: int = Field(description="1-based line number (0 when not tied to a line).")
    message: str = Field(description="What is wrong and how to fix it.")


class StaticReport(BaseModel):
    """All findings of the static stage; passed when there are none."""

    model_config = ConfigDict(frozen=True)

    findings: list[Finding] = Field(default_factory=list, description="Violations found.")

    @property
    def passed(self) -> bool:
        """No findings."""
        return not self.findings

    def summary(self) -> str:
        """One line per finding."""
        return "\n".join(f"{f.file}:{f.line}: [{f.rule}] {f.message}" for f in self.findings)


class Constraint(BaseModel):
    """A checkable CONSTRAINT: 'forbid NAME=VALUE' (a tunable setting) or 'forbid DOTTED.NAME'."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The constraint as written by its author.")
    tunable: str | None = Field(default=None, description="Tunable name for NAME=VALUE.")
    value: str | None = Field(default=None, description="Forbidden tunable value.")
    name: str | None = Field(default=None, description="Forbidden (dotted) name in the source.")


def parse_constraint(text: str) -> Constraint:
    """Parse 'forbid NAME=VALUE' or 'forbid dotted.name'; ValueError shows the expected form."""
    match = _CONSTRAINT_FORM.match(text.strip())
    if not match:
        raise ValueError(
            f"constraint {text!r} is not checkable; expected 'forbid TUNABLE=VALUE' "
            "(e.g. 'forbid matmul_precision=bf16') or 'forbid NAME' (e.g. 'forbid torch.compile')"
        )
    target = match["target"]
    if "=" in target:
        tunable, _, value = target.partition("=")
        if not tunable or not value:
            raise ValueError(f"constraint {text!r}: expected 'forbid TUNABLE=VALUE'")
        return Constraint(text=text, tunable=tunable, value=value)
    if not re.fullmatch(r"[A-Za-z_][\w.]*", target):
        raise ValueError(f"constraint {text!r}: {target!r} is not a (dotted) Python name")
    return Constraint(text=text, name=target)


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
        code = compile(ast.Expression(body=test), file, "eval")
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


def _imported_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _assigned(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign | ast.Delete):
        return list(node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        return [node.args[0]] if node.func.id in ("setattr", "delattr") else []
    return []


def _folded_string(node: ast.expr) -> str | None:
    """The string an expression always evaluates to ('o' + 's' included), or None."""
    try:
        code = compile(ast.Expression(body=node), "<name>", "eval")
    except (SyntaxError, ValueError, TypeError):
        return None
    names_read = bool(code.co_names)
    value = code.co_consts[0] if code.co_consts and not names_read else None
    return value if isinstance(value, str) else None


def _loop_literals(tree: ast.Module) -> dict[str, set[str] | None]:
    """Names bound only by `for NAME in ("a", "b")`: the strings they take (None: bound some
    other way too, so unknown)."""
    values: dict[str, set[str] | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            literal = node.iter if isinstance(node.iter, ast.Tuple | ast.List) else None
            items = [_folded_string(e) for e in literal.elts] if literal else [None]
            known = values.get(node.target.id, set())
            values[node.target.id] = (
                None if known is None or None in items else known | {i for i in items if i}
            )
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            values.setdefault(node.id, None)
    return values


def _attribute_names(arg: ast.expr, loops: dict[str, set[str] | None]) -> set[str] | None:
    """Every attribute name an argument can be (None: computed at run time)."""
    text = _folded_string(arg)
    if text is not None:
        return set(text.split("."))
    if isinstance(arg, ast.Name) and loops.get(arg.id):
        return {part for value in loops[arg.id] or () for part in value.split(".")}
    return None


def _dynamic_findings(
    node: ast.Call, file: str, loops: dict[str, set[str] | None]
) -> Iterator[Finding]:
    """getattr(torch, "o" + "s") is torch.os, and is refused as torch.os is; a name no static
    check can read (getattr(x, name), attrgetter(name)) is refused, because the object may be a
    module."""
    func = node.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if called not in _DYNAMIC_GETTERS:
        return
    for arg in node.args if called == "attrgetter" else node.args[1:2]:
        parts = _attribute_names(arg, loops)
        if parts is None:
            message = f"{called}() with an attribute name computed at run time"
        elif parts & FORBIDDEN_ATTRIBUTES:
            message = f"{called}() reaches {sorted(parts & FORBIDDEN_ATTRIBUTES)}"
        else:
            continue
        yield Finding(
            rule=Rule.FORBIDDEN_ATTRIBUTE,
            file=file,
            line=node.lineno,
            message=f"{message}: candidates may not reach the interpreter, the file system, "
            "threads or other processes; write the attribute out (obj.name, or "
            "getattr(obj, 'name') with a literal name)",
        )


def _escape_findings(tree: ast.Module, file: str) -> Iterator[Finding]:
    """Reaching for interpreter internals, or changing a library's module state."""
    modules = _imported_names(tree)
    loops = _loop_literals(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield from _dynamic_findings(node, file, loops)
        name = node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            name = node.id
        if name in FORBIDDEN_ATTRIBUTES:
            yield Finding(
                rule=Rule.FORBIDDEN_ATTRIBUTE,
                file=file,
                line=getattr(node, "lineno", 0),
                message=f"access to {name!r} is not allowed: candidates may not reach the "
                "interpreter, the file system or other processes",
            )
        for target in _assigned(node):
            if _root(target) in modules:
                yield Finding(
                    rule=Rule.MONKEYPATCH,
                    file=file,
                    line=getattr(node, "lineno", 0),
                    message=f"assignment to {ast.unparse(target)}: candidates may not change "
                    "library state (timers, precision flags, functions)",
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

    def findings(self, key: tuple[str, ...], check: Callable[[], list[Finding]]) -> list[Finding]:
        """The findings stored under `key`, checked (and stored) on first use."""
        if key not in self._findings:
            self._findings[key] = check()
        return list(self._findings[key])


def _file_findings(
    file: str, text: str, policy: StaticPolicy, local: set[str], constraints: list[Constraint]
) -> list[Finding]:
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError as exc:
        return [Finding(rule=Rule.SYNTAX, file=file, line=exc.lineno or 0, message=str(exc.msg))]
    return [
        *_import_findings(tree, file, policy, local),
        *_call_findings(tree, file, constraints),
        *_escape_findings(tree, file),
        *_shape_findings(tree, file, policy),
        *_tunable_findings(tree, file, constraints),
    ]


def _entry_findings(file: str, text: str, policy: StaticPolicy) -> list[Finding]:
    try:
        tree = ast.parse(text, filename=file)
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
