"""The expander's tools: files of its own worktree only, the quick checks, and commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import git
from pydantic import BaseModel, Field

from agents.llm.conversation import ToolCall, ToolOutcome, ToolSpec

MAX_READ = 20_000
MAX_WRITE = 200_000
MAX_LISTED = 400
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


class ToolError(ValueError):
    """A tool call the model must correct; the message shows what is expected."""


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOL_SPECS = [
    ToolSpec(
        name="list_files",
        description="List the files of the candidate tree (relative paths).",
        parameters=_schema({"path": {"type": "string", "description": "Folder, default '.'"}}, []),
    ),
    ToolSpec(
        name="read_file",
        description=f"Read a text file of the tree (at most {MAX_READ} characters from offset).",
        parameters=_schema(
            {"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 0}}, ["path"]
        ),
    ),
    ToolSpec(
        name="write_file",
        description="Create or replace a text file of the tree with the given content.",
        parameters=_schema(
            {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]
        ),
    ),
    ToolSpec(
        name="run_checks",
        description="Run the static checks and the quick CPU correctness check on the tree as "
        "it is now; required (and passing) before commit.",
        parameters=_schema({}, []),
    ),
    ToolSpec(
        name="commit",
        description=f"Commit the tree and finish. The message must have {COMMIT_FORMAT}.",
        parameters=_schema({"message": {"type": "string"}}, ["message"]),
    ),
]


def confined(root: Path, path: str) -> Path:
    """A path inside the worktree, never .git, never outside (symlinks included)."""
    if not isinstance(path, str) or not path or path.startswith(("/", "~")):
        raise ToolError(
            f"path {path!r} must be relative to the candidate tree, e.g. 'candidate.py'"
        )
    target = (root / path).resolve()
    base = root.resolve()
    if target != base and base not in target.parents:
        raise ToolError(f"path {path!r} leaves the candidate tree; use paths inside it")
    if ".git" in target.relative_to(base).parts:
        raise ToolError(f"path {path!r} is inside .git, which the tools do not touch")
    return target


@dataclass
class WorktreeTools:
    """Tool implementations over one worktree; `committed` is set by a successful commit."""

    root: Path
    checker: CandidateChecker
    known_trees: set[str]
    checked_tree: str | None = None
    committed: str | None = None
    message: str = ""
    log: list[str] = field(default_factory=list)

    def specs(self) -> list[ToolSpec]:
        """The tools offered to the model."""
        return TOOL_SPECS

    def call(self, call: ToolCall) -> ToolOutcome:
        """Run one call; errors become error results the model can act on."""
        handlers = {
            "list_files": self._list,
            "read_file": self._read,
            "write_file": self._write,
            "run_checks": self._checks,
            "commit": self._commit,
        }
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

    def _repo(self) -> git.Repo:
        return git.Repo(self.root)

    def _tree(self) -> str:
        repo = self._repo()
        repo.git.add("-A")
        return str(repo.git.write_tree())

    def _list(self, args: dict[str, Any]) -> str:
        folder = confined(self.root, str(args.get("path", ".")))
        if not folder.is_dir():
            raise ToolError(f"{args.get('path')!r} is not a folder of the tree")
        files = sorted(
            str(p.relative_to(self.root))
            for p in folder.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(self.root).parts
        )
        return "\n".join(files[:MAX_LISTED]) or "(empty)"

    def _read(self, args: dict[str, Any]) -> str:
        target = confined(self.root, str(args.get("path", "")))
        if not target.is_file():
            raise ToolError(
                f"{args.get('path')!r} is not a file of the tree; list_files shows them"
            )
        offset = int(args.get("offset", 0) or 0)
        text = target.read_text(encoding="utf-8", errors="replace")
        chunk = text[offset : offset + MAX_READ]
        more = (
            f"\n[... {len(text) - offset - len(chunk)} more characters]"
            if offset + MAX_READ < len(text)
            else ""
        )
        return chunk + more

    def _write(self, args: dict[str, Any]) -> str:
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("write_file needs 'content' as a string")
        if len(content) > MAX_WRITE:
            raise ToolError(f"content is {len(content)} characters; the limit is {MAX_WRITE}")
        target = confined(self.root, str(args.get("path", "")))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {target.relative_to(self.root)} ({len(content)} characters)"

    def _checks(self, args: dict[str, Any]) -> str:
        report = self.checker.check(self.root)
        self.checked_tree = self._tree() if report.passed else None
        return ("PASSED\n" if report.passed else "FAILED\n") + report.text

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
