"""Pydantic records the ledger stores, their stored forms, chain entries and verify reports."""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar, Generic, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ledger.chain import canonical_json, sha256_hex

# Git object names: 40 hex digits (SHA-1 repositories) or 64 (SHA-256 repositories).
GIT_SHA_PATTERN = r"^[0-9a-f]{40}([0-9a-f]{24})?$"
GitSha = Annotated[str, StringConstraints(pattern=GIT_SHA_PATTERN)]


class EntryKind(enum.StrEnum):
    """Kind of a chain entry; each kind has its own record type and index table."""

    CANDIDATE = "candidate"
    MEASUREMENT = "measurement"
    VERDICT = "verdict"
    MESSAGE = "message"
    FINGERPRINT = "fingerprint"
    EVENT = "event"


class RecordBase(BaseModel):
    """Common configuration of every record appended to the ledger."""

    # extra="forbid": a field the model does not know would be silently dropped from the hash.
    # ser_json_inf_nan="constants": keep NaN visible in the JSON dump so that canonical_json
    # refuses it, instead of pydantic quietly turning it into null.
    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, ser_json_inf_nan="constants"
    )

    entry_kind: ClassVar[EntryKind]


class CandidateRecord(RecordBase):
    """A candidate commit produced by the search (or the seed)."""

    entry_kind: ClassVar[EntryKind] = EntryKind.CANDIDATE

    sha: GitSha = Field(description="Commit sha (lowercase hex).")
    tree_sha: GitSha = Field(description="Git tree sha of the commit.")
    parent_sha: GitSha | None = Field(description="Declared parent commit sha; None for the seed.")
    step: int = Field(ge=0, description="Search step that produced it; 0 for the seed.")
    idea_id: str | None = Field(description="Idea the candidate implements, if any.")
    agent: str = Field(description="Agent that produced it, e.g. 'offline' or 'seed'.")
    message: str = Field(description="Commit message.")
    prompt_hash: str | None = Field(description="Hash of the prompt that produced it, if any.")
    cost: dict[str, float] = Field(
        description="Cost of producing it, e.g. {'wall_s': 1.2, 'tokens_in': 0, 'usd': 0}."
    )


class MeasurementRecord(RecordBase):
    """Timing of one arm of one evaluation on one configuration."""

    entry_kind: ClassVar[EntryKind] = EntryKind.MEASUREMENT

    evaluation_id: str = Field(description="Evaluation it belongs to, e.g. '<sha>:screen'.")
    commit_sha: str = Field(description="Commit whose code was measured in this arm.")
    config_id: str = Field(description="Workload configuration measured.")
    arm: str = Field(description="Arm, e.g. 'candidate', 'parent', 'baseline', 'frontier'.")
    stage: str = Field(description="Evaluation stage, e.g. 'screen' or 'sweep'.")
    samples_ns: list[float] = Field(
        description="Raw per-call time of each timing block, in nanoseconds."
    )
    median_ns: float = Field(description="Median per-call time, in nanoseconds.")
    fingerprint_id: str = Field(description="Fingerprint of the machine and software measured on.")
    protocol: str = Field(description="Timing protocol, e.g. 'interleaved-abba'.")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Anything else, JSON-serializable."
    )


class VerdictRecord(RecordBase):
    """The judge's decision on a candidate at one stage."""

    entry_kind: ClassVar[EntryKind] = EntryKind.VERDICT

    candidate_sha: str = Field(description="Commit sha of the judged candidate.")
    verdict: str = Field(description="The decision, e.g. 'accept' or 'reject'.")
    reason: str = Field(description="Human-readable reason for the decision.")
    stage: str = Field(description="Stage that produced the verdict, e.g. 'screen'.")
    objective: float | None = Field(description="Objective value, if one was computed.")
    details: dict[str, Any] = Field(
        default_factory=dict, description="Supporting data, JSON-serializable."
    )


class MessageRecord(RecordBase):
    """A message on the shared board (ideas, notes, injected instructions)."""

    entry_kind: ClassVar[EntryKind] = EntryKind.MESSAGE

    kind: str = Field(description="Message kind, e.g. 'IDEA'.")
    text: str = Field(description="Message text.")
    author: str = Field(description="Who wrote it.")
    payload: dict[str, Any] = Field(
        default_factory=dict, description="Structured data, JSON-serializable."
    )


class FingerprintRecord(RecordBase):
    """Description of an environment measurements were taken in, keyed by its content hash."""

    entry_kind: ClassVar[EntryKind] = EntryKind.FINGERPRINT

    fingerprint_id: str = Field(description="SHA-256 hex of the canonical JSON of content.")
    content: dict[str, Any] = Field(description="The environment description, JSON-serializable.")

    @classmethod
    def from_content(cls, content: dict[str, Any]) -> FingerprintRecord:
        """Build the record, computing fingerprint_id from content."""
        return cls(fingerprint_id=sha256_hex(canonical_json(content)), content=content)

    @model_validator(mode="after")
    def _id_matches_content(self) -> FingerprintRecord:
        # Idempotent appends trust that equal ids mean equal content; enforce it here.
        expected = sha256_hex(canonical_json(self.content))
        if self.fingerprint_id != expected:
            raise ValueError(
                f"fingerprint_id {self.fingerprint_id!r} is not the SHA-256 of the canonical "
                f"JSON of content (expected {expected!r}); build it with "
                "FingerprintRecord.from_content(content)"
            )
        return self


