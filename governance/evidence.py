"""Evidence: what a decision rests on, typed, and frozen as canonical JSON under its sha256.

:class:`Evidence` is what every decision freezes: the stratum, the
certification computed from the store when approving or rejecting
(:class:`Certification`), the revocation recommendation when revoking, the
audit designs behind the stratum's labels, and the code and schema versions
(:mod:`fieldtrust.store.provenance`). Its JSON form (:meth:`Evidence.to_dict`,
:meth:`Evidence.from_dict`) is stable: it carries a ``format`` number that
changes when the layout does.

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
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from fieldtrust.calibration.segments import SegmentCheck
from fieldtrust.calibration.stability import VersionCheck, WeekCheck
from fieldtrust.governance.monitoring_plan import MonitoringPlan
from fieldtrust.governance.revocation import RevocationRecommendation
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.provenance import Provenance
from fieldtrust.store.retry import first_row

from fieldtrust.errors import Refused

#: Bumped when the layout of :meth:`Evidence.to_dict` changes.
EVIDENCE_FORMAT = 2


@dataclass(frozen=True)
class Certification:
    """A stratum as certified from the store for a decision (STATS.md sections 6 and 7).

    The whole stratum (every form version) over the certification window: what
    :func:`fieldtrust.governance.certification.certify` computed, never numbers
    a page or a report had cached.
    """

    candidate: bool
    reasons: tuple[str, ...]  # every failing condition, keys of calibration.candidates.REASONS
    threshold: float | None  # the certified threshold
    target: float
    confidence: float
    n_min: int
    stability_weeks: int
    window: tuple[str, ...]  # the ISO weeks certified on; () is every week in the store
    method: str
    coverage: float | None
    labels_above: int | None
    accuracy: float | None
    accuracy_low: float | None
    bound_exact_clopper_pearson: bool | None
    n_population: int
    n_labeled: int
    weeks: tuple[str, ...]  # weeks with extractions
    audit_weeks: tuple[str, ...]  # weeks of the audit samples behind the labels
    weeks_checked: tuple[WeekCheck, ...]
    form_versions: tuple[VersionCheck, ...]
    # The form versions the candidacy covers; production sends any other to a human.
    covered_versions: tuple[str, ...] = ()
    # Each form version x extractor version above the threshold on its own labels
    # (calibration.segments); empty in evidence frozen before segments existed.
    segments: tuple[SegmentCheck, ...] = ()
    # The store's policy bar when certified, with who set it and when
    # (store.bar.PolicyBar.as_dict()).
    policy: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    stricter: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # what the caller raised
    held_to: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the settings used

    @property
    def covered_segments(self) -> tuple[tuple[str, str], ...]:
        """(form_version, extractor_version) the approval covers: certified on their own
        labels, of a covered form version. Production sends any other to a human."""
        return tuple(c.key for c in self.segments
                     if c.covered and c.form_version in self.covered_versions)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (lists for tuples)."""
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        record["weeks_checked"] = [dataclasses.asdict(w) for w in self.weeks_checked]
        record["form_versions"] = [dataclasses.asdict(v) for v in self.form_versions]
        return _plain(record)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Certification:
        """Read :meth:`to_dict`'s form back (null accuracies become NaN again)."""
        values = dict(record)
        for name in ("reasons", "window", "weeks", "audit_weeks", "covered_versions"):
            values[name] = tuple(values[name])
        values["weeks_checked"] = tuple(
            WeekCheck(**_nan_for_null(w, "accuracy", "error_lower_bound"))
            for w in values["weeks_checked"]
        )
        values["form_versions"] = tuple(
            VersionCheck(**_nan_for_null(v, "accuracy", "accuracy_low"))
            for v in values["form_versions"]
        )
        values["segments"] = tuple(
            SegmentCheck(**_nan_for_null(v, "accuracy", "accuracy_low"))
            for v in values.get("segments", ())
        )
        return cls(**values)


