"""Design-weighted accuracy from audit labels: per cell, stratum, form version, week.

The probability sample of a week is its *current* (newest) sample version.
The estimates use the labels on its items: they read every label through
:func:`fieldtrust.store.labelled.labelled_items` and keep those in the
labelled PRN prefix of their cell in the current sample of the week
(provenance ``audit``, ``from_audit``), where it has a cell and a known ``N_h``;
``m_h`` is then the prefix's labels, a simple random sample of the cell. Labels
from the review queue or from one-off imports are chosen by other rules
(lowest confidence first, say); mixing them in would bias the figures
(STATS.md section 2), so they count elsewhere (calibration) but not here.

Strata are the cells of each week's sample; a window of several weeks keeps
each week's cells as separate strata. The arithmetic lives in
:mod:`fieldtrust.sampling.stratified`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.sampling.stratified import ProportionEstimate, domain_estimates
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope
from fieldtrust.store.sql import quote_ident

from fieldtrust.errors import InputError

#: What an estimate can be broken down by.
GROUPINGS = ("week", "doc_type", "field", "form_version", "band", "version_status", "cell")

ESTIMATE_COLUMNS = [
    "estimate",
    "lower",
    "upper",
    "std_error",
    "n",
    "n_eff",
    "population",
    "strata",
    "unweighted",
]

#: Arrow types of :data:`ESTIMATE_COLUMNS` (the grouping columns are text).
_ESTIMATE_TYPES = {name: pa.int64() if name in ("n", "strata") else pa.float64()
                   for name in ESTIMATE_COLUMNS}

_VIEW = "_fieldtrust_scoped_labels"

# Labels carry the sample they count in (the week's current sample,
# store.labelled): the newest version holding a verdict.
_AUDIT_LABELS_SQL = f"""
SELECT l.extraction_id, l.week, i.sample_id, i.cell, l.doc_type, l.field, l.form_version,
       c.band, c.version_status, c.n_population, l.correct::INTEGER AS correct,
       (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], l.form_version)) AS in_scope
