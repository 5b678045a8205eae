"""The expander's tools: files of its own worktree only, the quick checks, and commit."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import git
from pydantic import BaseModel, Field

from agents.edit_tools import (
    MAX_READ_LINES,
    ToolError,
    apply_patch,
    confined,
    grep,
    list_files,
    read_file,
    str_replace,
    write_file,
)
from agents.llm.conversation import ToolCall, ToolOutcome, ToolSpec

__all__ = ["CandidateChecker", "CheckReport", "ToolError", "WorktreeTools", "confined"]

COMMIT_FORMAT = (
    "a first line naming the change, then lines 'Idea: ...', 'Hypothesis: ...' and "
    "'Predicted effect: ...'"
)


class CheckReport(BaseModel):
    """What the quick checks said about a tree."""

    passed: bool = Field(description="Static checks and quick correctness both passed.")
    text: str = Field(description="Findings and per-config results, for the model to read.")


class CandidateChecker(Protocol):
    """Runs the static checks and the quick CPU correctness check on a tree (the orchestrator
    provides it: agents never import the judge)."""

    def check(self, tree: Path) -> CheckReport:
        """Check the tree as it is now."""


class BenchReport(BaseModel):
    """What a benchmark or profile of a tree said, and the device time it took."""

    text: str = Field(description="The per-config table (or profile) the model reads.")
    device_s: float = Field(ge=0, description="Device seconds spent (the judge's wall time).")


class CandidateBench(Protocol):
    """The real screen and the profiler on the run's device (the orchestrator provides it)."""

    def benchmark(self, tree: Path) -> BenchReport:
        """Correctness and interleaved timing of the tree against parent, frontier, baseline."""

    def profile(self, tree: Path, config_id: str | None) -> BenchReport:
        """The tree's top operators by device time on one config."""


@dataclass
class BenchAccess:
    """A bench and the device seconds one expansion may spend on it."""

    bench: CandidateBench
    budget_s: float
    spent_s: float = 0.0

    def run(self, what: Callable[[], BenchReport]) -> str:
        """Run a bench call if budget is left; count its device time."""
        if self.spent_s >= self.budget_s:
            raise ToolError(
                f"this expansion's benchmark budget of {self.budget_s:.0f} device-seconds is "
                f"spent ({self.spent_s:.0f} s); decide from what you measured and commit"
            )
        report = what()
        self.spent_s += report.device_s
        left = max(0.0, self.budget_s - self.spent_s)
        return f"{report.text}\n[{report.device_s:.1f} device-s; {left:.0f} s of budget left]"


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_STRING = {"type": "string"}
_LINE = {"type": "integer", "minimum": 1}
TOOL_SPECS = [
    ToolSpec(
        name="list_files",
        description="List the files of the candidate tree with their sizes (lines, bytes).",
        parameters=_schema({"path": {"type": "string", "description": "Folder, default '.'"}}, []),
    ),
    ToolSpec(
        name="read_file",
        description=f"Read lines start_line..end_line (1-based, inclusive) of a file, each "
        f"numbered; at most {MAX_READ_LINES} lines per call.",
        parameters=_schema({"path": _STRING, "start_line": _LINE, "end_line": _LINE}, ["path"]),
    ),
    ToolSpec(
        name="grep",
        description="Search the tree's files for a Python regular expression; answers "
        "path:line: text. 'glob' filters file names (default '*.py').",
        parameters=_schema({"pattern": _STRING, "path": _STRING, "glob": _STRING}, ["pattern"]),
    ),
    ToolSpec(
        name="str_replace",
        description="Replace one exact occurrence of old_text (unique in the file, whitespace "
        "included) with new_text. The safest edit: read the lines first.",
        parameters=_schema(
            {"path": _STRING, "old_text": _STRING, "new_text": _STRING},
            ["path", "old_text", "new_text"],
        ),
    ),
    ToolSpec(
        name="apply_patch",
        description="Apply a unified diff (as `git diff` writes it) to one or more files; "
        "all hunks apply or none.",
        parameters=_schema({"patch": _STRING}, ["patch"]),
    ),
    ToolSpec(
        name="write_file",
        description="Create a new file (or replace a whole file) with the given content.",
        parameters=_schema({"path": _STRING, "content": _STRING}, ["path", "content"]),
    ),
    ToolSpec(
        name="run_checks",
        description="Run the static checks and the quick CPU correctness check on the tree as "
        "it is now; required (and passing) before commit.",
        parameters=_schema({}, []),
    ),
    ToolSpec(
        name="note",
        description="Append a lesson to the run's lessons log (shown to every later expansion): "
        "what worked, what failed and why, with numbers. One or two sentences.",
        parameters=_schema({"lesson": _STRING}, ["lesson"]),
    ),
    ToolSpec(
        name="commit",
        description=f"Commit the tree and finish. The message must have {COMMIT_FORMAT}.",
        parameters=_schema({"message": {"type": "string"}}, ["message"]),
    ),
]
BENCH_SPECS = [
    ToolSpec(
        name="benchmark",
        description="Run the real screen of the tree as it is now on the run's device: per "
        "config correctness, ms, x parent, x frontier, x baseline and timing protocol. Costs "
        "device time from this expansion's budget.",
        parameters=_schema({}, []),
    ),
    ToolSpec(
        name="profile",
        description="The tree's top operators/kernels by device self time on one config "
        "(default: the first screening config), on the run's device.",
        parameters=_schema({"config_id": _STRING}, []),
    ),
]
MAX_NOTES = 10
MAX_NOTE_CHARS = 1000