@dataclass(frozen=True)
class AuditDesign:
    """An audit sample behind the stratum's labels: its design, seed and design sha256."""

    sample_id: str
    week: str
    version: int
    seed: int
    design_sha256: str
    design: Mapping[str, Any]  # the sampling design as stored (audit_samples.design_json)


@dataclass(frozen=True)
class Evidence:
    """What one decision rests on; frozen with it as canonical JSON."""

    doc_type: str
    field: str
    certification: Certification | None  # approve and reject
    revocation: RevocationRecommendation | None  # revoke, when later audits flagged it
    designs: tuple[AuditDesign, ...]
    provenance: Provenance
    # approve: each covered segment's monitoring chart, fixed before any later week
    monitoring: MonitoringPlan | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form: ``format``, ``stratum``, ``certification``,
        ``revocation``, ``designs``, ``code_version``, ``schema_version`` and
        ``monitoring`` (null but for an approval)."""
        return {
            "monitoring": self.monitoring.to_dict() if self.monitoring else None,
            "format": EVIDENCE_FORMAT,
            "stratum": {"doc_type": self.doc_type, "field": self.field},
            "certification": self.certification.to_dict() if self.certification else None,
            "revocation": self.revocation.to_dict() if self.revocation else None,
            "designs": [_plain(dataclasses.asdict(d)) for d in self.designs],
            "code_version": self.provenance.code_version,
            "schema_version": self.provenance.schema_version,
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Evidence:
        """Read :meth:`to_dict`'s form back; a :class:`Refused` for another format."""
        if record.get("format") != EVIDENCE_FORMAT:
            raise Refused(
                f"evidence of format {record.get('format')!r} is not format {EVIDENCE_FORMAT}:"
                " it was frozen by another fieldtrust version; read it as JSON with"
                " evidence_payload"
            )
        certification = record["certification"]
        revocation = record["revocation"]
        return cls(
            doc_type=record["stratum"]["doc_type"],
            field=record["stratum"]["field"],
            certification=Certification.from_dict(certification) if certification else None,
            revocation=RevocationRecommendation.from_dict(revocation) if revocation else None,
            designs=tuple(AuditDesign(**d) for d in record["designs"]),
            provenance=Provenance(record["code_version"], record["schema_version"]),
            monitoring=MonitoringPlan.from_dict(record["monitoring"])
            if record.get("monitoring") else None,
        )

    def to_json(self) -> str:
        """The canonical JSON text that is frozen (and hashed into the evidence id)."""
        return canonical_json(self.to_dict())


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


def _freeze(con: duckdb.DuckDBPyConnection, evidence: Evidence | Mapping[str, Any]) -> str:
    """Store ``evidence`` as a snapshot (in the caller's transaction); return its id.

    A decision's :class:`Evidence`, or the JSON-ready record another act
    rests on (a resumed segment's chart).
    """
    text = evidence.to_json() if isinstance(evidence, Evidence) else canonical_json(evidence)
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
        raise Refused(f"no evidence snapshot {evidence_id!r} in the store")
    return str(row[0])


def evidence_payload(con: duckdb.DuckDBPyConnection, evidence_id: str) -> dict[str, Any]:
    """A snapshot parsed back into Python, after checking its sha256 still matches its id."""
    text = evidence_json(con, evidence_id)
    if evidence_id_of(text) != evidence_id:
        raise Refused(
            f"evidence snapshot {evidence_id} does not hash to its id: the store was altered"
            " outside fieldtrust"
        )
    payload: dict[str, Any] = json.loads(text)
    return payload


def load_evidence(con: duckdb.DuckDBPyConnection, evidence_id: str) -> Evidence:
    """A snapshot as :class:`Evidence`, after checking its sha256 still matches its id."""
    return Evidence.from_dict(evidence_payload(con, evidence_id))


def _nan_for_null(record: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """Canonical JSON writes NaN as null; the checks hold NaN for "no labels"."""
    return {k: (math.nan if k in names and v is None else v) for k, v in record.items()}


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
    raise Refused(
        f"evidence value {value!r} of type {type(value).__name__} cannot be frozen as JSON;"
        " pass numbers, text, dates, lists or mappings"
    )
