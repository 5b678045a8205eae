"""A candidate as a flat package of modules: reading its sources, importing it, bundling it."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from kernels.source_ast import parse_python

# Directories of a tree that never hold candidate code.
SKIPPED_PARTS = frozenset({".git", "__pycache__"})
BUNDLE_HEADER = "# --- module {name} (bundled by ratchet export) ---"


class CandidateTreeError(ValueError):
    """A candidate tree that cannot be read, imported or bundled as it is."""


def module_name(path: str) -> str | None:
    """The module a top-level file of the tree defines ('attention.py' -> 'attention')."""
    if "/" in path or not path.endswith(".py"):
        return None
    return path.removesuffix(".py")


def local_modules(sources: Mapping[str, str]) -> set[str]:
    """Names of the tree's own modules, which its files may import relatively."""
    return {name for path in sources if (name := module_name(path)) is not None}


def read_tree(root: Path, entry: str) -> dict[str, str]:
    """Every Python file of a candidate: a single module file (stored under `entry`) or a
    directory holding `entry` and its sibling modules, by posix path relative to it."""
    if root.is_file():
        return {entry: root.read_text(encoding="utf-8")}
    if not root.is_dir():
        raise CandidateTreeError(f"{root} is neither a module file nor a candidate directory")
    sources = {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.py"))
        if not SKIPPED_PARTS.intersection(path.relative_to(root).parts)
    }
    if entry not in sources:
        raise CandidateTreeError(f"{root} holds no entry module {entry}; found {sorted(sources)}")
    return sources


def write_tree(sources: Mapping[str, str], dest: Path) -> None:
    """Write a tree's files under dest (which must exist)."""
    for path, text in sources.items():
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def load_candidate(entry_path: Path, package: str) -> ModuleType:
    """Import the entry module as `package.<stem>`, the package rooted at the entry's directory,
    so the candidate's `from .module import name` lines resolve to its own files and every
    loaded candidate gets its own module objects. Exceptions of the candidate propagate."""
    pkg_spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    pkg_spec.submodule_search_locations = [str(entry_path.parent)]
    sys.modules[package] = importlib.util.module_from_spec(pkg_spec)
    name = f"{package}.{entry_path.stem}"
    spec = importlib.util.spec_from_file_location(name, entry_path)
    if spec is None or spec.loader is None:
        raise CandidateTreeError(f"cannot load {entry_path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _relative_imports(tree: ast.Module, path: str) -> list[ast.ImportFrom]:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    for node in found:
        if node not in tree.body or node.level != 1 or not node.module:
            raise CandidateTreeError(
                f"{path}:{node.lineno}: only top-level 'from .MODULE import NAME' imports of the "
                "candidate's own modules can be bundled"
            )
    return found


def _bound_names(tree: ast.Module) -> dict[str, str]:
    """Top-level names a module binds, each with the statement that binds it (for clashes)."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            continue
        targets: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            targets = [node.name]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            targets = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            goals = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [n.id for g in goals for n in ast.walk(g) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.Try | ast.If):
            targets = list(_bound_names(ast.Module(body=node.body, type_ignores=[])))
        for target in targets:
            # Imports of one library are the same binding in every module; definitions are not.
            shared = isinstance(node, ast.Import | ast.ImportFrom | ast.Try)
            names[target] = ast.unparse(node) if shared else f"{id(node)}"
    return names


def _order(deps: dict[str, set[str]], entry: str) -> list[str]:
    """Modules the entry needs, dependencies first; a cycle is an error."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            raise CandidateTreeError(f"import cycle between modules: {' -> '.join(chain)}")
        state[name] = "open"
        for dep in sorted(deps[name]):
            visit(dep, (*chain, dep))
        state[name] = "done"
        order.append(name)

    visit(entry, (entry,))
    return order


def _strip(source: str, tree: ast.Module, drop: list[ast.stmt], keep_doc: bool) -> list[str]:
    lines = source.splitlines()
    doomed: set[int] = set()
    for node in drop:
        doomed.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
    first = tree.body[0] if tree.body else None
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if first is not None and is_doc and not keep_doc:
        doomed.update(range(first.lineno - 1, (first.end_lineno or first.lineno)))
    return [line for i, line in enumerate(lines) if i not in doomed]


def bundle_sources(sources: Mapping[str, str], entry: str) -> str:
    """One standalone module equivalent to the tree: its modules concatenated dependencies
    first, their relative imports removed (aliases kept as assignments). A name bound by two
    modules, an import cycle or another import form is a CandidateTreeError: ship the tree
    as a package then."""
    entry_name = module_name(entry)
    if entry_name is None:
        raise CandidateTreeError(f"entry {entry!r} is not a top-level module of the tree")
    trees = {}
    for path, text in sources.items():
        name = module_name(path)
        if name is None:
            raise CandidateTreeError(f"{path}: only top-level modules can be bundled")
        try:
            trees[name] = parse_python(text, filename=path)
        except SyntaxError as exc:
            raise CandidateTreeError(f"{path}:{exc.lineno}: {exc.msg}") from None
    imports = {name: _relative_imports(tree, f"{name}.py") for name, tree in trees.items()}
    missing = sorted(
        f"{name}.py imports .{node.module}"
        for name, nodes in imports.items()
        for node in nodes
        if node.module not in trees
    )
    if missing:
        raise CandidateTreeError(f"imports of modules the tree does not have: {missing}")
    deps = {name: {str(n.module) for n in nodes} for name, nodes in imports.items()}
    order = _order(deps, entry_name)
    bound: dict[str, tuple[str, str]] = {}
    for name in order:
        for target, statement in _bound_names(trees[name]).items():
            other = bound.get(target)
            if other is not None and other[1] != statement:
                raise CandidateTreeError(
                    f"{target!r} is defined in both {other[0]}.py and {name}.py; rename one to "
                    "bundle the tree into one file"
                )
            bound[target] = (name, statement)
    future = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__"
        for tree in trees.values()
        for n in tree.body
    )
    out: list[str] = []
    entry_tree = trees[entry_name]
    head = entry_tree.body[0] if entry_tree.body else None
    if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant):
        out += sources[entry].splitlines()[head.lineno - 1 : head.end_lineno]
    if future:
        out += ["", "from __future__ import annotations"]
    for name in order:
        tree = trees[name]
        drop: list[ast.stmt] = [
            n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"
        ]
        drop += imports[name]
        body = _strip(sources[f"{name}.py"], tree, drop, keep_doc=False)
        while body and not body[0].strip():
            body.pop(0)
        aliases = [f"{a.asname} = {a.name}" for n in imports[name] for a in n.names if a.asname]
        out += ["", "", BUNDLE_HEADER.format(name=f"{name}.py"), *aliases, *body]
    return "\n".join(out).rstrip() + "\n"
