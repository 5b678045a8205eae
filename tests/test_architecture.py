"""Dependencies point one way (product.md): an AST walk of every module's imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = {"orchestrator", "agents", "search", "harness", "kernels", "ledger", "prompts", "workers"}
ALLOWED = {
    "orchestrator": {"search", "agents", "harness", "ledger", "kernels", "prompts", "workers"},
    # Workers on other hosts: they judge and expand, they never decide or write the ledger.
    "workers": {"harness", "agents", "kernels"},
    "agents": {"ledger", "kernels", "prompts"},
    "search": set(),
    "harness": {"kernels"},
    "ledger": set(),
    "kernels": set(),
    "prompts": set(),
}
# search is pure: records in, decisions out; nothing that reads clocks, files or devices.
SEARCH_MAY_IMPORT = {"__future__", "collections", "enum", "math", "numpy", "pydantic", "typing"}
SEARCH_MAY_IMPORT |= {"dataclasses", "functools", "itertools", "operator", "statistics"}
# alembic: the ledger's schema migrations (ledger/migrations), run by the ledger itself;
# psycopg: its PostgreSQL driver, whose pipeline mode makes an append two round trips.
THIRD_PARTY_BY_PACKAGE = {
    "ledger": {"sqlalchemy", "pydantic", "alembic", "psycopg"},
    "search": {"numpy", "pydantic"},
}


def imported_roots(source: str) -> set[str]:
    """Top-level names of every module a source imports (relative imports excluded)."""
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def violations(package: str, source: str) -> set[str]:
    """What a module of `package` imports that the architecture forbids."""
    roots = imported_roots(source)
    bad = {r for r in roots & OURS if r != package and r not in ALLOWED[package]}
    if package == "search":
        bad |= roots - SEARCH_MAY_IMPORT - {"search"}
    if package in THIRD_PARTY_BY_PACKAGE:
        third_party = roots - set(sys.stdlib_module_names) - OURS
        bad |= third_party - THIRD_PARTY_BY_PACKAGE[package]
    return bad


def test_every_module_respects_the_arrows() -> None:
    problems = {}
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            bad = violations(package, path.read_text())
            if bad:
                problems[str(path.relative_to(ROOT))] = sorted(bad)
    assert not problems, f"forbidden imports: {problems}"


def test_the_check_can_fail() -> None:
    assert violations("harness", "from ledger import Ledger") == {"ledger"}
    assert violations("harness", "import agents.offline") == {"agents"}
    assert violations("search", "import torch") == {"torch"}
    assert violations("search", "import os") == {"os"}
    assert violations("ledger", "import numpy") == {"numpy"}
    assert violations("ledger", "from orchestrator import cli") == {"orchestrator"}
    assert violations("orchestrator", "import harness, search, ledger") == set()


# The dashboard is a room of its own: only the CLI enters it (so no module of the service
# comes to depend on FastAPI, and the dashboard can be dropped or replaced alone).
DASHBOARD = "orchestrator.dashboard"
DASHBOARD_MAY_BE_IMPORTED_BY = {"orchestrator/cli.py"}


def imports_dashboard(source: str) -> bool:
    """Whether a source imports orchestrator.dashboard or anything in it."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        if any(name == DASHBOARD or name.startswith(DASHBOARD + ".") for name in names):
            return True
    return False


def dashboard_importers(root: Path, paths: list[Path]) -> list[str]:
    """Modules outside the dashboard, other than the CLI, that import it."""
    found = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        inside = relative.startswith(DASHBOARD.replace(".", "/") + "/")
        allowed = inside or relative in DASHBOARD_MAY_BE_IMPORTED_BY
        if not allowed and imports_dashboard(path.read_text()):
            found.append(relative)
    return found


def test_only_the_cli_imports_the_dashboard() -> None:
    paths = [path for package in OURS for path in (ROOT / package).rglob("*.py")]
    assert (ROOT / "orchestrator" / "dashboard" / "app.py") in paths
    assert not dashboard_importers(ROOT, paths), dashboard_importers(ROOT, paths)


def test_the_dashboard_check_can_fail(tmp_path: Path) -> None:
    assert imports_dashboard("from orchestrator import dashboard")
    assert imports_dashboard("import orchestrator.dashboard.app")
    assert imports_dashboard("def f():\n    from orchestrator.dashboard.settings import X")
    assert not imports_dashboard("from orchestrator import service, status")
    assert not imports_dashboard("import orchestrator.dashboards_elsewhere")
    files = {
        "orchestrator/service.py": "from orchestrator.dashboard import serve\n",
        "orchestrator/cli.py": "from orchestrator import dashboard\n",
        "orchestrator/dashboard/app.py": "from orchestrator.dashboard.settings import X\n",
        "agents/x.py": "import orchestrator.dashboard\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = dashboard_importers(tmp_path, [tmp_path / name for name in files])
    assert found == ["orchestrator/service.py", "agents/x.py"]


def test_search_and_the_cli_light_commands_do_not_import_torch() -> None:
    import subprocess

    code = (
        "import sys, search, ledger, orchestrator.cli, orchestrator.status;"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def ray_importers(root: Path, paths: list[Path]) -> list[str]:
    """Modules outside workers/ that import Ray (it stays in its room: a host without Ray
    runs everything else, and no judge's process ever loads it)."""
    found = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        if not relative.startswith("workers/") and "ray" in imported_roots(path.read_text()):
            found.append(relative)
    return found


def test_only_the_workers_import_ray() -> None:
    paths = [path for package in OURS for path in (ROOT / package).rglob("*.py")]
    assert (ROOT / "workers" / "ray_cluster.py") in paths
    assert not ray_importers(ROOT, paths), ray_importers(ROOT, paths)


def test_the_ray_check_can_fail(tmp_path: Path) -> None:
    files = {
        "harness/x.py": "def f():\n    import ray\n",
        "orchestrator/y.py": "from ray import get\n",
        "workers/z.py": "import ray\n",
        "orchestrator/fine.py": "import array\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = ray_importers(tmp_path, [tmp_path / name for name in files])
    assert found == ["harness/x.py", "orchestrator/y.py"]


def test_a_sqlite_ledger_needs_no_postgresql_driver(tmp_path: Path) -> None:
    # GPU hosts may carry torch and little else: the embedded ledger must not import psycopg.
    import subprocess

    code = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def guard(name, *args, **kwargs):\n"
        "    if name.split('.')[0] == 'psycopg':\n"
        "        raise ImportError('psycopg is not installed here')\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = guard\n"
        "from ledger import EventRecord, Ledger\n"
        "import orchestrator.cli\n"
        f"with Ledger.open_path({str(tmp_path / 'l.sqlite')!r}) as ledger:\n"
        "    ledger.append(EventRecord(kind='probe', payload={}))\n"
        "assert 'psycopg' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
