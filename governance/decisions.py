"""Automation decisions: approve, reject or revoke a stratum at a threshold.

A decision is an append-only row naming who decided (and in which role),
when, why (the comment is required) and on which evidence: a frozen snapshot
(:mod:`fieldtrust.governance.evidence`) holding the caller's evidence (threshold, labels,
accuracy and its lower bound, weeks checked, form versions), the audit
designs behind the labels, and the fieldtrust and schema versions. The
current policy of a stratum is its latest decision: ``approve`` makes it
active at the threshold, ``reject`` and ``revoke`` leave it with none. There
is no way to edit or delete a decision: a change of mind is a new decision.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.governance.evidence import freeze
from fieldtrust.labels.errors import DecisionError
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import first_row, write_with_retry
from fieldtrust.store.rollup import extraction_columns_sql

from fieldtrust import __version__

#: What a decision can do to a stratum.
DECISION_ACTIONS: tuple[str, ...] = ("approve", "reject", "revoke")

_DECISION_COLUMNS = (
    "decision_id, doc_type, field, action, threshold, decided_by, role, comment,"
    " decided_at, evidence_id"
)


@dataclass(frozen=True)
class Decision:
    """One row of ``decisions``."""

    decision_id: str
    doc_type: str
    field: str
    action: str
    threshold: float | None
    decided_by: str
    role: str
    comment: str
    decided_at: dt.datetime
    evidence_id: str | None


@dataclass(frozen=True)
class PolicyEntry:
    """A stratum's current policy: its latest decision."""

    doc_type: str
    field: str
    status: str  # 'active' (automated above threshold) or 'none'
    threshold: float | None
    decision: Decision


def decide(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    *,
    action: str,
    doc_type: str,
    field: str,
    threshold: float | None,
    comment: str,
    evidence: Mapping[str, object],
) -> Decision:
    """Record a decision on automating (doc_type, field), with frozen evidence.

    Parameters
    ----------
    con
        Store connection.
    actor
        Who decides; needs the role manager or admin.
    action
        ``approve`` (threshold required), ``reject`` (threshold optional) or
        ``revoke`` (only an active stratum; the revoked threshold is recorded).
    doc_type, field
        The stratum; it must exist in the store.
    threshold
        Stated-confidence threshold in [0, 1] above which extractions are
        automated. For ``approve`` it must equal ``evidence["threshold"]``
        when the evidence names one.
    comment
        Why; required.
    evidence
        What the decision rests on, e.g. the ``evidence`` of
        ``calibration.candidates.automation_candidates``. Required (non-empty)
        for ``approve``. Frozen as canonical JSON with the audit designs behind
        the stratum's labels and the code version.

    Raises
    ------
    PermissionDenied
        ``actor`` is not a manager or admin.
    DecisionError
        Bad action, missing comment or evidence, threshold out of range or not
        the evidence's, unknown stratum, or revoking a stratum that is not
        active.
    """
    actor = user_name(actor, what="acting user")
    if action not in DECISION_ACTIONS:
        raise DecisionError(f"action {action!r} is not one of {', '.join(DECISION_ACTIONS)}")
    if not isinstance(comment, str) or not comment.strip():
        raise DecisionError(f"{action} of {doc_type}/{field} needs a comment saying why")
    threshold = _check_threshold(action, threshold, evidence, doc_type, field)

    def work(tx: duckdb.DuckDBPyConnection) -> Decision:
        role = require(tx, actor, "decide")
        _check_stratum(tx, doc_type, field)
        recorded = threshold
        if action == "revoke":
            recorded = _revocable_threshold(tx, doc_type, field, threshold)
        payload = {
            "stratum": {"doc_type": doc_type, "field": field},
            "evidence": dict(evidence),
            "designs": _designs(tx, doc_type, field, _weeks_in(evidence)),
            "code_version": __version__,
            "schema_version": _schema_version(tx),
        }
        decision = Decision(
            decision_id=str(uuid.uuid4()),
            doc_type=doc_type,
            field=field,
            action=action,
            threshold=recorded,
            decided_by=actor,
            role=role,
            comment=comment.strip(),
            decided_at=_after_latest(tx, doc_type, field),
            evidence_id=freeze(tx, payload),
        )
        inserted = tx.execute(
            f"INSERT INTO decisions ({_DECISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING *",
            [getattr(decision, name.strip()) for name in _DECISION_COLUMNS.split(",")],
        )
        chain_returned(tx, "decisions", inserted)
        return decision

    return write_with_retry(con, work, what=f"recording {action} of {doc_type}/{field}")


def decision_history(
    con: duckdb.DuckDBPyConnection, doc_type: str | None = None, field: str | None = None
) -> list[Decision]:
    """Every decision (optionally of one stratum), oldest first."""
    rows = con.execute(
        f"SELECT {_DECISION_COLUMNS} FROM decisions"
        " WHERE (? IS NULL OR doc_type = ?) AND (? IS NULL OR field = ?)"
        " ORDER BY decided_at, decision_id",
        [doc_type, doc_type, field, field],
    ).fetchall()
    return [Decision(*row) for row in rows]


