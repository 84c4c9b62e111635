"""Automation decisions as recorded: the history and the current policy.

A decision is an append-only row naming who decided (and in which role),
when, why (the comment is required) and on which evidence (a frozen
:class:`fieldtrust.governance.evidence.Evidence`). Decisions are made only by
the acts of :mod:`fieldtrust.governance.acts` (``approve``, ``reject``,
``revoke``), which compute that evidence from the store. The current policy
of a stratum is its latest decision: ``approve`` makes it active at the
threshold, ``reject`` and ``revoke`` leave it with none. There is no way to
edit or delete a decision: a change of mind is a new decision.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb

#: What a decision can do to a stratum.
DECISION_ACTIONS: tuple[str, ...] = ("approve", "reject", "revoke")

DECISION_COLUMNS = (
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

    def to_dict(self) -> dict[str, Any]:
        """The stratum's policy with its latest decision, flat (the decision time a datetime)."""
        return {
            "doc_type": self.doc_type, "field": self.field, "status": self.status,
            "threshold": self.threshold, "last_action": self.decision.action,
            "decided_by": self.decision.decided_by, "decided_at": self.decision.decided_at,
            "evidence_id": self.decision.evidence_id,
        }


def decision_history(
    con: duckdb.DuckDBPyConnection, doc_type: str | None = None, field: str | None = None
) -> list[Decision]:
    """Every decision (optionally of one stratum), oldest first."""
    rows = con.execute(
        f"SELECT {DECISION_COLUMNS} FROM decisions"
        " WHERE (? IS NULL OR doc_type = ?) AND (? IS NULL OR field = ?)"
        " ORDER BY decided_at, decision_id",
        [doc_type, doc_type, field, field],
    ).fetchall()
    return [Decision(*row) for row in rows]


def current_policy(
    con: duckdb.DuckDBPyConnection, *, up_to_seq: int | None = None
) -> list[PolicyEntry]:
    """The latest decision of every stratum ever decided, sorted by stratum.

    Read from the view ``policy_in_force`` (migration 0025), which the review
    queue reads too. With ``up_to_seq``, the policy as it stood at that
    history chain entry: of the decisions chained at or before it (what a
    policy file with that ``history_head`` was exported from).
    """
    params: dict[str, int] = {}
    if up_to_seq is None:
        query = (f"SELECT {DECISION_COLUMNS}, automated_above FROM policy_in_force"
                 " ORDER BY doc_type, field")
    else:
        query = (
            f"SELECT {DECISION_COLUMNS},"
            "  CASE WHEN action = 'approve' THEN threshold END AS automated_above FROM ("
            "  SELECT *, row_number() OVER (PARTITION BY doc_type, field"
            "                               ORDER BY decided_at DESC, decision_id DESC) AS rank_"
            "  FROM decisions"
            "  WHERE decision_id IN (SELECT json_extract_string(row_key, '$[0]')"
            "                        FROM history_chain"
            "                        WHERE table_name = 'decisions' AND seq <= $seq))"
            " WHERE rank_ = 1 ORDER BY doc_type, field"
        )
        params = {"seq": up_to_seq}
    rows = con.execute(query, params).fetchall()
    entries = []
    for *columns, automated_above in rows:
        decision = Decision(*columns)
        entries.append(
            PolicyEntry(
                doc_type=decision.doc_type,
                field=decision.field,
                status="active" if decision.action == "approve" else "none",
                threshold=automated_above,
                decision=decision,
            )
        )
    return entries
