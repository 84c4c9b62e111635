"""Frozen evidence: canonical JSON, addressed by its sha256.

A decision points at the exact bytes it was made on. The payload is written
as canonical JSON (keys sorted, no spaces, UTF-8, non-finite floats as null)
and its id is the sha256 of those bytes, so anyone can re-hash what the
store returns and see it is what the manager saw. The same payload twice is
stored once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import duckdb
import numpy as np
from fieldtrust.labels.errors import DecisionError
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import first_row


def canonical_json(payload: Any) -> str:
    """``payload`` as canonical JSON text: sorted keys, compact, NaN/inf as null.

    Numpy scalars and arrays become numbers and lists, dates ISO text, tuples
    and sets lists (sets sorted), dataclasses their fields.
    """
    return json.dumps(
        _plain(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False,
    )


def evidence_id_of(payload_json: str) -> str:
    """The sha256 hex digest of canonical JSON text (UTF-8)."""
    return hashlib.sha256(payload_json.encode("utf-8")).hexdigest()


def freeze(con: duckdb.DuckDBPyConnection, payload: Mapping[str, Any]) -> str:
    """Store ``payload`` as a snapshot (in the caller's transaction); return its id."""
    text = canonical_json(payload)
    evidence_id = evidence_id_of(text)
    # The same payload twice is stored, and chained, once: a conflict returns no row.
    inserted = con.execute(
        "INSERT INTO evidence_snapshots (evidence_id, created_at, payload_json) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING RETURNING *",
        [evidence_id, utc_now(), text],
    )
    chain_returned(con, "evidence_snapshots", inserted)
    return evidence_id


def evidence_json(con: duckdb.DuckDBPyConnection, evidence_id: str) -> str:
    """The stored canonical JSON of a snapshot, byte for byte."""
    row = first_row(con.execute(
        "SELECT payload_json FROM evidence_snapshots WHERE evidence_id = ?", [evidence_id]
    ).fetchall())
    if row is None:
        raise DecisionError(f"no evidence snapshot {evidence_id!r} in the store")
    return str(row[0])


def evidence_payload(con: duckdb.DuckDBPyConnection, evidence_id: str) -> dict[str, Any]:
    """A snapshot parsed back into Python, after checking its sha256 still matches its id."""
    text = evidence_json(con, evidence_id)
    if evidence_id_of(text) != evidence_id:
        raise DecisionError(
            f"evidence snapshot {evidence_id} does not hash to its id: the store was altered"
            " outside fieldtrust"
        )
    payload: dict[str, Any] = json.loads(text)
    return payload


def _plain(value: Any) -> Any:
    """Convert ``value`` into JSON-ready Python values."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=canonical_json)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise DecisionError(
        f"evidence value {value!r} of type {type(value).__name__} cannot be frozen as JSON;"
        " pass numbers, text, dates, lists or mappings"
    )