class EventRecord(RecordBase):
    """A generic event for everything without a dedicated record type."""

    entry_kind: ClassVar[EntryKind] = EntryKind.EVENT

    kind: str = Field(description="Event kind, e.g. 'run_started'.")
    payload: dict[str, Any] = Field(
        default_factory=dict, description="Event data, JSON-serializable."
    )


Record: TypeAlias = (
    CandidateRecord
    | MeasurementRecord
    | VerdictRecord
    | MessageRecord
    | FingerprintRecord
    | EventRecord
)


def record_type(kind: EntryKind) -> type[Record]:
    """The record class stored under an entry kind."""
    match kind:
        case EntryKind.CANDIDATE:
            return CandidateRecord
        case EntryKind.MEASUREMENT:
            return MeasurementRecord
        case EntryKind.VERDICT:
            return VerdictRecord
        case EntryKind.MESSAGE:
            return MessageRecord
        case EntryKind.FINGERPRINT:
            return FingerprintRecord
        case EntryKind.EVENT:
            return EventRecord


RecordT = TypeVar("RecordT", bound=RecordBase)


class Stored(BaseModel, Generic[RecordT]):
    """A record as read back from the ledger, with its place in the chain."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1, description="Position of the entry in the chain (1-based).")
    hash: str = Field(description="Chain hash of the entry.")
    created_at: str = Field(description="When the entry was appended (ISO-8601, UTC).")
    record: RecordT = Field(description="The record itself.")


StoredCandidate: TypeAlias = Stored[CandidateRecord]
StoredMeasurement: TypeAlias = Stored[MeasurementRecord]
StoredVerdict: TypeAlias = Stored[VerdictRecord]
StoredMessage: TypeAlias = Stored[MessageRecord]
StoredFingerprint: TypeAlias = Stored[FingerprintRecord]
StoredEvent: TypeAlias = Stored[EventRecord]


class LedgerEntry(BaseModel):
    """One raw entry of the hash chain."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=1, description="Position in the chain (1-based, contiguous).")
    kind: EntryKind = Field(description="Kind of record the payload holds.")
    payload: dict[str, Any] = Field(description="The record, as JSON-mode data.")
    prev_hash: str = Field(description="Hash of the previous entry ('0'*64 for the first).")
    hash: str = Field(description="sha256(prev_hash + canonical JSON of seq/kind/time/payload).")
    created_at: str = Field(description="When the entry was appended (ISO-8601, UTC).")


class ProblemKind(enum.StrEnum):
    """What kind of problem a verification found."""

    CHAIN = "chain"  # the chain or its index tables are not internally consistent
    TRIGGERS = "triggers"  # an append-only trigger is missing or altered
    DAMAGED = "damaged"  # SQLite cannot read part of the file
    TRUNCATED = "truncated"  # entries recorded outside the database are gone from it
    REWRITTEN = "rewritten"  # an entry's hash differs from the one recorded outside
    EXPECTED_HEAD = "expected_head"  # the chain does not hold the head asked for
    JOURNAL = "journal"  # the head journal itself was cut, removed or contradicts itself


class VerifyReport(BaseModel):
    """Outcome of re-checking the chain, its index tables and its anchors outside the database."""

    model_config = ConfigDict(frozen=True)

    ok: bool = Field(description="True when no problem was found.")
    entries_checked: int = Field(description="Entries examined before stopping.")
    head_seq: int = Field(default=0, description="Seq of the last entry found good (0 if none).")
    head_hash: str = Field(
        description="Hash of the last entry found good ('0'*64 if none); anchor it to detect "
        "truncation later."
    )
    first_bad_seq: int | None = Field(
        description="Seq of the first bad entry; None when ok or the problem has no seq."
    )
    problem: str | None = Field(description="Human-readable description of the first problem.")
    problem_kind: ProblemKind | None = Field(
        default=None, description="What kind of problem it is; None when ok."
    )
    checked_from_seq: int = Field(
        default=1,
        description="First seq walked: 1 for a full check, the one after the last verified "
        "head for an incremental check.",
    )
    journal: str | None = Field(
        default=None, description="Head journal compared with the chain; None without one."
    )
    journal_heads: int = Field(
        default=0, description="Heads from the journal (and the last verified head) compared."
    )
    anchor_note: str | None = Field(
        default=None,
        description="What could not be anchored outside the database (no journal, skipped "
        "lines), when anything.",
    )