@dataclass
class WorktreeTools:
    """Tool implementations over one worktree; `committed` is set by a successful commit."""

    root: Path
    checker: CandidateChecker
    known_trees: set[str]
    bench: BenchAccess | None = None
    checked_tree: str | None = None
    committed: str | None = None
    message: str = ""
    log: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    wall_s: dict[str, float] = field(default_factory=dict)

    def specs(self) -> list[ToolSpec]:
        """The tools offered to the model (benchmark and profile where a bench exists)."""
        return TOOL_SPECS + (BENCH_SPECS if self.bench is not None else [])

    def call(self, call: ToolCall) -> ToolOutcome:
        """Run one call; errors become error results the model can act on."""
        root = self.root
        handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            "list_files": lambda args: list_files(root, args),
            "read_file": lambda args: read_file(root, args),
            "grep": lambda args: grep(root, args),
            "str_replace": lambda args: str_replace(root, args),
            "apply_patch": lambda args: apply_patch(root, args),
            "write_file": lambda args: write_file(root, args),
            "run_checks": self._checks,
            "note": self._note,
            "commit": self._commit,
        }
        if self.bench is not None:
            handlers["benchmark"] = self._benchmark
            handlers["profile"] = self._profile
        started = time.monotonic()
        try:
            if call.error:
                raise ToolError(f"{call.error}; expected a JSON object matching the schema")
            if call.name not in handlers:
                raise ToolError(f"unknown tool {call.name!r}; the tools are {sorted(handlers)}")
            output = handlers[call.name](call.arguments)
            self.log.append(f"{call.name}: ok")
            return ToolOutcome(call_id=call.call_id, name=call.name, output=output)
        except ToolError as exc:
            self.log.append(f"{call.name}: {exc}")
            return ToolOutcome(call_id=call.call_id, name=call.name, output=str(exc), is_error=True)
        finally:
            spent = time.monotonic() - started
            self.wall_s[call.name] = self.wall_s.get(call.name, 0.0) + spent

    def _repo(self) -> git.Repo:
        return git.Repo(self.root)

    def _tree(self) -> str:
        repo = self._repo()
        repo.git.add("-A")
        return str(repo.git.write_tree())

    def _checks(self, args: dict[str, Any]) -> str:
        report = self.checker.check(self.root)
        self.checked_tree = self._tree() if report.passed else None
        return ("PASSED\n" if report.passed else "FAILED\n") + report.text

    def _benchmark(self, args: dict[str, Any]) -> str:
        assert self.bench is not None
        bench = self.bench.bench
        return self.bench.run(lambda: bench.benchmark(self.root))

    def _profile(self, args: dict[str, Any]) -> str:
        assert self.bench is not None
        config_id = _optional_text(args, "config_id")  # a bad argument costs no budget
        bench = self.bench.bench
        return self.bench.run(lambda: bench.profile(self.root, config_id))

    def _note(self, args: dict[str, Any]) -> str:
        lesson = args.get("lesson")
        if not isinstance(lesson, str) or not lesson.strip():
            raise ToolError(
                "note needs 'lesson': one or two sentences, e.g. 'fp16 attention "
                "failed config 7 by 1 element at input scale 0.5'"
            )
        if len(self.notes) >= MAX_NOTES:
            raise ToolError(f"this expansion already noted {MAX_NOTES} lessons; that is enough")
        self.notes.append(lesson.strip()[:MAX_NOTE_CHARS])
        return "noted; later expansions will see it in the lessons log"

    def _commit(self, args: dict[str, Any]) -> str:
        message = args.get("message")
        if not isinstance(message, str) or not all(
            key in message for key in ("Idea:", "Hypothesis:", "Predicted effect:")
        ):
            raise ToolError(f"the commit message needs {COMMIT_FORMAT}")
        tree = self._tree()
        if tree in self.known_trees:
            raise ToolError("this exact tree is already a candidate of the run; make a change")
        if self.checked_tree != tree:
            raise ToolError("run_checks has not passed on the tree as it is now; run it first")
        repo = self._repo()
        actor = git.Actor("ratchet llm expander", "llm@ratchet.invalid")
        self.committed = repo.index.commit(message, author=actor, committer=actor).hexsha
        self.message = message
        return f"committed {self.committed}"


def _optional_text(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string, e.g. '1', got {value!r}")
    return value
