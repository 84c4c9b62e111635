"""Approving a calibration candidate: the glue between calibration and decisions.

A manager approves what calibration certified, nothing else: the stratum must
be a current automation candidate (``calibration.candidates``), the threshold
is the certified one, and the candidate's evidence is what gets frozen.
calibration is imported only when an approval is made, so the rest of
``labels`` works without it.
"""

from __future__ import annotations

import dataclasses
import math

import duckdb
from fieldtrust.governance.decisions import Decision, decide
from fieldtrust.labels.errors import DecisionError
from fieldtrust.store.access import require, user_name
from fieldtrust.store.scope import Scope


def approve_candidate(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    comment: str,
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    n_min: int = 100,
    stability_weeks: int = 4,
    scope: Scope = Scope(),
    threshold: float | None = None,
) -> Decision:
    """Approve automation of (doc_type, field) at its certified threshold.

    Parameters
    ----------
    con
        Store connection.
    actor
        A manager or admin.
    doc_type, field
        The stratum.
    comment
        Why; required.
    target, confidence, n_min, stability_weeks, scope
        Passed to ``calibration.candidates.automation_candidates`` (the
        certification window is ``scope.weeks``).
    threshold
        If given, it must equal the certified threshold (a guard against
        approving a number read off an older report).

    Raises
    ------
    PermissionDenied
        ``actor`` may not decide.
    DecisionError
        The stratum is not a current candidate (the reason is named), or
        ``threshold`` is not the certified one.
    """
    actor = user_name(actor, what="acting user")
    require(con, actor, "decide")  # before the costly certification
    from fieldtrust.calibration.candidates import REASONS, automation_candidates

    narrowed = dataclasses.replace(scope, doc_types=(doc_type,), fields=(field,))
    assessments = automation_candidates(
        con, narrowed, target=target, confidence=confidence, n_min=n_min,
        stability_weeks=stability_weeks,
    )
    match = next((a for a in assessments if (a.doc_type, a.field) == (doc_type, field)), None)
    if match is None:
        raise DecisionError(f"no stratum {doc_type}/{field} in the store; check the spelling")
    if not match.candidate or match.threshold is None:
        why = REASONS.get(match.reason or "", match.reason or "not certified")
        raise DecisionError(
            f"{doc_type}/{field} is not an automation candidate ({why}); it cannot be approved"
        )
    if threshold is not None and not math.isclose(threshold, match.threshold, abs_tol=1e-12):
        raise DecisionError(
            f"{doc_type}/{field} is certified at {match.threshold}, not {threshold}: approve the"
            " certified threshold (re-run `fieldtrust candidates` for fresh numbers)"
        )
    return decide(
        con, actor, action="approve", doc_type=doc_type, field=field,
        threshold=match.threshold, comment=comment, evidence=match.evidence,
    )
