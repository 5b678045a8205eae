"""Static checks fire on each forbidden construct and pass the shipped seed candidates."""

from __future__ import annotations

import pytest

from harness.static_checks import (
    Constraint,
    FileFindingsCache,
    Rule,
    check_sources,
    parse_constraint,
)
from kernels.registry import resolve_workload

TRACK3 = resolve_workload("track3")
POLICY = TRACK3.static_policy

GOOD = """
import torch
from torch import nn

class OptimizedTransformer(nn.Module):
    def forward(self, x, valid_token_mask=None):
        if x.dim() == 3 and x.shape[1] <= 256:
            return x
        return x
"""


def rules(source: str, constraints: list[str] | None = None) -> set[Rule]:
    parsed = [parse_constraint(c) for c in constraints or []]
    report = check_sources({"candidate.py": source}, POLICY, "candidate.py", parsed)
    return {f.rule for f in report.findings}


def test_shipped_seed_candidates_pass() -> None:
    for name in ("track3", "softmax"):
        workload = resolve_workload(name)
        sources = workload.seed_sources()
        report = check_sources(sources, workload.static_policy, "candidate.py", [])
        assert report.passed, report.summary()


def test_good_source_passes_and_thresholds_are_allowed() -> None:
    assert rules(GOOD) == set()


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("import os", Rule.FORBIDDEN_IMPORT),
        ("from subprocess import run", Rule.FORBIDDEN_IMPORT),
        ("from kernels.track3 import Transformer", Rule.FORBIDDEN_IMPORT),
        ("x = open('/tmp/f')", Rule.FORBIDDEN_CALL),
        ("y = eval('1')", Rule.FORBIDDEN_CALL),
        ("def f(b):\n    return 1 if b == 10000 else 2", Rule.SHAPE_SPECIAL_CASE),
        ("def f(s):\n    if s in (128, 1024):\n        return 1", Rule.SHAPE_SPECIAL_CASE),
        ("def f(d):\n    assert d != 100000", Rule.SHAPE_SPECIAL_CASE),
        ("def broken(:", Rule.SYNTAX),
    ],
)
def test_each_rule_fires(snippet: str, rule: Rule) -> None:
    assert rule in rules(GOOD + "\n" + snippet + "\n")


def test_missing_entry_point() -> None:
    assert Rule.MISSING_ENTRY_POINT in rules("import torch\n")


def test_constraints_become_checks() -> None:
    source = GOOD + "\ny = torch.compile\n"
    assert Rule.CONSTRAINT in rules(source, ["forbid torch.compile"])
    assert Rule.CONSTRAINT not in rules(GOOD, ["forbid torch.compile"])
    seed = TRACK3.seed_bundle()
    assert Rule.CONSTRAINT in rules(seed, ["forbid matmul_precision=fp32"])
    assert Rule.CONSTRAINT not in rules(seed, ["forbid matmul_precision=bf16"])


def test_tunables_must_stay_in_their_space() -> None:
    seed = TRACK3.seed_bundle().replace('"attention": "explicit"', '"attention": "magic"')
    assert Rule.TUNABLE_OUT_OF_SPACE in rules(seed)


@pytest.mark.parametrize(
    "text", ["no bf16 please", "forbid", "forbid =x", "forbid a=", "forbid 9x"]
)
def test_unparseable_constraints_show_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected|not a"):
        parse_constraint(text)


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("p = torch.sys.argv", Rule.FORBIDDEN_ATTRIBUTE),
        ("torch.os._exit(0)", Rule.FORBIDDEN_ATTRIBUTE),
        ("b = __builtins__", Rule.FORBIDDEN_ATTRIBUTE),
        ("def f():\n    return f.__globals__", Rule.FORBIDDEN_ATTRIBUTE),
        ("torch.cuda.Event.elapsed_time = None", Rule.MONKEYPATCH),
        ("torch.backends.cuda.matmul.allow_tf32 = False", Rule.MONKEYPATCH),
        ("setattr(torch, 'matmul', None)", Rule.MONKEYPATCH),
        ("del torch.nn", Rule.MONKEYPATCH),
        # Dynamic attribute names reach what the plain form reaches.
        ("o = getattr(torch, 'o' + 's')", Rule.FORBIDDEN_ATTRIBUTE),
        ("n = 'os'\no = getattr(torch, n)", Rule.FORBIDDEN_ATTRIBUTE),
        ("def f(m, n):\n    return getattr(m, n)", Rule.FORBIDDEN_ATTRIBUTE),
        ("for n in ('sys', 'x'):\n    getattr(torch, n)", Rule.FORBIDDEN_ATTRIBUTE),
        ("import operator\no = operator.attrgetter('o' + 's')(torch)", Rule.FORBIDDEN_ATTRIBUTE),
        ("import operator\no = operator.attrgetter(str(1))(torch)", Rule.FORBIDDEN_ATTRIBUTE),
        # Threads, processes and the interpreter through attributes of allowed modules.
        ("torch.cuda.threading.Thread(target=print).start()", Rule.FORBIDDEN_ATTRIBUTE),
        ("p = torch.multiprocessing.Process", Rule.FORBIDDEN_ATTRIBUTE),
        ("import collections\ns = collections._sys", Rule.FORBIDDEN_ATTRIBUTE),
        ("d = torch.__dict__", Rule.FORBIDDEN_ATTRIBUTE),
    ],
)
def test_escapes_and_monkeypatches_are_refused(snippet: str, rule: Rule) -> None:
    assert rule in rules(GOOD + "\n" + snippet + "\n")


