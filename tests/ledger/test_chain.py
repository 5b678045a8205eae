"""Canonical JSON and the entry hash, checked against the written-out formula."""

from __future__ import annotations

import hashlib
import json

import pytest

from ledger import GENESIS_HASH, Ledger, canonical_json, entry_hash
from tests.ledger import factories


def spec_hash(prev_hash: str, seq: int, kind: str, created_at: str, payload: object) -> str:
    """The chain hash exactly as the design document writes it, independent of the ledger."""
    envelope = {"seq": seq, "kind": kind, "created_at": created_at, "payload": payload}
    text = json.dumps(
        envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256((prev_hash + text).encode("utf-8")).hexdigest()


def test_canonical_json_sorts_keys_compacts_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "é", "c": {"z": None, "y": True}}) == (
        '{"a":"é","b":[1,2.5],"c":{"y":true,"z":null}}'
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_canonical_json_refuses_non_finite_floats_and_names_where(bad: float) -> None:
    with pytest.raises(ValueError, match=r"non-finite float at \$\.outer\[1\]\.x") as caught:
        canonical_json({"outer": [0.5, {"x": bad}]})
    assert "None" in str(caught.value)


def test_entry_hash_matches_the_documented_formula() -> None:
    payload = {"kind": "tick", "payload": {"n": 1, "s": "ü"}}
    expected = spec_hash(GENESIS_HASH, 1, "event", "2025-01-01T00:00:00+00:00", payload)
    got = entry_hash(GENESIS_HASH, 1, "event", "2025-01-01T00:00:00+00:00", canonical_json(payload))
    assert got == expected


def test_stored_entries_link_with_the_documented_formula(ledger: Ledger) -> None:
    ledger.append_many(factories.one_of_each())
    prev_hash = GENESIS_HASH
    entries = ledger.entries()
    assert [entry.seq for entry in entries] == [1, 2, 3, 4, 5, 6]
    for entry in entries:
        assert entry.prev_hash == prev_hash
        assert entry.hash == spec_hash(
            prev_hash, entry.seq, entry.kind.value, entry.created_at, entry.payload
        )
        prev_hash = entry.hash
    assert ledger.head() == (6, prev_hash)
