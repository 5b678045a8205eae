"""Canonical JSON and the hash chain that links every ledger entry to the one before it."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Final

GENESIS_HASH: Final = "0" * 64
# Equivalent to json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# allow_nan=False). The encoder keeps no state between calls; reusing it spares building a new
# one per call, which dominates verify() on large ledgers.
_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(obj: Any) -> str:
    """Serialize obj the one way the ledger hashes it (sorted keys, compact, UTF-8, no NaN)."""
    try:
        return _ENCODER.encode(obj)
    except ValueError as exc:
        path = _non_finite_path(obj, "$")
        if path is None:
            raise
        raise ValueError(
            f"canonical JSON cannot encode the non-finite float at {path}: JSON has no NaN or "
            "Infinity; encode it explicitly before appending (e.g. as None or a string)"
        ) from exc


def _non_finite_path(obj: Any, path: str) -> str | None:
    """Locate the first NaN/Infinity inside obj, only ever called once encoding has failed."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else f"{path} (value {obj!r})"
    if isinstance(obj, dict):
        items: list[tuple[str, Any]] = [(f"{path}.{key}", value) for key, value in obj.items()]
    elif isinstance(obj, list | tuple):
        items = [(f"{path}[{index}]", value) for index, value in enumerate(obj)]
    else:
        return None
    for item_path, value in items:
        found = _non_finite_path(value, item_path)
        if found is not None:
            return found
    return None


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 encoding of text, as lowercase hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def envelope_json(seq: int, kind: str, created_at: str, payload_json: str) -> str:
    """Canonical JSON of {seq, kind, created_at, payload} given the payload's canonical JSON.

    Splicing the already-canonical payload text avoids serializing large payloads twice; it
    equals canonical_json of the whole envelope because the keys are emitted in sorted order.
    """
    return (
        '{"created_at":'
        + canonical_json(created_at)
        + ',"kind":'
        + canonical_json(kind)
        + ',"payload":'
        + payload_json
        + ',"seq":'
        + canonical_json(seq)
        + "}"
    )


def entry_hash(prev_hash: str, seq: int, kind: str, created_at: str, payload_json: str) -> str:
    """Hash of one chain entry: sha256(prev_hash + canonical envelope)."""
    return sha256_hex(prev_hash + envelope_json(seq, kind, created_at, payload_json))
