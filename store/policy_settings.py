"""The policy settings an approval is held to, as the store holds them (STATS.md sections 6, 7).

An approval re-certifies a stratum at these settings, never at flags or
environment variables of whoever approves: those may make a *report*
stricter, never an approval looser. Only an admin changes them
(:func:`fieldtrust.governance.policy_settings.set_policy_settings`); each change is
a new, chained row of ``policy_settings`` and the newest row is in force. A
store without a row uses :data:`DEFAULT_POLICY`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, TypedDict

import duckdb


@dataclass(frozen=True)
class PolicySettings:
    """The bar for automation: what certification, stability and per-version checks use.

    Attributes
    ----------
    target
        Accuracy the extractions above the threshold must reach.
    confidence
        ``1 - delta`` of every certificate and test.
    n_min
        Labels the bound must use above a candidate before it is tested.
    stability_weeks
        The last K weeks of the window, each tested on its own.
    version_share
        A form version holding at least this share of the stratum above the
        threshold is *material*: it must certify on its own labels or the
        candidacy excludes it.
    min_week_labels
        Design-based labels above the threshold each stability week needs.
    prior_error
        Error rate assumed when choosing where the walk starts (label counts only).
    weeks
        The certification window: the last ``weeks`` weeks of the store.
    set_by, set_at
        Who set them and when (None for the defaults).
    """

    target: float = 0.95
    confidence: float = 0.95
    n_min: int = 100
    stability_weeks: int = 4
    version_share: float = 0.05
    min_week_labels: int = 50
    prior_error: float = 0.03
    weeks: int = 8
    set_by: str | None = None
    set_at: dt.datetime | None = None

    def values(self) -> dict[str, Any]:
        """The settings without who set them: what evidence records."""
        out = dataclasses.asdict(self)
        out.pop("set_by")
        out.pop("set_at")
        return out

    def as_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        out = dataclasses.asdict(self)
        out["set_at"] = self.set_at.isoformat() if self.set_at else None
        return out


#: What a store without a ``policy_settings`` row uses.
DEFAULT_POLICY = PolicySettings()

#: Setting names an admin can change, in table order.
POLICY_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(PolicySettings) if f.name not in ("set_by", "set_at")
)


class PolicyChanges(TypedDict, total=False):
    """Some of the :data:`POLICY_FIELDS`, each of its setting's type: a change or a request."""

    target: float
    confidence: float
    n_min: int
    stability_weeks: int
    version_share: float
    min_week_labels: int
    prior_error: float
    weeks: int


def current_policy_settings(con: duckdb.DuckDBPyConnection) -> PolicySettings:
    """The settings in force: the newest ``policy_settings`` row, else :data:`DEFAULT_POLICY`."""
    columns = ", ".join(POLICY_FIELDS)
    rows = con.execute(
        f"SELECT {columns}, set_by, set_at FROM policy_settings"
        " ORDER BY set_at DESC, setting_id DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return DEFAULT_POLICY
    return PolicySettings(*rows[0])
