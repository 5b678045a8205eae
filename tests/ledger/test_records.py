"""Record models: validation, immutability and fingerprint ids."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from ledger import CandidateRecord, EventRecord, FingerprintRecord, MeasurementRecord
from tests.ledger import factories


def test_fingerprint_id_is_sha256_of_canonical_content() -> None:
    record = FingerprintRecord.from_content({"b": 1, "a": "x"})
    expected = hashlib.sha256(b'{"a":"x","b":1}').hexdigest()
    assert record.fingerprint_id == expected


def test_fingerprint_with_wrong_id_is_refused() -> None:
    with pytest.raises(ValidationError, match="from_content"):
        FingerprintRecord(fingerprint_id="0" * 64, content={"a": 1})


@pytest.mark.parametrize("bad_sha", ["ABC" * 13 + "A", "a" * 39, "g" * 40, ""])
def test_candidate_sha_must_be_lowercase_git_hex(bad_sha: str) -> None:
    good = factories.candidate("a")
    with pytest.raises(ValidationError):
        CandidateRecord.model_validate(good.model_dump() | {"sha": bad_sha})


def test_candidate_accepts_sha256_object_names() -> None:
    good = factories.candidate("a")
    record = CandidateRecord.model_validate(good.model_dump() | {"sha": "e" * 64})
    assert record.sha == "e" * 64


def test_records_are_frozen_and_refuse_unknown_fields() -> None:
    record = factories.event()
    with pytest.raises(ValidationError):
        record.kind = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="surprise"):
        EventRecord.model_validate({"kind": "x", "payload": {}, "surprise": 1})


def test_non_finite_typed_float_is_refused_at_construction() -> None:
    good = factories.measurement("a")
    with pytest.raises(ValidationError, match="finite"):
        MeasurementRecord.model_validate(good.model_dump() | {"median_ns": float("nan")})
