"""The AST helpers retry exactly the interpreter's cross-thread converter race, nothing else."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernels.source_ast import (
    RACE_ATTEMPTS,
    RACE_MESSAGE,
    compile_expression,
    parse_python,
    parse_shared,
    retry_ast_race,
)


def test_a_race_is_retried_until_the_conversion_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise SystemError(f"{RACE_MESSAGE} (before=7, after=9)")
        return "tree"

    assert retry_ast_race(flaky) == "tree"
    assert len(calls) == 3


def test_a_race_that_never_clears_still_raises() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise SystemError(RACE_MESSAGE)

    with pytest.raises(SystemError, match="recursion depth mismatch"):
        retry_ast_race(always)
    assert len(calls) == RACE_ATTEMPTS


def test_other_errors_are_not_retried() -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise SystemError("something else entirely")

    with pytest.raises(SystemError, match="something else"):
        retry_ast_race(broken)
    assert len(calls) == 1
    with pytest.raises(SyntaxError):
        parse_python("def (:", filename="bad.py")


def test_helpers_match_the_builtins_under_threads() -> None:
    source = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]" for i in range(200))
    expected = ast.dump(ast.parse(source))
    node = ast.parse("a * 2 + 1", mode="eval").body

    def both(_: int) -> tuple[str, object]:
        return ast.dump(parse_python(source)), eval(compile_expression(node, "<t>"), {"a": 4})

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(both, range(40)))
    assert results == [(expected, 9)] * 40


def test_a_shared_parse_is_the_parse_and_is_made_once_per_text() -> None:
    source = "TUNABLES = {'a': '1'}\n"
    tree = parse_shared(source)
    assert ast.dump(tree) == ast.dump(ast.parse(source))
    assert parse_shared(source) is tree  # the readers share it: none of them may change it
    assert parse_shared(source + "B = 2\n") is not tree
    with pytest.raises(SyntaxError):  # an error is raised every time, never remembered as a tree
        parse_shared("def (:")
    with pytest.raises(SyntaxError):
        parse_shared("def (:")
