"""A week's sampling cells and their sizes (STATS.md section 8).

The population of ISO week W is every extraction with ``extracted_at`` in
[Monday 00:00, next Monday) UTC. Cells are doc_type x field x confidence band
x form-version status; a form version is *new* when ``form_versions`` first saw
it within ``new_version_weeks`` weeks before the end of W (a version missing
from ``form_versions`` counts as new: nobody has seen it before), or when
``extractor_versions`` first saw one of its extractor versions in that time
(a new model on an old form is as unproven as a new form).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.sampling.allocation import cell_sizes, smoothed_error_rate
from fieldtrust.sampling.design import Design
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.rollup import GRID, counts_a_lake, is_current
from fieldtrust.store.scope import Scope, last_weeks
from fieldtrust.store.weeks import Week

from fieldtrust.errors import InputError

#: Weeks of past labels that set a band's error rate for Neyman allocation.
RATE_LOOKBACK_WEEKS = 8

#: The parameters of a cell's version status (the rest locate the week's rows).
_VERSION_PARAMS = ("new_since", "new_until")

CELL_COLUMNS = ["cell", "doc_type", "field", "band", "version_status", "n_population"]


def population_sql(
    week: Week, design: Design, extra_columns: tuple[str, ...] = ()
) -> tuple[str, dict[str, Any]]:
    """A SELECT of the week's extractions with their band index (0 = lowest band).

    Columns: extraction_id, doc_type, field, form_version, band_index, then
    ``extra_columns`` of ``extractions`` (names from this module only). With
    the version status of each (doc_type, form_version) these locate an
    item's cell; no text label is built per row, and no per-row join with
    ``form_versions`` is needed (both cost more than the whole count).
    Returns the SQL and its named parameters (every value bound).
    """
    start, end = week.bounds()
    params: dict[str, Any] = {"start": start, "end": end}
    cases = []
    for index, upper in enumerate(design.bands[1:-1]):
        cases.append(f"WHEN e.confidence < $edge_{index} THEN {index}")
        params[f"edge_{index}"] = upper
    last = len(design.bands) - 2
    band = f"CASE {' '.join(cases)} ELSE {last} END" if cases else "0"
    sql = f"""
        SELECT e.extraction_id, e.doc_type, e.field, e.form_version, {band} AS band_index
               {"".join(f", e.{column}" for column in extra_columns)}
        FROM extractions e
        WHERE e.extracted_at >= $start AND e.extracted_at < $end
    """
    return sql, params


def count_cells(
    con: duckdb.DuckDBPyConnection, week: Week | str, design: Design, parts: str | None = None,
    *, from_rollup: bool = False,
) -> pa.Table:
    """Population size ``N_h`` of every non-empty cell of ``week``, in a stable order.

    Columns: cell, doc_type, field, band, version_status, n_population,
    band_index, is_new and form_versions (the versions in the cell; with
    band_index they locate the cell's rows in :func:`population_sql`).
    ``parts`` names a relation of the week's counts per (doc_type, field,
    form_version, band_index), column n, when a lake source counted them.
    ``from_rollup``: count from the rollup when it is current and every band
    edge is on its grid (a preview; a draw counts the rows it selects from).
    """
    counts = _cell_counts(con, Week(week), design, parts, from_rollup=from_rollup)
    return pa.Table.from_pandas(counts, preserve_index=False)


def _cell_counts(
    con: duckdb.DuckDBPyConnection, week: Week, design: Design, parts: str | None,
    *, from_rollup: bool = False,
) -> pd.DataFrame:
    """:func:`count_cells` as a pandas frame."""
    sql, params = population_sql(week, design)
    # A form version is new too while one of its extractor versions is (first
    # seen in the last new_version_weeks): a model change has no evidence yet.
    # The whole form version is boosted, as its cells hold every extractor.
    new_extractors = ("SELECT NULL::VARCHAR AS doc_type, NULL::VARCHAR AS form_version,"
                      " false AS new_extractor")
    if design.new_version_weeks > 0:
        params["new_since"] = week.end - dt.timedelta(weeks=design.new_version_weeks)
        params["new_until"] = week.end
        is_new = ("(f.first_seen_at IS NULL OR f.first_seen_at >= $new_since"
                  " OR coalesce(x.new_extractor, false))")
        new_extractors = """
            SELECT doc_type, form_version, true AS new_extractor FROM extractor_versions
            WHERE first_seen_at >= $new_since AND first_seen_at < $new_until GROUP BY ALL"""
    else:
        is_new = "false"
    parts_sql = f"""
        SELECT doc_type, field, form_version, band_index, count(*) AS n
        FROM ({sql}) GROUP BY ALL"""
    if parts:  # the rows were counted elsewhere: only the version threshold is bound
        params = {k: v for k, v in params.items() if k in _VERSION_PARAMS}
        parts_sql = f"SELECT doc_type, field, form_version, band_index, n FROM {parts}"
    elif _edges_on_grid(design) and (counts_a_lake(con) or (from_rollup and is_current(con))):
        # The rollup holds the week's cells exactly when every band edge is a step
        # of the confidence grid (and a lake's rows are not in the store at all).
        params = {k: v for k, v in params.items() if k in _VERSION_PARAMS} | {"week": str(week)}
        params |= {f"k_{i}": round(e * GRID) for i, e in enumerate(design.bands[1:-1])}
        cases = " ".join(f"WHEN k < $k_{i} THEN {i}" for i in range(len(design.bands) - 2))
        band = f"CASE {cases} ELSE {len(design.bands) - 2} END" if cases else "0"
        parts_sql = f"""
            SELECT doc_type, field, form_version, {band} AS band_index, sum(n) AS n
            FROM extraction_counts WHERE week = $week GROUP BY ALL"""
    counts = (
        con.sql(
            f"""
            WITH parts AS ({parts_sql})
            SELECT p.doc_type, p.field, p.band_index, {is_new} AS is_new,
                   sum(p.n)::BIGINT AS n_population,
                   list(p.form_version ORDER BY p.form_version) AS form_versions
            FROM parts p LEFT JOIN form_versions f USING (doc_type, form_version)
            LEFT JOIN ({new_extractors}) x USING (doc_type, form_version)
            GROUP BY ALL
            ORDER BY doc_type, field, band_index, is_new
            """,
            params=params,
        )
        .to_arrow_table()
        .to_pandas()
    )
    counts["band"] = np.asarray(design.band_labels, dtype=object)[
        counts["band_index"].to_numpy(dtype=np.int64)
    ]
    counts["version_status"] = np.where(counts["is_new"], "new", "established")
    counts["cell"] = (
        _cell_part(counts["doc_type"])
        + "|"
        + _cell_part(counts["field"])
        + "|"
        + counts["band"]
        + "|"
        + counts["version_status"]
    )
    return counts[[*CELL_COLUMNS, "band_index", "is_new", "form_versions"]]


def _edges_on_grid(design: Design) -> bool:
    """Whether every inner band edge is a step of the rollup's confidence grid."""
    return all(abs(e * GRID - round(e * GRID)) < 1e-9 for e in design.bands[1:-1])


