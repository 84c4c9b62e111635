"""The weekly audit report: trend per stratum, overall per week, alerts of the last week."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from fieldtrust.calibration.figures import interval_note
from fieldtrust.sampling.alerts import (
    LOOKBACK,
    Alert,
    alert_weeks,
    alerts_from_tests,
    false_alert_note,
    week_tests,
)
from fieldtrust.sampling.estimates import audit_labels, empty_estimates, estimate_labels
from fieldtrust.store.scope import Scope, last_weeks


@dataclass(frozen=True)
class AuditReport:
    """What `fieldtrust report` shows.

    ``trend`` has one row per (week, doc_type, field) with labels; ``overall``
    one row per week (shown beside the strata, never alone: STATS.md
    section 1); ``alerts`` are those of the last week.
    """

    weeks: tuple[str, ...]
    trend: pa.Table  # columns of sampling.estimates.estimate_labels
    overall: pa.Table
    alerts: list[Alert]
    alert_note: str = ""  # how many false alerts to expect, at the level used

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust report --json`` prints), tables as lists of rows.

        Each row of ``trend`` and ``overall`` adds ``interval_note``: why its
        interval says nothing (:func:`fieldtrust.calibration.figures.interval_note`), or null.
        """
        return {
            "weeks": list(self.weeks),
            "trend": _with_notes(self.trend),
            "overall": _with_notes(self.overall),
            "alerts": [dataclasses.asdict(a) for a in self.alerts],
            "alert_note": self.alert_note,
        }


def _with_notes(table: pa.Table) -> list[dict[str, Any]]:
    return [
        {**row, "interval_note": interval_note(row["lower"], row["upper"], row["n"], row["n_eff"])}
        for row in table.to_pylist()
    ]


def audit_report(
    con: duckdb.DuckDBPyConnection,
    *,
    weeks: int = 8,
    target: float = 0.95,
    confidence: float = 0.95,
    lookback: int = LOOKBACK,
) -> AuditReport:
    """Trends over the last ``weeks`` sampled weeks and the alerts of the newest one."""
    rows = con.sql("SELECT max(week) FROM audit_samples").fetchall()
    latest = rows[0][0] if rows else None
    if latest is None:
        return AuditReport((), empty_estimates(("week", "doc_type", "field")),
                           empty_estimates(("week",)), [])
    window = last_weeks(con, weeks, until=latest)
    # One read of the labels serves the trend and the alerts.
    labels = audit_labels(
        con, Scope(weeks=tuple(sorted({*window, *alert_weeks(latest, lookback)})))
    )
    trend = estimate_labels(
        con, labels, by=("week", "doc_type", "field"), confidence=confidence, weeks=window
    )
    overall = estimate_labels(con, labels, by=("week",), confidence=confidence, weeks=window)
    # One run of the week's tests gives the alerts and the count their note needs.
    tests = week_tests(con, labels, latest, target=target, confidence=confidence,
                       lookback=lookback)
    alerts = alerts_from_tests(tests, confidence=confidence)
    note = false_alert_note(len(tests), confidence)
    return AuditReport(window, trend, overall, alerts, note)
