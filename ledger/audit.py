"""Verification of a ledger against its anchors: the head journal, the last verified head and
an expected head; in full (every entry) or incrementally (the entries after the last verified
head, plus that head itself)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection, select

from ledger.anchor import (
    AnchorCheck,
    Anchoring,
    Claim,
    ExpectedHead,
    Problem,
    VerifiedHead,
    load_checkpoint,
)
from ledger.chain import GENESIS_HASH
from ledger.errors import CorruptLedgerError
from ledger.journal import JournalRead, journal_size, read_heads
from ledger.models import Entry, table
from ledger.records import ProblemKind, VerifyReport
from ledger.verify import quick_check, walk_chain

JOURNAL_SOURCE = "the head journal"


class AuditInputs(NamedTuple):
    """What was read outside the database, before its snapshot was taken (so that every
    journal line read names a commit the snapshot holds)."""

    anchoring: Anchoring
    checkpoint: VerifiedHead | None
    start: VerifiedHead | None  # where an incremental walk starts; None: at the first entry
    journal: JournalRead | None
    problem: Problem | None  # a problem of the journal itself
    note: str | None


def gather(anchoring: Anchoring, incremental: bool) -> AuditInputs:
    """Read the checkpoint and the journal (from where the checkpoint left it, if
    incremental); call before opening the database snapshot."""
    files = anchoring.files
    if files is None:
        return AuditInputs(anchoring, None, None, None, None, anchoring.note)
    checkpoint = load_checkpoint(files.checkpoint)
    start = checkpoint if incremental else None
    problem = _journal_cut(files.journal, checkpoint)
    if problem is not None:
        return AuditInputs(anchoring, checkpoint, start, None, problem, None)
    journal = read_heads(files.journal, start.journal_offset if start is not None else 0)
    if journal is None:
        note: str | None = (
            f"no head journal at {files.journal} yet (a ledger written before head journals, "
            "or not appended to since): truncation and rewrites with recomputed hashes are "
            "detected from its next append on, or against a head recorded elsewhere"
        )
    elif journal.skipped:
        note = f"{journal.skipped} unreadable line(s) of the head journal skipped (torn writes?)"
    else:
        note = None
    return AuditInputs(anchoring, checkpoint, start, journal, _conflict(journal), note)


def _journal_cut(journal: Path, checkpoint: VerifiedHead | None) -> Problem | None:
    """The journal deleted or shortened since the checkpoint compared part of it."""
    verified = checkpoint.journal_offset if checkpoint is not None else 0
    if not verified or checkpoint is None:
        return None
    size = journal_size(journal)
    if size is None:
        text = (
            f"the head journal {journal} is gone, but {verified} bytes of it were verified on "
            f"{checkpoint.verified_at}: it was deleted; restore it from a backup"
        )
    elif size < verified:
        text = (
            f"the head journal {journal} has {size} bytes, but {verified} were verified on "
            f"{checkpoint.verified_at}: it was cut or replaced; restore it from a backup"
        )
    else:
        return None
    return Problem(None, text, ProblemKind.JOURNAL)


def _conflict(journal: JournalRead | None) -> Problem | None:
    if journal is None or journal.conflict is None:
        return None
    seq, first, second = journal.conflict
    text = (
        f"the head journal names two hashes for entry {seq} ({first} and {second}): the "
        f"ledger was rewritten from entry {seq} on at some point, or the journal was edited"
    )
    return Problem(seq, text, ProblemKind.JOURNAL)


def audit(
    connection: Connection, inputs: AuditInputs, expect: ExpectedHead | None
) -> tuple[VerifyReport, VerifiedHead | None]:
    """Verify inside one read snapshot; returns the report and, when it is ok, the new
    checkpoint to save."""
    claims = _claims(inputs)
    anchors = AnchorCheck(claims, expect)
    start = inputs.start
    after_seq, after_hash = (start.seq, start.hash) if start else (0, GENESIS_HASH)
    problem = inputs.problem
    checked = 0
    head_seq, head_hash = after_seq, after_hash
    try:
        if problem is None:
            problem = quick_check(connection) if start is None else None
        if problem is None and start is not None:
            problem = _check_old_claims(connection, anchors, claims, start)
        if problem is None:
            walked = walk_chain(connection, after_seq, after_hash, anchors)
            problem, checked = walked.problem, walked.checked
            head_seq, head_hash = walked.head_seq, walked.head_hash
    except CorruptLedgerError as exc:
        problem = Problem(None, str(exc), ProblemKind.DAMAGED)
    if problem is None:
        problem = _journal_missing(inputs, head_seq)
    report = VerifyReport(
        ok=problem is None,
        entries_checked=checked,
        head_seq=head_seq,
        head_hash=head_hash,
        first_bad_seq=None if problem is None else problem.seq,
        problem=None if problem is None else problem.text,
        problem_kind=None if problem is None else problem.kind,
        checked_from_seq=after_seq + 1,
        journal=None if inputs.anchoring.files is None else str(inputs.anchoring.files.journal),
        journal_heads=anchors.compared,
        anchor_note=inputs.note,
    )
    return report, _next_checkpoint(report, inputs)


def _journal_missing(inputs: AuditInputs, head_seq: int) -> Problem | None:
    """Entries appended after a checkpoint were journaled (checkpoints and journals come
    together): no journal beside them now means it was deleted."""
    files, checkpoint = inputs.anchoring.files, inputs.checkpoint
    if files is None or checkpoint is None or inputs.journal is not None:
        return None
    # Looked at again inside the snapshot: a concurrent first append may have just made it.
    if head_seq <= checkpoint.seq or journal_size(files.journal) is not None:
        return None
    text = (
        f"the head journal {files.journal} is gone, but entries {checkpoint.seq + 1}-{head_seq} "
        f"were appended after the last verification (on {checkpoint.verified_at}) and so were "
        "journaled: it was deleted; restore it from a backup"
    )
    return Problem(None, text, ProblemKind.JOURNAL)


def _claims(inputs: AuditInputs) -> dict[int, Claim]:
    claims: dict[int, Claim] = {}
    checkpoint = inputs.checkpoint
    if checkpoint is not None and checkpoint.seq > 0:
        source = f"the last verification (on {checkpoint.verified_at})"
        claims[checkpoint.seq] = Claim(checkpoint.hash, source)
    if inputs.journal is not None:
        for seq, head_hash in inputs.journal.claims.items():
            claims.setdefault(seq, Claim(head_hash, JOURNAL_SOURCE))
    return claims


def _check_old_claims(
    connection: Connection, anchors: AnchorCheck, claims: dict[int, Claim], start: VerifiedHead
) -> Problem | None:
    """Claims at or before the incremental start: the verified head itself, and journal lines
    that concurrent writers appended out of seq order."""
    old = sorted(seq for seq in claims if seq <= start.seq)
    if not old:
        return None
    entries = table(Entry)
    statement = select(entries.c.seq, entries.c.hash).where(entries.c.seq.in_(old))
    stored = {row.seq: row.hash for row in connection.execute(statement)}
    for seq in old:
        if seq not in stored:
            last = select(entries.c.seq).order_by(entries.c.seq.desc()).limit(1)
            end = connection.execute(last).scalar_one_or_none() or 0
            claim = claims[seq]
            text = (
                f"entry {seq} is gone (the ledger ends at entry {end}), but {claim.source} "
                f"recorded it with hash {claim.hash}: entries were deleted"
            )
            return Problem(min(seq, end + 1), text, ProblemKind.TRUNCATED)
        problem = anchors.see(seq, stored[seq])
        if problem is not None:
            return problem
    return None


def _next_checkpoint(report: VerifyReport, inputs: AuditInputs) -> VerifiedHead | None:
    if not report.ok or inputs.anchoring.files is None:
        return None
    journal = inputs.journal
    if journal is not None:
        offset = journal.end_offset
    else:
        offset = inputs.start.journal_offset if inputs.start is not None else 0
    return VerifiedHead(
        seq=report.head_seq,
        hash=report.head_hash,
        journal_offset=offset,
        verified_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
