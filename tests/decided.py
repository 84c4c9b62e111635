"""Decisions for test stores too small to certify: recorded on a stated certification.

Production code approves only through ``fieldtrust.governance.acts.approve``,
which certifies from the store; fixtures that need an approved stratum on a
handful of rows call the acts' private writer with a certification they state.
"""

from __future__ import annotations

from typing import Any

import duckdb
from fieldtrust.governance.acts import _record
from fieldtrust.governance.decisions import Decision
from fieldtrust.governance.evidence import Certification
from fieldtrust.governance.monitoring_plan import MonitoringPlan


def certification(threshold: float | None = 0.95, **changes: Any) -> Certification:
    """A candidate's certification at ``threshold``; ``changes`` override any field."""
    fields: dict[str, Any] = {
        "candidate": True, "reasons": (), "threshold": threshold, "target": 0.95,
        "confidence": 0.95, "n_min": 100, "stability_weeks": 4, "window": (),
        "method": "stated by a test", "coverage": 0.5, "labels_above": 412, "accuracy": 0.987,
        "accuracy_low": 0.962, "bound_exact_clopper_pearson": True, "n_population": 824,
        "n_labeled": 412, "weeks": (), "audit_weeks": (), "weeks_checked": (),
        "form_versions": (), "covered_versions": ("v1",),
    }
    fields.update(changes)
    return Certification(**fields)


def approve_as_stated(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    threshold: float | None,
    comment: str = "certified in the test",
    *,
    certified: float | None = None,
    monitoring: MonitoringPlan | None = None,
    **changes: Any,
) -> Decision:
    """Approve (doc_type, field) at ``threshold`` on :func:`certification`'s evidence,
    which certifies ``certified`` (default: ``threshold``), with the ``monitoring``
    plan stated too (default: none, an approval from before monitoring)."""
    stated = certification(threshold if certified is None else certified, **changes)
    return _record(con, actor, "approve", doc_type, field, threshold, comment,
                   certification=stated, monitoring=monitoring)
