"""Builders of valid ledger records for the tests."""

from __future__ import annotations

import hashlib

from ledger import (
    CandidateRecord,
    EventRecord,
    FingerprintRecord,
    MeasurementRecord,
    MessageRecord,
    Record,
    VerdictRecord,
)


def sha(label: str) -> str:
    """A deterministic 40-hex commit sha derived from label."""
    return hashlib.sha1(label.encode("utf-8")).hexdigest()


def candidate(label: str, parent: str | None = None, step: int = 1) -> CandidateRecord:
    """A candidate whose sha is sha(label)."""
    return CandidateRecord(
        sha=sha(label),
        tree_sha=sha(f"tree-{label}"),
        parent_sha=None if parent is None else sha(parent),
        step=step,
        idea_id=f"idea-{label}",
        agent="offline",
        message=f"try {label} — ünïcode",
        prompt_hash=None,
        cost={"wall_s": 1.25, "tokens_in": 0, "usd": 0},
    )


def measurement(label: str, config_id: str = "c0", arm: str = "candidate") -> MeasurementRecord:
    """A screen measurement of candidate sha(label)."""
    return MeasurementRecord(
        evaluation_id=f"{sha(label)}:screen",
        commit_sha=sha(label),
        config_id=config_id,
        arm=arm,
        stage="screen",
        samples_ns=[1000.5, 990.0, 1010.25],
        median_ns=1000.5,
        fingerprint_id=fingerprint().fingerprint_id,
        protocol="interleaved-abba",
        extra={"warmup": 3, "notes": None, "blocks": [1, 2]},
    )


def verdict(label: str, outcome: str = "accept") -> VerdictRecord:
    """A screen verdict on candidate sha(label)."""
    return VerdictRecord(
        candidate_sha=sha(label),
        verdict=outcome,
        reason="faster than parent",
        stage="screen",
        objective=0.93,
        details={"speedup": 1.07},
    )


def message(text: str, author: str = "human") -> MessageRecord:
    """An IDEA message."""
    return MessageRecord(kind="IDEA", text=text, author=author, payload={"priority": 1})


def fingerprint(gpu: str = "H200") -> FingerprintRecord:
    """A fingerprint of a made-up environment."""
    return FingerprintRecord.from_content({"gpu": gpu, "driver": "560.1", "torch": "2.13.0"})


def event(kind: str = "tick", n: int = 0) -> EventRecord:
    """A generic event."""
    return EventRecord(kind=kind, payload={"n": n})


def one_of_each() -> list[Record]:
    """One record of every kind, candidate first."""
    return [
        candidate("a"),
        fingerprint(),
        measurement("a"),
        verdict("a"),
        message("unroll the inner loop"),
        event("run_started"),
    ]