def current_policy(con: duckdb.DuckDBPyConnection) -> list[PolicyEntry]:
    """The latest decision of every stratum ever decided, sorted by stratum."""
    rows = con.execute(
        f"SELECT {_DECISION_COLUMNS} FROM ("
        "  SELECT *, row_number() OVER (PARTITION BY doc_type, field"
        "                               ORDER BY decided_at DESC, decision_id DESC) AS rank_"
        "  FROM decisions) WHERE rank_ = 1 ORDER BY doc_type, field"
    ).fetchall()
    entries = []
    for row in rows:
        decision = Decision(*row)
        active = decision.action == "approve"
        entries.append(
            PolicyEntry(
                doc_type=decision.doc_type,
                field=decision.field,
                status="active" if active else "none",
                threshold=decision.threshold if active else None,
                decision=decision,
            )
        )
    return entries


def _check_threshold(
    action: str,
    threshold: float | None,
    evidence: Mapping[str, object],
    doc_type: str,
    field: str,
) -> float | None:
    if threshold is not None and not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
        raise DecisionError(f"threshold {threshold!r} is outside [0, 1]")
    if action != "approve":
        return threshold
    if threshold is None:
        raise DecisionError(f"approving {doc_type}/{field} needs a threshold")
    if not evidence:
        raise DecisionError(
            f"approving {doc_type}/{field} needs evidence (the calibration candidate's);"
            " see `fieldtrust candidates`"
        )
    certified = evidence.get("threshold")
    if isinstance(certified, int | float) and not math.isclose(
        float(certified), threshold, abs_tol=1e-12
    ):
        raise DecisionError(
            f"approving {doc_type}/{field} at {threshold} but the evidence certifies"
            f" {certified}: approve the certified threshold"
        )
    return float(threshold)


def _check_stratum(con: duckdb.DuckDBPyConnection, doc_type: str, field: str) -> None:
    row = first_row(con.execute(
        "SELECT 1 FROM extractions WHERE doc_type = ? AND field = ? LIMIT 1", [doc_type, field]
    ).fetchall())
    if row is None:
        raise DecisionError(
            f"no extractions of doc_type {doc_type!r}, field {field!r} in the store;"
            " check the spelling (`fieldtrust info`)"
        )


def _revocable_threshold(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, threshold: float | None
) -> float:
    active = next(
        (e for e in current_policy(con) if (e.doc_type, e.field) == (doc_type, field)), None
    )
    if active is None or active.status != "active" or active.threshold is None:
        raise DecisionError(
            f"{doc_type}/{field} is not approved for automation, so there is nothing to revoke"
        )
    if threshold is not None and not math.isclose(threshold, active.threshold, abs_tol=1e-12):
        raise DecisionError(
            f"{doc_type}/{field} is approved at {active.threshold}, not {threshold}:"
            " revoke names the active threshold (or leave it out)"
        )
    return active.threshold


def _weeks_in(evidence: Mapping[str, object]) -> list[str] | None:
    """The weeks whose audit designs the evidence rests on, or None for all of them.

    A calibration candidate's evidence (calibration.candidates) names them
    ``audit_weeks``; hand-made evidence may say ``weeks``, or list
    ``weeks_checked`` as week labels or as the stability checks' records.
    """
    for key in ("audit_weeks", "weeks", "weeks_checked"):
        weeks = evidence.get(key)
        if not isinstance(weeks, list | tuple):
            continue
        labels = [w.get("week") if isinstance(w, Mapping) else w for w in weeks]
        if all(isinstance(w, str) for w in labels):
            return [str(w) for w in labels]
    return None


def _designs(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, weeks: list[str] | None
) -> list[dict[str, Any]]:
    """The audit samples behind the stratum's labels (in ``weeks`` when given), designs included."""
    labelled = extraction_columns_sql("SELECT extraction_id FROM effective_labels")
    rows = con.execute(
        f"""
        SELECT s.sample_id, s.week, s.version, s.seed, s.design_sha256, s.design_json
        FROM audit_samples s
        WHERE ($weeks IS NULL OR s.week IN (SELECT unnest($weeks::VARCHAR[])))
          AND EXISTS (SELECT 1 FROM audit_items i
                      JOIN {labelled} e USING (extraction_id)
                      JOIN effective_labels l USING (extraction_id)
                      WHERE i.sample_id = s.sample_id
                        AND e.doc_type = $doc_type AND e.field = $field)
        ORDER BY s.week, s.version
        """,
        {"weeks": weeks, "doc_type": doc_type, "field": field},
    ).fetchall()
    return [
        {
            "sample_id": sample_id, "week": week, "version": version, "seed": seed,
            "design_sha256": sha, "design": json.loads(design_json),
        }
        for sample_id, week, version, seed, sha, design_json in rows
    ]


def _schema_version(con: duckdb.DuckDBPyConnection) -> str | None:
    row = first_row(con.execute(
        "SELECT name FROM schema_migrations ORDER BY applied_at DESC, name DESC LIMIT 1"
    ).fetchall())
    return str(row[0]) if row else None


def _after_latest(con: duckdb.DuckDBPyConnection, doc_type: str, field: str) -> dt.datetime:
    # Two decisions in the same microsecond would make "latest" ambiguous.
    row = first_row(con.execute(
        "SELECT max(decided_at) FROM decisions WHERE doc_type = ? AND field = ?",
        [doc_type, field],
    ).fetchall())
    now = utc_now()
    if row is not None and row[0] is not None and row[0] >= now:
        return row[0] + dt.timedelta(microseconds=1)  # type: ignore[no-any-return]
    return now
