"""Appending and querying through the Ledger API on real SQLite files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger import (
    GENESIS_HASH,
    DuplicateRecordError,
    EntryKind,
    EventRecord,
    Ledger,
    LedgerError,
    Record,
    Stored,
)
from tests.ledger import factories


def test_every_record_type_round_trips(ledger: Ledger) -> None:
    records = factories.one_of_each()
    seqs = ledger.append_many(records)
    assert seqs == [1, 2, 3, 4, 5, 6]
    candidate, fingerprint, measurement, verdict, message, event = records
    found: list[tuple[Stored[Any] | None, Record]] = [
        (ledger.candidate(factories.sha("a")), candidate),
        (ledger.fingerprint(factories.fingerprint().fingerprint_id), fingerprint),
        (ledger.measurements()[0], measurement),
        (ledger.verdicts()[0], verdict),
        (ledger.messages()[0], message),
        (ledger.events()[0], event),
    ]
    entries = {entry.seq: entry for entry in ledger.entries()}
    for (stored, record), seq in zip(found, seqs, strict=True):
        assert stored is not None
        assert stored.record == record
        assert type(stored.record) is type(record)
        assert stored.seq == seq
        assert stored.hash == entries[seq].hash
        assert stored.created_at == entries[seq].created_at
        assert stored.created_at.endswith("+00:00")


def test_queries_filter_and_order_by_seq(ledger: Ledger) -> None:
    ledger.append(factories.fingerprint())
    ledger.append(factories.candidate("a", step=0))
    ledger.append(factories.candidate("b", parent="a"))
    ledger.append(factories.measurement("b", "c1"))
    ledger.append(factories.event("tick", 1))
    ledger.append(factories.measurement("a", "c1"))
    ledger.append(factories.measurement("b", "c0"))
    ledger.append(factories.verdict("b"))
    ledger.append(factories.message("first"))
    ledger.append(factories.event("tock", 2))
    ledger.append(factories.message("second"))
    ledger.append(factories.event("tick", 3))

    assert [c.record.sha for c in ledger.candidates()] == [factories.sha("a"), factories.sha("b")]
    by_eval = ledger.measurements(evaluation_id=f"{factories.sha('b')}:screen")
    assert [(m.seq, m.record.config_id) for m in by_eval] == [(4, "c1"), (7, "c0")]
    assert [m.seq for m in ledger.measurements(commit_sha=factories.sha("a"))] == [6]
    assert [m.seq for m in ledger.measurements()] == [4, 6, 7]
    assert ledger.measurements(evaluation_id="nope", commit_sha=factories.sha("a")) == []
    assert [v.seq for v in ledger.verdicts(candidate_sha=factories.sha("b"))] == [8]
    assert ledger.verdicts(candidate_sha=factories.sha("a")) == []
    assert [m.record.text for m in ledger.messages()] == ["first", "second"]
    assert [m.record.text for m in ledger.messages(after_seq=9)] == ["second"]
    assert [e.record.payload["n"] for e in ledger.events()] == [1, 2, 3]
    assert [e.seq for e in ledger.events(kind="tick")] == [5, 12]
    assert [e.seq for e in ledger.events(kind="tick", after_seq=5)] == [12]
    assert ledger.candidate(factories.sha("zzz")) is None
    assert ledger.fingerprint("f" * 64) is None
    assert [e.seq for e in ledger.entries(after_seq=3, limit=2)] == [4, 5]
    assert [e.kind for e in ledger.entries(after_seq=10)] == [EntryKind.MESSAGE, EntryKind.EVENT]


def test_head_and_count(ledger: Ledger) -> None:
    assert ledger.head() == (0, GENESIS_HASH)
    assert ledger.count() == 0
    ledger.append_many([factories.event(n=n) for n in range(3)])
    ledger.append(factories.candidate("a"))
    last = ledger.entries()[-1]
    assert ledger.head() == (4, last.hash)
    assert ledger.count() == 4
    assert ledger.count(EntryKind.EVENT) == 3
    assert ledger.count(EntryKind.CANDIDATE) == 1
    assert ledger.count(EntryKind.VERDICT) == 0


def test_append_many_with_duplicate_measurement_writes_nothing(ledger: Ledger) -> None:
    ledger.append(factories.measurement("a", "c0"))
    before = (ledger.count(), ledger.head())
    batch: list[Record] = [
        factories.measurement("a", "c1"),
        factories.verdict("a"),
        factories.measurement("a", "c0"),  # same (evaluation_id, config_id, arm) as seq 1
    ]
    with pytest.raises(DuplicateRecordError, match=r"config_id='c0', arm='candidate'.*seq 1"):
        ledger.append_many(batch)
    assert (ledger.count(), ledger.head()) == before
    assert ledger.verdicts() == []
    assert ledger.verify().ok


def test_duplicate_inside_one_batch_writes_nothing(ledger: Ledger) -> None:
    with pytest.raises(DuplicateRecordError, match=factories.sha("a")):
        ledger.append_many([factories.candidate("a"), factories.candidate("a")])
    assert ledger.count() == 0
    assert ledger.verify().ok


def test_duplicate_candidate_sha_is_refused(ledger: Ledger) -> None:
    ledger.append(factories.candidate("a"))
    with pytest.raises(DuplicateRecordError, match=f"candidate sha {factories.sha('a')}"):
        ledger.append(factories.candidate("a", step=7))
    assert ledger.count() == 1


def test_same_arm_in_another_evaluation_is_not_a_duplicate(ledger: Ledger) -> None:
    ledger.append(factories.measurement("a", "c0", arm="parent"))
    ledger.append(factories.measurement("b", "c0", arm="parent"))
    ledger.append(factories.measurement("a", "c0", arm="candidate"))
    assert ledger.count(EntryKind.MEASUREMENT) == 3


def test_fingerprint_append_is_idempotent(ledger: Ledger) -> None:
    first = ledger.append(factories.fingerprint())
    ledger.append(factories.event())
    assert ledger.append(factories.fingerprint()) == first
    seqs = ledger.append_many([factories.fingerprint("B200"), factories.fingerprint()])
    assert seqs == [3, first]
    assert ledger.append_many([factories.fingerprint("L4"), factories.fingerprint("L4")]) == [4, 4]
    assert ledger.count(EntryKind.FINGERPRINT) == 3
    assert ledger.count() == 4
    assert ledger.verify().ok


def test_nan_in_payload_is_refused_and_writes_nothing(ledger: Ledger) -> None:
    ledger.append(factories.event())
    bad = EventRecord(kind="timing", payload={"samples": [1.0, float("nan")]})
    with pytest.raises(ValueError, match=r"non-finite float at \$\.payload\.samples\[1\]"):
        ledger.append_many([factories.event(n=1), bad])
    assert ledger.count() == 1
    assert ledger.verify().ok


def test_reopen_persists(ledger_path: Path) -> None:
    with Ledger.open_path(ledger_path) as first:
        first.append_many(factories.one_of_each())
        head = first.head()
    with Ledger.open(f"sqlite:///{ledger_path}", create=False) as again:
        assert again.head() == head
        assert again.candidate(factories.sha("a")) is not None
        assert again.append(factories.event()) == 7
        assert again.verify().ok


def test_empty_batch_and_non_records(ledger: Ledger) -> None:
    assert ledger.append_many([]) == []
    with pytest.raises(TypeError, match="EventRecord"):
        ledger.append({"kind": "x"})  # type: ignore[arg-type]
    assert ledger.count() == 0


def test_bad_query_arguments_are_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="after_seq"):
        ledger.messages(after_seq=-1)
    with pytest.raises(ValueError, match="limit"):
        ledger.entries(limit=-5)


def test_closed_ledger_refuses_calls(ledger_path: Path) -> None:
    opened = Ledger.open_path(ledger_path)
    opened.close()
    opened.close()
    with pytest.raises(LedgerError, match="closed"):
        opened.append(factories.event())
    with pytest.raises(LedgerError, match="closed"):
        opened.head()