@pytest.mark.parametrize(
    "snippet",
    [
        "w = getattr(torch, 'float16')",
        "for n in ('_weights', '_fused'):\n    getattr(nn, n, None)",
        "ok = hasattr(torch, 'compile')",
        "import functools, itertools, dataclasses, enum, contextlib, collections, operator",
        "import warnings\nfrom collections import OrderedDict\nfrom functools import lru_cache",
    ],
)
def test_literal_attribute_names_and_the_harmless_standard_library_pass(snippet: str) -> None:
    assert rules(GOOD + "\n" + snippet + "\n") == set()


@pytest.mark.parametrize(
    "module", ["os", "sys", "threading", "subprocess", "socket", "ctypes", "importlib", "io"]
)
def test_modules_that_reach_the_process_stay_refused(module: str) -> None:
    assert rules(f"import {module}\n" + GOOD) == {Rule.FORBIDDEN_IMPORT}


def test_attributes_of_our_own_objects_may_be_set() -> None:
    source = GOOD + "\nclass M:\n    def set(self):\n        self.weights = 1\n"
    assert rules(source) == set()


@pytest.mark.parametrize(
    ("line", "allowed"),
    [
        ("from .helpers import scale", True),
        ("from .helpers import scale as s", True),
        ("from . import helpers", False),
        ("from ..helpers import scale", False),
        ("from .nosuch import scale", False),
        ("import helpers", False),
    ],
)
def test_a_package_imports_its_own_modules_in_one_form(line: str, allowed: bool) -> None:
    sources = {"candidate.py": f"{line}\n{GOOD}", "helpers.py": "import math\nscale = 2.0\n"}
    report = check_sources(sources, POLICY, "candidate.py", [])
    assert report.passed is allowed, report.summary()
    if not allowed:
        assert {f.rule for f in report.findings} == {Rule.FORBIDDEN_IMPORT}
        assert "import NAME'" in report.summary()  # the message shows the allowed form


def test_every_module_of_a_package_is_checked() -> None:
    sources = {"candidate.py": f"from .helpers import scale\n{GOOD}", "helpers.py": "import os\n"}
    report = check_sources(sources, POLICY, "candidate.py", [])
    assert [(f.file, f.rule) for f in report.findings] == [("helpers.py", Rule.FORBIDDEN_IMPORT)]


def test_a_tunable_finding_names_the_line_of_tunables() -> None:
    source = GOOD + "\nTUNABLE_SPACE = {'a': {'values': [1, 2]}}\nTUNABLES = {'a': 3}\n"
    report = check_sources({"candidate.py": source}, POLICY, "candidate.py", [])
    [finding] = report.findings
    assert finding.rule is Rule.TUNABLE_OUT_OF_SPACE
    assert finding.line == source.splitlines().index("TUNABLES = {'a': 3}") + 1


def test_the_findings_cache_answers_as_a_fresh_check_does() -> None:
    """Cached findings equal a fresh check's, and whatever a file's findings depend on (its
    text, the constraints, its sibling modules, being the entry file) misses the cache."""
    cache = FileFindingsCache()
    seed = TRACK3.seed_sources()
    forbid = [parse_constraint("forbid matmul_precision=fp32")]

    def both(sources: dict[str, str], constraints: list[Constraint]) -> set[tuple[str, str]]:
        fresh = check_sources(sources, POLICY, "candidate.py", constraints)
        cached = check_sources(sources, POLICY, "candidate.py", constraints, cache)
        assert cached.findings == fresh.findings
        return {(f.rule.value, f.file) for f in cached.findings}

    assert both(seed, []) == set()
    assert len(cache) == len(seed)
    assert both(seed, []) == set()
    assert len(cache) == len(seed), "the same files again are answered from the cache"
    assert ("constraint", "candidate.py") in both(seed, forbid)
    assert len(cache) == 2 * len(seed), "other constraints: every file checked anew"
    changed = {**seed, "attention.py": seed["attention.py"] + "\nimport os\n"}
    assert ("forbidden_import", "attention.py") in both(changed, [])
    assert len(cache) == 2 * len(seed) + 1, "one file's new text: only that file checked"
    assert both(seed, []) == set()
    # The entry file's own check: the same text under another name is not the entry.
    moved = {"other.py": seed["candidate.py"], "candidate.py": "import torch\n"}
    assert ("missing_entry_point", "candidate.py") in both(moved, [])
