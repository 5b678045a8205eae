"""The head journal: an append-only file beside the database naming every committed head.

One JSON line per committed batch, `{"hash":"<64 hex>","seq":N}`, written with O_APPEND and
fsync'd after the database commit. A crash can therefore leave the journal behind the
database, never ahead of it: a journal head the database does not hold (or holds with another
hash) is a truncation or a rewrite. Lines from concurrent writers may land out of seq order;
each line is checked on its own.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ledger.errors import JournalError

HASH_PATTERN: Final = r"^[0-9a-f]{64}$"


class HeadLine(BaseModel):
    """One journal line: the head of the chain right after a commit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(ge=1, description="Seq of the last entry the commit added.")
    hash: str = Field(pattern=HASH_PATTERN, description="Chain hash of that entry.")


class JournalRead(NamedTuple):
    """What reading the journal from some byte offset found."""

    claims: dict[int, str]  # seq -> hash the journal says the chain holds there
    end_offset: int  # byte offset just past the last complete line read
    lines: int  # complete, well-formed lines read
    skipped: int  # complete lines that were not well-formed (a write torn by a crash)
    conflict: tuple[int, str, str] | None  # a seq named twice with two hashes: (seq, a, b)


def append_head(path: Path, seq: int, head_hash: str) -> None:
    """Append one head line and fsync it; call only after the database commit returned."""
    line = HeadLine(seq=seq, hash=head_hash).model_dump_json() + "\n"
    created = not path.exists()
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            # A line torn by a crash has no newline: start on a line of our own.
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            os.write(fd, line.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_directory(path.parent)
    except OSError as exc:
        raise JournalError(
            f"entries up to seq {seq} were committed, but the head journal {path} could not be "
            f"written ({exc.strerror or exc}); fix the file's permissions or free disk space. "
            "The chain is intact; the journal only lags behind it"
        ) from exc


def _fsync_directory(directory: Path) -> None:
    # The new file's name must survive a crash as well as its content.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_heads(path: Path, offset: int = 0) -> JournalRead | None:
    """Every complete line from byte offset on; None when the journal does not exist."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return None
    complete = data[: data.rfind(b"\n") + 1]  # a last line without newline is still being written
    claims: dict[int, str] = {}
    lines = skipped = 0
    conflict: tuple[int, str, str] | None = None
    for raw in complete.splitlines():
        if not raw.strip():
            continue
        try:
            head = HeadLine.model_validate_json(raw)
        except ValidationError:
            skipped += 1
            continue
        lines += 1
        known = claims.setdefault(head.seq, head.hash)
        if known != head.hash and conflict is None:
            conflict = (head.seq, known, head.hash)
    return JournalRead(claims, offset + len(complete), lines, skipped, conflict)


def journal_size(path: Path) -> int | None:
    """Size of the journal in bytes; None when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
