"""Which recalibration maps are in force, and what they were fitted on.

:func:`fieldtrust.calibration.recalibrate.fit_recalibration` stores a map per stratum
each time it runs; the newest map of a stratum is its current one (view
``current_recalibration_maps``). :func:`current_maps` lists them with what
was recorded at fitting time (method, labels, ECE before and after on the
held-out folds), so a QA lead can see which strata are recalibrated and how
much it helped without refitting. The knots of one map come from
:func:`fieldtrust.calibration.recalibrate.stored_map`.

This module reads only; it imports neither numpy nor scikit-learn.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb


@dataclass(frozen=True)
class MapSummary:
    """A stratum's current recalibration map, without its knots."""

    doc_type: str
    field: str
    map_id: str
    method: str  # 'isotonic', 'platt' or 'identity'
    n_labels: int
    cv_score: float | None  # cross-validated design-weighted Brier score of the method
    ece_before: float | None  # stated confidence, held-out folds
    ece_after: float | None  # this map, out-of-fold predictions
    fitted_at: dt.datetime
    n_knots: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


def current_maps(con: duckdb.DuckDBPyConnection) -> list[MapSummary]:
    """Every stratum's current recalibration map with its recorded metadata.

    Returns
    -------
    list of MapSummary
        One per stratum that has a map, sorted by doc_type then field; empty
        before the first ``fieldtrust recalibrate``.

    References
    ----------
    ECE and the cross-validated Brier score are those of
    :func:`fieldtrust.calibration.recalibrate.choose_map` (STATS.md section 5).
    """
    rows = con.execute(
        """
        SELECT m.doc_type, m.field, m.map_id, m.method, m.n_labels, m.cv_score,
               m.ece_before, m.ece_after, m.fitted_at,
               (SELECT count(*) FROM recalibration_knots k WHERE k.map_id = m.map_id)
        FROM current_recalibration_maps m
        ORDER BY m.doc_type, m.field
        """
    ).fetchall()
    return [
        MapSummary(str(d), str(f), str(map_id), str(method), int(n), cv, before, after, at,
                   int(knots))
        for d, f, map_id, method, n, cv, before, after, at, knots in rows
    ]
