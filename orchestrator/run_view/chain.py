"""The ledger page: chain head, entry counts, the last verification and the newest entries."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from ledger import EntryKind, Ledger
from ledger.anchor import load_checkpoint

RECENT = 50
BRIEF = 160


class EntryRow(BaseModel):
    """One chain entry, briefly."""

    seq: int = Field(description="Position in the chain.")
    kind: str = Field(description="candidate, measurement, verdict, message, fingerprint, event.")
    created_at: str = Field(description="When it was appended (ISO-8601, UTC).")
    hash: str = Field(description="Its chain hash.")
    brief: str = Field(description="Its record, as JSON cut to 160 characters.")


class LedgerView(BaseModel):
    """The ledger page."""

    head_seq: int = Field(description="Entries in the chain.")
    head_hash: str = Field(description="Hash of the last entry.")
    head: str = Field(description="The two as SEQ:HASH, for `ratchet ledger verify --expect-head`.")
    counts: dict[str, int] = Field(description="Entries of each kind.")
    verified_seq: int | None = Field(description="Last entry found good by a verification.")
    verified_hash: str | None = Field(description="Its hash.")
    verified_at: str | None = Field(description="When it was verified (None: never).")
    journal: str | None = Field(description="The head journal beside the ledger, if it keeps one.")
    recent: list[EntryRow] = Field(description="The newest entries, newest first.")


def _brief(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True)
    return text if len(text) <= BRIEF else text[: BRIEF - 3] + "..."


def ledger_view(ledger: Ledger, recent: int = RECENT) -> LedgerView:
    """Head, counts and the last verification (the checkpoint beside the ledger): reading
    them changes nothing; verifying is a separate, explicit act."""
    head_seq, head_hash = ledger.head()
    files = ledger.anchor_files
    checkpoint = load_checkpoint(files.checkpoint) if files is not None else None
    entries = ledger.entries(after_seq=max(0, head_seq - recent))
    return LedgerView(
        head_seq=head_seq,
        head_hash=head_hash,
        head=f"{head_seq}:{head_hash}",
        counts={kind.value: ledger.count(kind) for kind in EntryKind},
        verified_seq=checkpoint.seq if checkpoint else None,
        verified_hash=checkpoint.hash if checkpoint else None,
        verified_at=checkpoint.verified_at if checkpoint else None,
        journal=str(files.journal) if files is not None else None,
        recent=[
            EntryRow(
                seq=e.seq,
                kind=e.kind.value,
                created_at=e.created_at,
                hash=e.hash,
                brief=_brief(e.payload),
            )
            for e in reversed(entries)
        ],
    )
