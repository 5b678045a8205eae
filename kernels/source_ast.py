"""Python source to AST and back, safe to call from several threads at once."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from types import CodeType
from typing import TypeVar

T = TypeVar("T")

# CPython 3.11 keeps the AST converter's recursion counter per interpreter, not per thread
# (gh-106905), so two threads converting trees at once can trip its consistency check with a
# SystemError although both trees are fine. Each conversion starts from a reset counter, so a
# retry is exact; the bug is fixed in later interpreters, where this never fires.
RACE_MESSAGE = "AST constructor recursion depth mismatch"
RACE_ATTEMPTS = 8


def retry_ast_race(convert: Callable[[], T]) -> T:
    """Run one pure AST conversion, again if the interpreter's cross-thread race broke it."""
    for attempt in range(RACE_ATTEMPTS):
        try:
            return convert()
        except SystemError as error:
            if RACE_MESSAGE not in str(error) or attempt == RACE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def parse_python(text: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse, immune to the cross-thread converter race."""
    return retry_ast_race(lambda: ast.parse(text, filename=filename))


# A candidate's blocks (TUNABLES, TUNABLE_SPACE, REGIMES, choose_regime) are read a few dozen
# times per expansion, each read a fresh parse of the same text (~35 ms for track3's seed): the
# offline operator spent most of its time parsing. A handful of texts is enough (a parent, its
# child, and the source being rewritten); trees of a large candidate are megabytes each.
SHARED_TREES = 8


@functools.lru_cache(maxsize=SHARED_TREES)
def parse_shared(text: str) -> ast.Module:
    """parse_python of text, one tree shared by every caller with the same text: read it,
    never change it (a change would show up in every later reader's tree)."""
    return parse_python(text)


def compile_expression(node: ast.expr, filename: str) -> CodeType:
    """Compile one expression node in eval mode, immune to the cross-thread converter race."""
    return retry_ast_race(lambda: compile(ast.Expression(body=node), filename, "eval"))
