"""How stated confidence is spread over the population of one stratum.

A reliability diagram shows accuracy per bin of labelled items; beside it a
histogram of *all* extractions in scope shows where the population actually
lies, so a well-calibrated bin holding 0.1% of the traffic is not mistaken for
one that matters (sklearn's ``CalibrationDisplay`` draws the same histogram
under its curve). Counting runs in DuckDB: ten million rows never leave it.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.store.rollup import GRID, counts_a_lake, is_current
from fieldtrust.store.scope import Scope

from fieldtrust.errors import InputError

_HISTOGRAM_SQL = """
WITH counts AS (
    SELECT least(floor(e.confidence * ?), ? - 1)::BIGINT AS bin, count(*) AS count
    FROM extractions e
    WHERE e.doc_type = ? AND e.field = ? AND {where}
    GROUP BY bin
)
SELECT b.range AS bin, b.range / ? AS lower, (b.range + 1) / ? AS upper,
       coalesce(c.count, 0) AS count
FROM range(?) b LEFT JOIN counts c ON c.bin = b.range
ORDER BY bin
"""


_LAKE_HISTOGRAM_SQL = """
WITH counts AS (
    SELECT least(e.k * ? // ?, ? - 1)::BIGINT AS bin, sum(e.n) AS count
    FROM extraction_counts e
    WHERE e.doc_type = ? AND e.field = ? AND {where}
    GROUP BY bin
)
SELECT b.range AS bin, b.range / ? AS lower, (b.range + 1) / ? AS upper,
       coalesce(c.count, 0)::BIGINT AS count
FROM range(?) b LEFT JOIN counts c ON c.bin = b.range
ORDER BY bin
"""


def confidence_histogram(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    scope: Scope = Scope(),
    *,
    bins: int = 40,
) -> pa.Table:
    """Counts of stated confidence of one stratum in ``bins`` equal-width bins on [0, 1].

    Bin ``k`` holds confidences in ``[k / bins, (k + 1) / bins)``; the last
    bin also holds confidence 1 (``numpy.histogram``'s convention).

    Parameters
    ----------
    doc_type, field
        The stratum.
    scope
        Which extractions count (weeks, form versions); its doc_type and
        field filters, if any, apply on top of the stratum.
    bins
        Number of bins, at least 1.

    Returns
    -------
    pyarrow.Table
        Exactly ``bins`` rows, empty bins included, with columns ``bin``
        (0-based), ``lower``, ``upper`` (the bin's edges) and ``count``.

    Raises
    ------
    InputError
        ``bins`` is not a whole number of at least 1.

    References
    ----------
    numpy.histogram, https://numpy.org/doc/stable/reference/generated/numpy.histogram.html
    (the bin convention checked against it in the tests).
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise InputError(f"bins must be a whole number of at least 1, got {bins!r}")
    if GRID % bins == 0 and (counts_a_lake(con) or is_current(con)):
        # The rollup's grid holds every bin edge: a page never counts the rows (and a
        # lake's rows are not in the store at all).
        where, params = scope.where_week_labels("e")
        return con.sql(
            _LAKE_HISTOGRAM_SQL.format(where=where),
            params=[bins, GRID, bins, doc_type, field, *params, float(bins), float(bins), bins],
        ).to_arrow_table()
    where, params = scope.where("e")  # bound parameters only
    return con.sql(
        _HISTOGRAM_SQL.format(where=where),
        params=[bins, bins, doc_type, field, *params, float(bins), float(bins), bins],
    ).to_arrow_table()
