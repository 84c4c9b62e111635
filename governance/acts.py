"""The governance acts: approve, reject and revoke automation of a stratum, resume a segment.

One library call per act, the same for the CLI, the dashboard and any script.
Each act computes its evidence from the store itself, never from what a
caller cached: approving and rejecting certify the whole stratum afresh at
the store's policy bar (:func:`fieldtrust.governance.certification.certify`;
a caller's settings may only make it stricter), revoking attaches the
revocation recommendation later audits give, if any
(:func:`fieldtrust.governance.revocation.revocation_recommendations`). A
manager approves what was certified, nothing else: the stratum must be a
current candidate and the threshold is at or above the certified one.

The writer every act ends in, :func:`_record`, is private: a decision cannot
be recorded on evidence its act did not compute.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from typing import Any

import duckdb
from fieldtrust.governance.certification import certify, reason_text
from fieldtrust.governance.decisions import (
    DECISION_ACTIONS,
    DECISION_COLUMNS,
    Decision,
    current_policy,
)
from fieldtrust.governance.duties import check_own_labels, own_labels
from fieldtrust.governance.evidence import (
    AuditDesign,
    Certification,
    Evidence,
    _freeze,  # the acts alone freeze evidence
)
from fieldtrust.governance.monitoring import SegmentMonitor, monitor_approvals
from fieldtrust.governance.monitoring_plan import MonitoringPlan, plan_monitoring
from fieldtrust.governance.revocation import RevocationRecommendation, revocation_recommendations
from fieldtrust.store.access import require, user_name
from fieldtrust.store.bar import Criteria, resolve_bar
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.open_reviews import open_adjudications
from fieldtrust.store.provenance import provenance
from fieldtrust.store.retry import first_row, write_with_retry
from fieldtrust.store.rollup import extraction_columns_sql
from fieldtrust.store.signing import current_signer

from fieldtrust.errors import Refused


def approve(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    comment: str,
    *,
    criteria: Criteria | None = None,
    threshold: float | None = None,
) -> Decision:
    """Approve automation of (doc_type, field) at or above the threshold certified from the store.

    The whole stratum is certified afresh at the store's policy bar
    (:func:`fieldtrust.store.bar.resolve_bar`; only an admin changes the
    policy), over the policy's window.

    Parameters
    ----------
    actor
        A manager or admin.
    doc_type, field
        The stratum (every form version of it).
    comment
        Why; required.
    criteria
        What the caller's settings ask for: only stricter than the store's
        policy (refused when looser); None asks nothing.
    threshold
        If given, it must be at or above the certified threshold (a guard
        against approving a number read off an older report, another scope or
        a page's filters); it is the threshold recorded. Default: the
        certified one.

    Raises
    ------
    PermissionDenied
        ``actor`` may not decide.
    Refused
        No comment, an unknown stratum, criteria looser than the store's
        policy, a stratum that is not a current candidate (the reason is
        named), open adjudications in the stratum (an approval waits for
        them), ``threshold`` is below the certified one, or ``actor`` gave a
        larger share of the stratum's labels than the policy's
        ``max_own_label_share`` (:mod:`fieldtrust.governance.duties`).
    """
    actor = _before_certifying(con, actor, "approve", doc_type, field, comment, threshold=threshold)
    certification = certify(con, doc_type, field, criteria)
    if not certification.candidate or certification.threshold is None:
        raise Refused(
            f"{doc_type}/{field} is not an automation candidate ({reason_text(certification)})"
            " as a whole stratum at the store's policy settings; it cannot be approved"
        )
    # After the certificate: a stratum that is no candidate is told so first, whatever waits.
    _check_no_open_adjudications(con, doc_type, field)
    if threshold is not None and threshold < certification.threshold - 1e-12:
        raise Refused(
            f"{doc_type}/{field} is certified at {certification.threshold} for the whole"
            f" stratum; {threshold} is below it: approve at or above the certified threshold"
            " (re-run `fieldtrust candidates` for fresh numbers)"
        )
    if not certification.covered_segments:
        raise Refused(
            f"{doc_type}/{field}: no form version x extractor version above"
            f" {certification.threshold} certifies on its own labels (a new extractor version"
            " has no evidence yet); audit its extractions, then approve"
        )
    # Segregation of duties, on the labels the certificate just read.
    check_own_labels(own_labels(con, actor, doc_type, field, certification.window),
                     resolve_bar(con, criteria))
    recorded = certification.threshold if threshold is None else threshold
    monitoring = plan_monitoring(certification.segments, certification.covered_segments,
                                 target=certification.target,
                                 weeks=len(certification.weeks))
    return _record(con, actor, "approve", doc_type, field, recorded, comment,
                   certification=certification, monitoring=monitoring)


def reject(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    comment: str,
    *,
    criteria: Criteria | None = None,
    threshold: float | None = None,
) -> Decision:
    """Reject automation of (doc_type, field); the stratum's certification now is the evidence.

    ``threshold`` (optional, in [0, 1]) names the threshold that was turned
    down; it is recorded as given. Raises as :func:`approve`, except that any
    stratum can be rejected, candidate or not.
    """
    actor = _before_certifying(con, actor, "reject", doc_type, field, comment, threshold=threshold)
    certification = certify(con, doc_type, field, criteria)
    return _record(con, actor, "reject", doc_type, field, threshold, comment,
                   certification=certification)


def revoke(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    comment: str,
    *,
    criteria: Criteria | None = None,
    threshold: float | None = None,
) -> Decision:
    """Revoke the approval of (doc_type, field); later audits' recommendation is the evidence.

    The evidence holds the stratum's revocation recommendation (at the store's
    policy bar, or the stricter one ``criteria`` asks for; a looser ask is not
    refused, since revoking loosens nothing, but not used either) when its
    audits since the approval flag it, and none otherwise: a manager may
    revoke on other grounds, said in the comment.
    ``threshold``, if given, must be the active one; the active threshold is
    recorded.

    Raises
    ------
    PermissionDenied
        ``actor`` may not decide.
    Refused
        No comment, or the stratum is not approved (nothing to revoke).
    """
    actor = _before_certifying(con, actor, "revoke", doc_type, field, comment, threshold=threshold)
    bar = resolve_bar(con, criteria).policy_or_stricter()
    flagged = next(
        (r for r in revocation_recommendations(con, bar)
         if (r.doc_type, r.field) == (doc_type, field)),
        None,
    )
    return _record(con, actor, "revoke", doc_type, field, threshold, comment, revocation=flagged)


def resume(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    form_version: str,
    extractor_version: str,
    comment: str,
) -> SegmentMonitor:
    """Resume a segment its monitoring chart suspended; the chart starts again after the alarm.

    The person's answer to an alarm when revoking is not warranted (a known,
    fixed cause, say in the comment). Recorded append-only in
    ``monitoring_resumptions`` with the chart as the person saw it frozen as
    evidence. Returns the segment's monitor as it is after resuming.

    Raises
    ------
    PermissionDenied
        ``actor`` may not decide.
    Refused
        No comment, or the segment is not a suspended segment of an approved stratum.
    """
    actor = _before_certifying(con, actor, "resume", doc_type, field, comment)
    key = (doc_type, field, form_version, extractor_version)

    def work(tx: duckdb.DuckDBPyConnection) -> str:
        role = require(tx, actor, "decide")
        found = next((m for m in monitor_approvals(tx)
                      if (m.doc_type, m.field, m.form_version, m.extractor_version) == key), None)
        if found is None or not found.suspended or found.state is None:
            raise Refused(
                f"{doc_type}/{field} form version {form_version!r} x extractor version"
                f" {extractor_version!r} is not suspended, so there is nothing to resume"
                " (`fieldtrust monitor` lists the segments)"
            )
        evidence_id = _freeze(tx, found.to_dict())
        inserted = tx.execute(
            "INSERT INTO monitoring_resumptions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING *",
            [str(uuid.uuid4()), found.decision_id, doc_type, field, form_version,
             extractor_version, found.state.alarm_week, actor, role, comment.strip(),
             utc_now(), evidence_id],
        )
        chain_returned(tx, "monitoring_resumptions", inserted)
        return found.decision_id

    write_with_retry(con, work, what=f"resuming {doc_type}/{field} {form_version}")
    return next(m for m in monitor_approvals(con)
                if (m.doc_type, m.field, m.form_version, m.extractor_version) == key)


def _before_certifying(
    con: duckdb.DuckDBPyConnection, actor: str, action: str, doc_type: str, field: str,
    comment: str, *, threshold: float | None = None,
) -> str:
    """The checks that need no certification, made before its cost: name, comment, role, range."""
    actor = user_name(actor, what="acting user")
    _check_comment(action, doc_type, field, comment)
    require(con, actor, "decide")
    _check_range(threshold)
    return actor


def _record(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    action: str,
    doc_type: str,
    field: str,
    threshold: float | None,
    comment: str,
    *,
    certification: Certification | None = None,
    revocation: RevocationRecommendation | None = None,
    monitoring: MonitoringPlan | None = None,
) -> Decision:
    """Write one decision and freeze its evidence, in one transaction (retried on conflict).

    The role is checked again inside the transaction, as are the stratum and,
    for a revocation, the active threshold. The evidence adds to what the act
    computed the audit designs behind the stratum's labels and the code and
    schema versions.
    """
    actor = user_name(actor, what="acting user")
    # The decision's chain entry is signed as it is written (store.signing): without the
    # key the act is refused here, before its transaction.
    current_signer()
    if action not in DECISION_ACTIONS:
        raise Refused(f"action {action!r} is not one of {', '.join(DECISION_ACTIONS)}")
    _check_comment(action, doc_type, field, comment)
    _check_range(threshold)
    if action == "approve":
        _check_certified(doc_type, field, threshold, certification)

    def work(tx: duckdb.DuckDBPyConnection) -> Decision:
        role = require(tx, actor, "decide")
        _check_stratum(tx, doc_type, field)
        recorded = threshold
        if action == "revoke":
            recorded = _revocable_threshold(tx, doc_type, field, threshold)
        evidence = Evidence(
            doc_type=doc_type,
            field=field,
            certification=certification,
            revocation=revocation,
            designs=_designs(tx, doc_type, field, _weeks_of(certification, revocation)),
            provenance=provenance(tx),
            monitoring=monitoring,
        )
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
            evidence_id=_freeze(tx, evidence),
        )
        inserted = tx.execute(
            f"INSERT INTO decisions ({DECISION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING *",
            [getattr(decision, name.strip()) for name in DECISION_COLUMNS.split(",")],
        )
        chain_returned(tx, "decisions", inserted)
        return decision

    return write_with_retry(con, work, what=f"recording {action} of {doc_type}/{field}")


def _check_no_open_adjudications(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str
) -> None:
    """An approval waits while the stratum has disagreements no qa_lead has settled.

    An open disagreement is a verdict still to come; approving before it lets
    the order of settling steer the certificate (issue 23, must-have 8).
    """
    waiting = open_adjudications(con, doc_type, field)
    if waiting:
        raise Refused(
            f"{doc_type}/{field} has {len(waiting)} reviewed items waiting for adjudication"
            f" (first: {waiting[0]}); an approval waits until a qa_lead settles them"
            " (`fieldtrust adjudicate --queue`, `fieldtrust rekey --queue`)"
        )


def _check_comment(action: str, doc_type: str, field: str, comment: str) -> None:
    if not isinstance(comment, str) or not comment.strip():
        raise Refused(f"{action} of {doc_type}/{field} needs a comment saying why")


def _check_range(threshold: float | None) -> None:
    if threshold is not None and not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
        raise Refused(f"threshold {threshold!r} is outside [0, 1]")


def _check_certified(
    doc_type: str, field: str, threshold: float | None, certification: Certification | None
) -> None:
    if certification is None or certification.threshold is None:
        raise Refused(
            f"approving {doc_type}/{field} needs its certification; see `fieldtrust candidates`"
        )
    if threshold is None:
        raise Refused(f"approving {doc_type}/{field} needs a threshold")
    if threshold < certification.threshold - 1e-12:
        raise Refused(
            f"approving {doc_type}/{field} at {threshold} but the evidence certifies"
            f" {certification.threshold}: approve at or above the certified threshold"
        )


def _check_stratum(con: duckdb.DuckDBPyConnection, doc_type: str, field: str) -> None:
    row = first_row(con.execute(
        "SELECT 1 FROM extractions WHERE doc_type = ? AND field = ? LIMIT 1", [doc_type, field]
    ).fetchall())
    if row is None:
        raise Refused(
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
        raise Refused(
            f"{doc_type}/{field} is not approved for automation, so there is nothing to revoke"
        )
    if threshold is not None and not math.isclose(threshold, active.threshold, abs_tol=1e-12):
        raise Refused(
            f"{doc_type}/{field} is approved at {active.threshold}, not {threshold}:"
            " revoke names the active threshold (or leave it out)"
        )
    return active.threshold


def _weeks_of(
    certification: Certification | None, revocation: RevocationRecommendation | None
) -> list[str] | None:
    """The weeks whose audit designs the evidence rests on, or None for all of them."""
    if certification is not None:
        return list(certification.audit_weeks)
    if revocation is not None:
        return [check.week for check in revocation.weeks]
    return None


def _designs(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, weeks: list[str] | None
) -> tuple[AuditDesign, ...]:
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
    designs: list[AuditDesign] = []
    for sample_id, week, version, seed, sha, design_json in rows:
        design: dict[str, Any] = json.loads(design_json)
        designs.append(AuditDesign(sample_id, week, version, seed, sha, design))
    return tuple(designs)


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
