"""Anchors of the chain outside the database: where they live, the last verified head, a head
expected by the caller, and the comparison of a walk along the chain with all of them."""

from __future__ import annotations

import contextlib
import enum
import os
import tempfile
from pathlib import Path
from typing import Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ledger.journal import HASH_PATTERN
from ledger.records import ProblemKind

JOURNAL_SUFFIX: Final = ".heads"
CHECKPOINT_SUFFIX: Final = ".verified"


class JournalPolicy(enum.Enum):
    """Where the head journal goes when no path is given for it."""

    BESIDE = "beside"  # <database file>.heads, for a file-backed SQLite ledger
    OFF = "off"  # none: the chain has no anchor outside the database


class AnchorFiles(NamedTuple):
    """The head journal and the last-verified-head checkpoint of one ledger."""

    journal: Path
    checkpoint: Path

    @classmethod
    def beside(cls, database: Path) -> AnchorFiles:
        """ledger.sqlite -> ledger.sqlite.heads and ledger.sqlite.verified."""
        return cls(
            database.with_name(database.name + JOURNAL_SUFFIX),
            database.with_name(database.name + CHECKPOINT_SUFFIX),
        )

    @classmethod
    def at(cls, journal: Path) -> AnchorFiles:
        """A journal at an explicit path, its checkpoint beside it."""
        return cls(journal, journal.with_name(journal.name + CHECKPOINT_SUFFIX))


class Anchoring(NamedTuple):
    """The anchor files of a ledger, or why it has none."""

    files: AnchorFiles | None
    note: str | None  # set when files is None: what the chain then cannot prove


def resolve_anchoring(database: Path | None, choice: Path | JournalPolicy) -> Anchoring:
    """The anchor files for a ledger whose SQLite file is `database` (None: not a file)."""
    if isinstance(choice, Path):
        return Anchoring(AnchorFiles.at(choice), None)
    if choice is JournalPolicy.BESIDE and database is not None:
        return Anchoring(AnchorFiles.beside(database), None)
    why = (
        "the head journal is turned off"
        if choice is JournalPolicy.OFF
        else "the database is not a local SQLite file, so no head journal sits beside it "
        "(pass a journal path to keep one)"
    )
    return Anchoring(
        None,
        f"no head journal: {why}; the chain then proves only that the database agrees with "
        "itself, and deleting its last entries or rewriting one with its later hashes "
        "recomputed goes unnoticed unless a head recorded elsewhere is checked against it",
    )


class ExpectedHead(BaseModel):
    """A head recorded outside the ledger that its chain must still hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int | None = Field(ge=1, description="Its position in the chain; None: anywhere.")
    hash: str = Field(pattern=HASH_PATTERN, description="Chain hash of that entry.")

    @classmethod
    def parse(cls, text: str) -> ExpectedHead:
        """'SEQ:HASH' or 'HASH' (64 lowercase hex digits), as status and manifests print it."""
        seq_text, _, hash_text = text.strip().rpartition(":")
        hash_text = hash_text.lower()
        try:
            seq = int(seq_text) if seq_text else None
            return cls(seq=seq, hash=hash_text)
        except (ValueError, ValidationError):
            raise ValueError(
                f"expected head {text!r} is not SEQ:HASH or HASH (a positive entry number and "
                "the 64 hex digits of its hash, e.g. as `status` or an export manifest prints "
                "it)"
            ) from None

    def __str__(self) -> str:
        return self.hash if self.seq is None else f"{self.seq}:{self.hash}"


class VerifiedHead(BaseModel):
    """The checkpoint: how far the chain and the journal were last found good."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(ge=0, description="Seq of the last entry verified (0: none).")
    hash: str = Field(description="Its chain hash, which must never change.")
    journal_offset: int = Field(ge=0, description="Bytes of the head journal compared so far.")
    verified_at: str = Field(description="When it was verified (ISO-8601, UTC).")


def load_checkpoint(path: Path) -> VerifiedHead | None:
    """The last verified head; None when there is none or it is unreadable (a cache: the
    check then starts from the first entry)."""
    try:
        return VerifiedHead.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def save_checkpoint(path: Path, head: VerifiedHead) -> None:
    """Replace the checkpoint atomically; best effort (a read-only directory keeps the old)."""
    with contextlib.suppress(OSError):
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(head.model_dump_json())
            os.replace(temporary, path)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            raise


class Problem(NamedTuple):
    """First problem found: the seq it concerns (None if no entry), a message, its kind."""

    seq: int | None
    text: str
    kind: ProblemKind


class Claim(NamedTuple):
    """A hash recorded outside the database for one seq, and who recorded it."""

    hash: str
    source: str  # e.g. "the head journal"


class AnchorCheck:
    """Compares the entries a walk passes with the heads recorded outside the database."""

    def __init__(self, claims: dict[int, Claim], expect: ExpectedHead | None) -> None:
        self._claims = claims
        self._expect = expect
        self._found = expect is None
        self._last_match = 0
        self.compared = 0

    def see(self, seq: int, entry_hash: str) -> Problem | None:
        """Check one entry, in seq order, against what was recorded for its seq."""
        claim = self._claims.get(seq)
        if claim is not None:
            self.compared += 1
            if claim.hash != entry_hash:
                since = f"after entry {self._last_match} and " if self._last_match else ""
                text = (
                    f"entry {seq} has hash {entry_hash}, but {claim.source} recorded "
                    f"{claim.hash} for it: the chain was rewritten {since}at or before entry "
                    f"{seq} (its later hashes recomputed)"
                )
                return Problem(seq, text, ProblemKind.REWRITTEN)
            self._last_match = seq
        expect = self._expect
        if expect is None or self._found:
            return None
        if expect.seq is None:
            self._found = entry_hash == expect.hash
        elif expect.seq == seq:
            if entry_hash != expect.hash:
                text = (
                    f"entry {seq} has hash {entry_hash}, not the expected {expect.hash}: the "
                    f"chain was rewritten at or before entry {seq}, or this is not the ledger "
                    "that head was taken from"
                )
                return Problem(seq, text, ProblemKind.EXPECTED_HEAD)
            self._found = True
        return None

    def finish(self, head_seq: int) -> Problem | None:
        """After a walk that reached the end of the chain at head_seq without a problem."""
        beyond = [seq for seq in self._claims if seq > head_seq]
        if beyond:
            last = max(beyond)
            claim = self._claims[last]
            text = (
                f"the ledger ends at entry {head_seq}, but {claim.source} recorded entry "
                f"{last} (hash {claim.hash}): entries {head_seq + 1} to {last} at least were "
                "deleted"
            )
            return Problem(head_seq + 1, text, ProblemKind.TRUNCATED)
        if self._found or self._expect is None:
            return None
        expect = self._expect
        if expect.seq is not None:
            text = (
                f"the ledger ends at entry {head_seq}, before the expected head {expect}: "
                "entries were deleted, or that head is from another ledger"
            )
            return Problem(head_seq + 1, text, ProblemKind.EXPECTED_HEAD)
        text = (
            f"no entry of the chain has the expected hash {expect.hash}: the chain was "
            "truncated or rewritten, or that head is from another ledger"
        )
        return Problem(None, text, ProblemKind.EXPECTED_HEAD)