FROM {_VIEW} l
JOIN audit_items i ON i.sample_id = l.sample_id AND i.extraction_id = l.extraction_id
JOIN audit_cells c ON c.sample_id = i.sample_id AND c.cell = i.cell
"""


def audit_labels(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """Labels on current-sample items in ``scope``, with their stratum.

    Columns: extraction_id, week, sample_id, cell, doc_type, field,
    form_version, band, version_status, n_population (``N_h`` of the cell),
    correct (0/1), in_scope. Form versions are not a cell dimension, so a
    scope naming form versions keeps every label of the cells (they set the
    cell's weights) and marks the ones in scope.
    """
    cell_scope = Scope(weeks=scope.weeks, doc_types=scope.doc_types, fields=scope.fields)
    everything = labelled_items(con, cell_scope)
    # Only each cell's labelled PRN prefix is a random sample of it (STATS.md 10).
    labels = everything.filter(everything.column("from_audit"))
    versions = list(scope.form_versions)
    con.register(_VIEW, labels)
    try:
        return con.sql(_AUDIT_LABELS_SQL, params=[versions, versions]).to_arrow_table()
    finally:
        con.unregister(_VIEW)


def estimate_table(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    by: Sequence[str] = ("doc_type", "field"),
    confidence: float = 0.95,
) -> pa.Table:
    """Design-weighted accuracy of each group over all weeks of ``scope``.

    Parameters
    ----------
    scope
        Weeks, document types, fields and form versions to look at.
    by
        Columns to group by, from :data:`GROUPINGS`; ``()`` gives one row.
    confidence
        Level of the two-sided Korn-Graubard interval.

    Returns
    -------
    pyarrow.Table
        The ``by`` columns, then estimate, lower, upper, std_error, n
        (labels), n_eff (Korn-Graubard effective size), population (estimated
        extractions covered), strata, unweighted (raw share correct, for
        contrast only: it over-counts boosted cells). One row per group with
        labels, sorted by the ``by`` columns.

    References
    ----------
    Cochran (1977), Sampling Techniques, 5.2; Korn & Graubard (1998);
    STATS.md sections 2 and 3.
    """
    return estimate_labels(con, audit_labels(con, scope), by=by, confidence=confidence)


def estimate_labels(
    con: duckdb.DuckDBPyConnection,
    labels: pa.Table,
    *,
    by: Sequence[str] = ("doc_type", "field"),
    confidence: float = 0.95,
    weeks: Sequence[str] | None = None,
) -> pa.Table:
    """:func:`estimate_table` on labels already read by :func:`audit_labels`.

    ``weeks`` restricts to some of their weeks, so several windows can be
    estimated from one read (the alerts do).
    """
    frame = _estimates(con, labels, _checked_grouping(by), confidence, weeks)
    return pa.Table.from_pandas(frame, schema=_estimate_schema(by), preserve_index=False)


def estimate_frame(
    con: duckdb.DuckDBPyConnection, labels: pa.Table, **options: Any
) -> pd.DataFrame:
    """:func:`estimate_labels` (the same options) as a pandas frame, for this package's alerts."""
    return estimate_labels(con, labels, **options).to_pandas()


def empty_estimates(by: Sequence[str] = ("doc_type", "field")) -> pa.Table:
    """An :func:`estimate_labels` table without rows (nothing labelled yet)."""
    return _estimate_schema(by).empty_table()


def _estimate_schema(by: Sequence[str]) -> pa.Schema:
    """The grouping columns (text), then :data:`ESTIMATE_COLUMNS` with their types."""
    return pa.schema([(name, pa.string()) for name in _checked_grouping(by)]
                     + list(_ESTIMATE_TYPES.items()))


def _estimates(
    con: duckdb.DuckDBPyConnection, labels: pa.Table, columns: list[str], confidence: float,
    weeks: Sequence[str] | None,
) -> pd.DataFrame:
    """The rows of :func:`estimate_labels`, grouped by ``columns`` (checked)."""
    strata = _stratum_counts(con, labels, columns, weeks)
    if strata.empty:
        return pd.DataFrame(columns=[*columns, *ESTIMATE_COLUMNS])
    if columns:
        grouped = strata.groupby(columns, sort=True, dropna=False)
        groups = grouped.ngroup().to_numpy()
        keys = grouped.size().reset_index()[columns]
    else:
        groups = np.zeros(len(strata), dtype=np.int64)
        keys = pd.DataFrame(index=[0])
    result = domain_estimates(
        groups,
        strata["n_population"],
        strata["m_h"],
        strata["m_hd"],
        strata["k_hd"],
        n_groups=len(keys),
        confidence=confidence,
    )
    frame = keys.reset_index(drop=True)
    for name in ("estimate", "lower", "upper"):
        frame[name] = result[name]
    frame["std_error"] = np.sqrt(result["variance"])
    frame["n"] = result["n"]
    frame["n_eff"] = result["n_eff"]
    frame["population"] = result["population"]
    frame["strata"] = result["strata"]
    correct = np.bincount(groups, strata["k_hd"].to_numpy(dtype=np.float64), minlength=len(keys))
    frame["unweighted"] = correct / np.maximum(result["n"], 1)
    return frame


def weekly_estimates(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    by: Sequence[str] = ("doc_type", "field"),
    confidence: float = 0.95,
) -> pa.Table:
    """The weekly trend: :func:`estimate_table` grouped by week first, then ``by``.

    Each row is one week's design-weighted accuracy of one group, from that
    week's current sample only.
    """
    columns = [c for c in by if c != "week"]
    return estimate_table(con, scope, by=("week", *columns), confidence=confidence)


def overall_estimate(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    confidence: float = 0.95,
) -> ProportionEstimate:
    """Accuracy of everything in ``scope``, all weeks and cells as strata.

    Show it beside the worst strata, never alone (STATS.md section 1).
    """
    table = estimate_table(con, scope, by=(), confidence=confidence).to_pandas()
    if table.empty:
        nan = float("nan")
        return ProportionEstimate(nan, nan, nan, nan, 0, 0.0, 0.0, 0)
    row = table.iloc[0]
    return ProportionEstimate(
        estimate=float(row["estimate"]),
        variance=float(row["std_error"]) ** 2,
        lower=float(row["lower"]),
        upper=float(row["upper"]),
        n=int(row["n"]),
        n_eff=float(row["n_eff"]),
        population=float(row["population"]),
        strata=int(row["strata"]),
    )


def _checked_grouping(by: Sequence[str]) -> list[str]:
    if isinstance(by, str):
        by = (by,)
    unknown = [c for c in by if c not in GROUPINGS]
    if unknown:
        raise InputError(
            f"cannot group estimates by {unknown[0]!r}; choose from {', '.join(GROUPINGS)}"
        )
    return list(dict.fromkeys(by))


def _stratum_counts(
    con: duckdb.DuckDBPyConnection, labels: pa.Table, by: list[str], weeks: Sequence[str] | None
) -> pd.DataFrame:
    """One row per (stratum, group): N_h, m_h (all labels of the stratum), m_hd, k_hd."""
    if labels.num_rows == 0:
        return pd.DataFrame(columns=[*by, "n_population", "m_h", "m_hd", "k_hd"])
    keys = "".join(f"{quote_ident(c)}, " for c in by)
    chosen = list(weeks) if weeks is not None else None
    view = "_fieldtrust_audit_labels"
    con.register(view, labels)
    try:
        return (
            con.sql(
                f"""
            WITH chosen AS (
                SELECT * FROM {view} WHERE ?::VARCHAR[] IS NULL OR list_contains(?, week)
            ),
            strata AS (
                SELECT sample_id, cell, count(*) AS m_h FROM chosen GROUP BY ALL
            )
            SELECT {keys} any_value(n_population) AS n_population, any_value(m_h) AS m_h,
                   count(*) AS m_hd, sum(correct) AS k_hd
            FROM chosen JOIN strata USING (sample_id, cell)
            WHERE in_scope
            GROUP BY {keys} sample_id, cell
            ORDER BY {keys} sample_id, cell
            """,
                params=[chosen, chosen],
            )
            .to_arrow_table()
            .to_pandas()
        )
    finally:
        con.unregister(view)