def _cell_part(text: pd.Series) -> pd.Series:
    """Free text made safe inside a cell label, whose parts ``|`` separates.

    Escaping ``|`` (and the escape itself) keeps doc_type ``a|b`` with field
    ``c`` and doc_type ``a`` with field ``b|c`` two cells instead of one label
    twice, which the draw would refuse as a duplicate key.
    """
    return text.str.replace("\\", "\\\\", regex=False).str.replace("|", "\\|", regex=False)


def plan_cells(
    con: duckdb.DuckDBPyConnection, week: Week | str, design: Design, parts: str | None = None,
    *, from_rollup: bool = False,
) -> pa.Table:
    """Every cell of ``week`` with ``N_h``, ``n_h``, ``pi_h = n_h / N_h`` and whether it is boosted.

    Columns of :func:`count_cells`, then error_rate (Neyman's ``p_h``, null
    under proportional allocation), n_sample, inclusion_prob and boosted.
    Sizes follow the design's allocation
    (:func:`fieldtrust.sampling.allocation.cell_sizes`): the rate rule, or
    the budget (or the rate rule's total) spread in proportion to size or by
    Neyman allocation, with each band's error rate taken from the labels of
    the previous :data:`RATE_LOOKBACK_WEEKS` weeks, shrunk towards
    ``design.prior_error``.

    Raises
    ------
    InputError
        The week holds no extractions.
    """
    cells = plan_frame(con, Week(week), design, parts, from_rollup=from_rollup)
    return pa.Table.from_pandas(cells, preserve_index=False)


def plan_frame(
    con: duckdb.DuckDBPyConnection, week: Week, design: Design, parts: str | None = None,
    *, from_rollup: bool = False,
) -> pd.DataFrame:
    """:func:`plan_cells` as a pandas frame, for the draws (they explode and zip its columns)."""
    cells = _cell_counts(con, week, design, parts, from_rollup=from_rollup)
    if cells.empty:
        start, end = week.bounds()
        raise InputError(
            f"week {week} holds no extractions (extracted_at in [{start}, {end}) UTC);"
            " pick a week with data (`fieldtrust info` shows the first and last week)"
        )
    population = cells["n_population"].to_numpy(dtype=np.int64)
    new_version = (cells["version_status"] == "new").to_numpy()
    if design.allocation_rule == "neyman":
        cells["error_rate"] = band_error_rates(con, week, design, cells)
    else:
        cells["error_rate"] = np.nan
    size = cell_sizes(population, new_version, design, cells["error_rate"].to_numpy())
    cells["n_sample"] = size
    cells["inclusion_prob"] = size / population
    cells["boosted"] = new_version & (design.boost > 1)
    return cells


def band_error_rates(
    con: duckdb.DuckDBPyConnection, week: Week, design: Design, cells: pd.DataFrame
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Error rate of each cell's (doc_type, field, band) in the weeks before ``week``."""
    weeks = last_weeks(con, RATE_LOOKBACK_WEEKS, until=week.shift(-1))
    labels = labelled_items(con, Scope(weeks=weeks)).to_pandas() if weeks else pd.DataFrame()
    if labels.empty:
        return np.full(len(cells), design.prior_error)
    # Counts, not design weights: within one band the error rate is what matters,
    # and a band's labels are drawn at one rate per week.
    inner_edges = np.asarray(design.bands[1:-1])
    band_index = np.searchsorted(inner_edges, labels["confidence"].to_numpy(), side="right")
    labels["band"] = np.asarray(design.band_labels)[band_index]
    labels["error"] = 1 - labels["correct"]
    past = labels.groupby(["doc_type", "field", "band"], as_index=False).agg(
        errors=("error", "sum"), labels=("error", "size")
    )
    merged = cells[["doc_type", "field", "band"]].merge(
        past, how="left", on=["doc_type", "field", "band"]
    )
    errors = merged["errors"].fillna(0).to_numpy(dtype=np.float64)
    counts = merged["labels"].fillna(0).to_numpy(dtype=np.float64)
    return smoothed_error_rate(errors, counts, design.prior_error)
