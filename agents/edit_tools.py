"""The expander's file tools over its worktree: list, read by lines, grep, exact and patch edits."""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path
from typing import Any

MAX_READ_CHARS = 20_000
MAX_READ_LINES = 400
MAX_WRITE = 200_000
MAX_LISTED = 400
MAX_MATCHES = 100
NEAREST = 3
PATCH_FORMAT = (
    "a unified diff as `git diff` writes it, e.g.\n"
    "--- a/attention.py\n+++ b/attention.py\n@@ -10,3 +10,3 @@\n context\n-old line\n"
    "+new line\n context"
)


class ToolError(ValueError):
    """A tool call the model must correct; the message shows what is expected."""


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


def _text_file(root: Path, path: object) -> tuple[Path, str]:
    target = confined(root, str(path or ""))
    if not target.is_file():
        raise ToolError(f"{path!r} is not a file of the tree; list_files shows them")
    return target, target.read_text(encoding="utf-8", errors="replace")


def _tree_files(root: Path, folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts
    )


def _int_arg(args: dict[str, Any], name: str, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{name} must be a positive line number (1-based), got {value!r}")
    return value


def list_files(root: Path, args: dict[str, Any]) -> str:
    """Files of a folder with their sizes (lines and bytes)."""
    folder = confined(root, str(args.get("path", ".")))
    if not folder.is_dir():
        raise ToolError(f"{args.get('path')!r} is not a folder of the tree")
    rows = []
    for path in _tree_files(root, folder)[:MAX_LISTED]:
        data = path.read_bytes()
        lines = data.count(b"\n")
        rows.append(f"{path.relative_to(root)}  {lines} lines  {len(data)} bytes")
    return "\n".join(rows) or "(empty)"


def read_file(root: Path, args: dict[str, Any]) -> str:
    """Lines start_line..end_line of a file (1-based, inclusive), each with its number."""
    target, text = _text_file(root, args.get("path"))
    lines = text.splitlines()
    start = _int_arg(args, "start_line", 1) or 1
    end = _int_arg(args, "end_line", None) or len(lines)
    if start > max(len(lines), 1):
        raise ToolError(f"start_line {start} is past the end: {target.name} has {len(lines)} lines")
    end = min(end, len(lines), start + MAX_READ_LINES - 1)
    out, size = [], 0
    for number in range(start, end + 1):
        row = f"{number:5d}| {lines[number - 1]}"
        if size + len(row) > MAX_READ_CHARS:
            end = number - 1
            break
        out.append(row)
        size += len(row) + 1
    if end < len(lines):
        out.append(f"[lines {start}-{end} of {len(lines)}; read on with start_line={end + 1}]")
    return "\n".join(out) or "(empty file)"


def grep(root: Path, args: dict[str, Any]) -> str:
    """Lines matching a regular expression, as path:line: text."""
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("grep needs 'pattern', a Python regular expression, e.g. 'def forward'")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    folder = confined(root, str(args.get("path", ".")))
    files = [folder] if folder.is_file() else _tree_files(root, folder)
    glob = str(args.get("glob", "*.py"))
    hits: list[str] = []
    for path in files:
        if folder.is_dir() and not path.match(glob):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()[:200]}")
    if len(hits) > MAX_MATCHES:
        return "\n".join([*hits[:MAX_MATCHES], f"[{len(hits) - MAX_MATCHES} more matches]"])
    return "\n".join(hits) or f"no line matches {pattern!r}"


def write_file(root: Path, args: dict[str, Any]) -> str:
    """Create a file, or replace one whole (for edits, str_replace and apply_patch are safer)."""
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("write_file needs 'content' as a string")
    if len(content) > MAX_WRITE:
        raise ToolError(f"content is {len(content)} characters; the limit is {MAX_WRITE}")
    target = confined(root, str(args.get("path", "")))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return f"wrote {target.relative_to(root)} ({len(content)} characters)"


def _nearest(text: str, old: str) -> str:
    """The lines of the file closest to the first line of `old`, numbered."""
    lines = text.splitlines()
    probe = next((line.strip() for line in old.splitlines() if line.strip()), "")
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(probe, stripped, n=NEAREST, cutoff=0.5)
    rows = []
    for candidate in close:
        number = stripped.index(candidate) + 1
        rows.append(f"{number:5d}| {lines[number - 1]}")
    return "\n".join(rows) or "(no similar line)"


def str_replace(root: Path, args: dict[str, Any]) -> str:
    """Replace one exact, unique occurrence of old_text with new_text."""
    old, new = args.get("old_text"), args.get("new_text")
    if not isinstance(old, str) or not old or not isinstance(new, str):
        raise ToolError("str_replace needs 'old_text' (non-empty, exact) and 'new_text' strings")
    target, text = _text_file(root, args.get("path"))
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {target.relative_to(root)} (it must match exactly, "
            f"whitespace included); the nearest lines are:\n{_nearest(text, old)}"
        )
    if count > 1:
        starts = [m.start() for m in re.finditer(re.escape(old), text)]
        numbers = [text.count("\n", 0, s) + 1 for s in starts]
        raise ToolError(
            f"old_text matches {count} places in {target.relative_to(root)} (lines "
            f"{', '.join(map(str, numbers))}); include more surrounding lines to make it unique"
        )
    first = text.count("\n", 0, text.index(old)) + 1
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    last = first + new.rstrip("\n").count("\n")
    where = f"line {first}" if last == first else f"lines {first}-{last}"
    return f"replaced in {target.relative_to(root)}: now {where}"


def _patched_paths(patch: str) -> list[str]:
    paths = []
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0].strip()
            if name != "/dev/null":
                paths.append(name[2:] if name[:2] in ("a/", "b/") else name)
    return paths


def apply_patch(root: Path, args: dict[str, Any]) -> str:
    """Apply a unified diff with `git apply` (checked whole first: all hunks or none)."""
    patch = args.get("patch")
    if not isinstance(patch, str) or not patch.strip():
        raise ToolError(f"apply_patch needs 'patch': {PATCH_FORMAT}")
    paths = _patched_paths(patch)
    if not paths:
        raise ToolError(f"the patch names no file (no ---/+++ lines); expected {PATCH_FORMAT}")
    for path in paths:
        confined(root, path)
    strip = "-p1" if any(line.startswith("+++ b/") for line in patch.splitlines()) else "-p0"
    patch = patch if patch.endswith("\n") else patch + "\n"
    for check in (True, False):
        command = ["git", "apply", strip, "--recount", "--whitespace=nowarn"]
        done = subprocess.run(
            command + (["--check"] if check else []) + ["-"],
            cwd=root,
            input=patch,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            reason = done.stderr.strip()[-1500:] or "git apply refused it"
            raise ToolError(
                f"the patch does not apply (nothing was changed): {reason}\n"
                f"Re-read the lines with read_file and send {PATCH_FORMAT}"
            )
    return f"patched {', '.join(sorted(set(paths)))}"
