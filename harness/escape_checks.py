"""The escape rules: interpreter internals, attributes read by computed names, monkeypatching."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from harness.static_models import Finding, Rule
from kernels.source_ast import compile_expression

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
        code = compile_expression(node, "<name>")
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


def escape_findings(tree: ast.Module, file: str) -> Iterator[Finding]:
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
