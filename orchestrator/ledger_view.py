"""`ratchet ledger show`: chain entries as readable one-line summaries per kind, or JSON lines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ledger import EntryKind, LedgerEntry
from orchestrator.events import EventKind
from orchestrator.service import RatchetError, open_run_ledger

TEXT_CUT = 100  # free text (reasons, messages) in a summary; --json has it whole

Payload = dict[str, Any]


class ShownEntry(BaseModel):
    """One chain entry as `ledger show` gives it: its place, a summary and the full record."""

    seq: int = Field(description="Position in the chain (1-based).")
    created_at: str = Field(description="When it was appended (ISO-8601, UTC).")
    kind: EntryKind = Field(description="Kind of record.")
    event: str | None = Field(description="For an event entry, its event kind (else None).")
    hash: str = Field(description="Chain hash of the entry.")
    prev_hash: str = Field(description="Chain hash of the entry before it.")
    summary: str = Field(description="The record in one line, by kind.")
    payload: Payload = Field(description="The record itself, as stored.")


def _cut(text: object, limit: int = TEXT_CUT) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _short(sha: object) -> str:
    return str(sha)[:10] if sha else "-"


def _ratio(ratio: object) -> str:
    if not isinstance(ratio, dict) or "median" not in ratio:
        return "-"
    return f"{float(ratio['median']):.3f}x"


def _ms(ns: object) -> str:
    return f"{float(ns) / 1e6:.4g} ms" if isinstance(ns, int | float) else "? ms"


def _candidate(p: Payload) -> str:
    title = str(p.get("message", "")).strip().splitlines()
    return (
        f"{_short(p.get('sha'))} step {p.get('step')} parent {_short(p.get('parent_sha'))} "
        f"idea {p.get('idea_id') or '-'} by {p.get('agent')}: {_cut(title[0] if title else '')}"
    )


def _measurement(p: Payload) -> str:
    blocks = len(p.get("samples_ns") or [])
    return (
        f"config {p.get('config_id')} {p.get('arm')} {_short(p.get('commit_sha'))} "
        f"{_ms(p.get('median_ns'))} ({blocks} blocks, {p.get('protocol')}, {p.get('stage')})"
    )


def _verdict(p: Payload) -> str:
    objective = p.get("objective")
    speed = f", {objective:.3f}x over baseline" if isinstance(objective, int | float) else ""
    return (
        f"{_short(p.get('candidate_sha'))} {p.get('verdict')} at {p.get('stage')}{speed}: "
        f"{_cut(p.get('reason', ''))}"
    )


def _message(p: Payload) -> str:
    return f"{p.get('kind')} by {p.get('author')}: {_cut(p.get('text', ''))}"


def _fingerprint(p: Payload) -> str:
    content = p.get("content") or {}
    machine = content.get("gpu_name") or content.get("cpu_model") or "?"
    return (
        f"{str(p.get('fingerprint_id'))[:12]} {content.get('device', '?')} {machine}, "
        f"torch {content.get('torch', '?')}, python {content.get('python', '?')}"
    )


def _evaluation(p: Payload) -> str:
    aggregates = {a.get("other", a.get("arm")): a for a in p.get("aggregates") or []}
    baseline = aggregates.get("baseline")
    speed = f", {_ratio(baseline)} over baseline" if baseline else ""
    taint = f", tainted ({len(p['taint'])} causes)" if p.get("taint") else ""
    return (
        f"step {p.get('step')} {p.get('stage')} of {_short(p.get('sha'))}: {p.get('outcome')} "
        f"in {float(p.get('wall_s', 0.0)):.1f} s{speed}{taint}"
    )


def _llm_call(p: Payload) -> str:
    tokens = f"{p.get('input_tokens', 0)} in / {p.get('output_tokens', 0)} out"
    return (
        f"step {p.get('step')} {p.get('role')} {p.get('model')}: {tokens} tokens, "
        f"${float(p.get('usd', 0.0)):.4f}, {float(p.get('wall_s', 0.0)):.1f} s, {p.get('outcome')}"
    )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _agent_run(p: Payload) -> str:
    error = f", error: {_cut(p['error'])}" if p.get("error") else ""
    return f"at step {p.get('step')}: {p.get('ideas')} ideas{error}"


EVENT_SUMMARIES: dict[str, Callable[[Payload], str]] = {
    EventKind.RUN_STARTED: lambda p: (
        f"{p.get('workload')} on {p.get('device')}, configs {p.get('config_set')}"
        + (" (resumed)" if p.get("resumed") else "")
        + f"; baseline: {_cut(p.get('baseline', ''), 60)}"
    ),
    EventKind.IDEA_REGISTERED: lambda p: (
        f"{p.get('idea_id')} [{p.get('source')}] q={p.get('quality')}: {_cut(p.get('text', ''))}"
    ),
    EventKind.STEP_STARTED: lambda p: (
        f"step {p.get('step')}: parent {_short(p.get('parent_sha'))}, idea {p.get('idea_id')}"
        + (" (idea forced)" if p.get("idea_forced") else "")
        + (" (parent forced)" if p.get("parent_forced") else "")
    ),
    EventKind.EXPANSION_FAILED: lambda p: (
        f"step {p.get('step')} idea {p.get('idea_id')}: {p.get('outcome')}"
        + (" (infrastructure)" if p.get("infrastructure") else "")
        + f": {_cut(p.get('message', ''))}"
    ),
    EventKind.STATIC_CHECKED: lambda p: (
        f"step {p.get('step')} {_short(p.get('sha'))}: "
        + ("passed" if p.get("passed") else f"{len(p.get('findings') or [])} findings")
    ),
    EventKind.EVALUATION: _evaluation,
    EventKind.RUN_STOPPED: lambda p: (
        f"{p.get('reason')}; {p.get('steps_this_invocation')} steps in "
        f"{float(p.get('elapsed_s', 0.0)):.0f} s"
    ),
    EventKind.DEVICE_QUALIFIED: lambda p: (
        f"fingerprint {str(p.get('fingerprint_id'))[:12]}: "
        + ", ".join(f"{k} {v:.3g}" for k, v in (p.get("report") or {}).items() if _number(v))
    ),
    EventKind.DEVICE_NO_RUN: lambda p: f"{p.get('device')}: {_cut(p.get('message', ''))}",
    EventKind.NOISE_FLOOR: lambda p: (
        f"{p.get('config_set')}: floor {float(p.get('floor', 0.0)):.2%}, A/A aggregate "
        f"{_ratio(p.get('aggregate'))}"
        + (f", reused from {p['reused_from']}" if p.get("reused_from") else "")
    ),
    EventKind.LLM_CALL: _llm_call,
    EventKind.RESEARCH: _agent_run,
    EventKind.INSPECTION: _agent_run,
    EventKind.VERIFICATION: lambda p: (
        f"{_short(p.get('sha'))} vs {_short(p.get('against'))}: {p.get('verdict')}: "
        f"{_cut(p.get('reason', ''))}"
    ),
    EventKind.FRONTIER_DEMOTED: lambda p: f"{_short(p.get('sha'))}: {_cut(p.get('reason', ''))}",
    EventKind.LESSON: lambda p: f"step {p.get('step')} {p.get('agent')}: {_cut(p.get('text', ''))}",
    EventKind.INHERITED_CHECK: lambda p: (
        f"step {p.get('step')}: "
        + ("frontier" if p.get("recheck_of") else "parent")
        + f" {_short(p.get('parent_sha'))} on configs "
        f"{', '.join(p.get('configs') or [])}: "
        + ("failed them too" if p.get("parent_failed") else str(p.get("outcome")))
    ),
}


def _event(p: Payload) -> str:
    kind = str(p.get("kind"))
    inner = p.get("payload") or {}
    summary = EVENT_SUMMARIES.get(kind)
    return f"{kind}: {summary(inner) if summary else _cut(inner, 120)}"


SUMMARIES: dict[EntryKind, Callable[[Payload], str]] = {
    EntryKind.CANDIDATE: _candidate,
    EntryKind.MEASUREMENT: _measurement,
    EntryKind.VERDICT: _verdict,
    EntryKind.MESSAGE: _message,
    EntryKind.FINGERPRINT: _fingerprint,
    EntryKind.EVENT: _event,
}


def summarize(entry: LedgerEntry) -> str:
    """The entry in one line; a payload missing fields (an older ledger) still reads."""
    try:
        return SUMMARIES[entry.kind](entry.payload)
    except (KeyError, TypeError, ValueError, AttributeError):
        return _cut(entry.payload, 120)


def check_kind(kind: str | None) -> str | None:
    """A valid --kind (an entry kind or an event kind), or a RatchetError listing them."""
    if kind is None or kind in set(EntryKind) | set(EventKind):
        return kind
    raise RatchetError(
        f"--kind {kind!r} is not a kind of ledger entry; use one of "
        f"{', '.join(EntryKind)} (entry kinds) or {', '.join(EventKind)} (event kinds)"
    )


def _matches(entry: LedgerEntry, kind: str | None) -> bool:
    if kind is None or entry.kind == kind:
        return True
    return entry.kind is EntryKind.EVENT and entry.payload.get("kind") == kind


def _shown(entry: LedgerEntry) -> ShownEntry:
    event = entry.payload.get("kind") if entry.kind is EntryKind.EVENT else None
    return ShownEntry(
        seq=entry.seq,
        created_at=entry.created_at,
        kind=entry.kind,
        event=str(event) if event is not None else None,
        hash=entry.hash,
        prev_hash=entry.prev_hash,
        summary=summarize(entry),
        payload=entry.payload,
    )


def show_entries(
    run_dir: Path, limit: int | None, kind: str | None = None, ledger_url: str | None = None
) -> list[ShownEntry]:
    """The chain's entries (of one kind, when given; the last `limit` of them, when given),
    in chain order. The kind is checked before the ledger is opened."""
    kind = check_kind(kind)
    if limit is not None and limit < 0:
        raise RatchetError(f"--limit {limit} is negative; give a count of entries, e.g. 20")
    with open_run_ledger(run_dir, ledger_url) as ledger:
        if kind is None and limit is not None:  # the cheap path: read only the tail
            head, _ = ledger.head()
            entries = ledger.entries(after_seq=max(0, head - limit))
        else:
            entries = [e for e in ledger.entries() if _matches(e, kind)]
            if limit is not None:
                entries = entries[max(0, len(entries) - limit) :]
    return [_shown(entry) for entry in entries]


def _when(created_at: str) -> str:
    try:
        return datetime.fromisoformat(created_at).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return created_at


def format_entry(entry: ShownEntry) -> str:
    """The line of `ledger show`: seq, time (UTC), kind, short hash, summary."""
    return (
        f"{entry.seq:>6} {_when(entry.created_at)} {entry.kind.value:<11} {entry.hash[:12]} "
        f"{entry.summary}"
    )
