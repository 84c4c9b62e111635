"""What a user would write without fieldtrust: pandas over a full load, or bare DuckDB SQL.

Each baseline computes the same figures as the library call it is measured
against, or a subset of them (then the comparison favours the baseline, and
docs/benchmarks.md says so). None of them is a straw man: pandas work is
vectorised (groupby, cumulative sums, scipy's vectorised beta quantiles) and
data moves from DuckDB to pandas through Arrow, its fastest path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.store.weeks import Week
from scipy import stats

#: The threshold scan's grid: t = k / GRID, as the library's.
GRID = 200


# --- ingest -----------------------------------------------------------------------------------


def bare_insert(con: duckdb.DuckDBPyConnection, parquet: Path) -> int:
    """``INSERT INTO extractions SELECT * FROM read_parquet(...)``: no checks, no dedup.

    It leaves ``form_versions`` and ``ingest_batches`` empty, which the
    library fills; the file already holds every stored column but the box,
    which it writes as users do (``x0,y0,x1,y1`` text) and the store keeps as
    four numbers: split here, unchecked.
    """
    row = con.execute(
        "INSERT INTO extractions BY NAME SELECT * EXCLUDE (bbox, box), 'bench' AS batch_id,"
        " box[1] AS bbox_x0, box[2] AS bbox_y0, box[3] AS bbox_x1, box[4] AS bbox_y1"
        " FROM (SELECT *, CAST(string_split(bbox, ',') AS DOUBLE[]) AS box"
        "       FROM read_parquet(?))",
        [str(parquet)],
    ).fetchone()
    return int(row[0]) if row else 0


# --- audit sample -----------------------------------------------------------------------------


def hash_sample(con: duckdb.DuckDBPyConnection, week: str, seed: int, size: int) -> pa.Table:
    """The week's rows in ``hash()`` order, first ``size``: one unstratified random sample."""
    start, end = Week(week).bounds()
    return con.sql(
        "SELECT extraction_id, doc_type, field, confidence FROM extractions"
        " WHERE extracted_at >= ? AND extracted_at < ?"
        " ORDER BY hash(?, extraction_id) LIMIT ?",
        params=[start, end, seed, size],
    ).to_arrow_table()


def md5_sample(con: duckdb.DuckDBPyConnection, week: str, seed: int, size: int) -> pa.Table:
    """:func:`hash_sample` ranked by the library's permanent random number (md5) instead.

    Separates what the draw adds (cells, allocation, the insert) from what
    its stable cryptographic hash costs over ``hash()``.
    """
    start, end = Week(week).bounds()
    return con.sql(
        "SELECT extraction_id, doc_type, field, confidence FROM extractions"
        " WHERE extracted_at >= ? AND extracted_at < ?"
        " ORDER BY md5_number(CAST(? AS VARCHAR) || ':' || ? || ':' || extraction_id) LIMIT ?",
        params=[start, end, seed, week, size],
    ).to_arrow_table()


def md5_cell_sample(
    con: duckdb.DuckDBPyConnection,
    week: str,
    seed: int,
    edges: list[float],
    parts: dict[str, list[Any]],
) -> pa.Table:
    """The draw's own sample in one bare query: per cell, the ``n`` smallest md5 numbers.

    ``parts`` is the allocation, one entry per (doc_type, field, form_version,
    band index) with its cell and the cell's ``n`` (lists under those keys,
    worked out before timing); ``edges`` are the inner band edges. The rows
    of the week join their cell, are ranked by the library's permanent
    random number within it and the first ``n`` kept: the same items the
    draw picks, without counting the cells, allocating or storing anything.
    """
    start, end = Week(week).bounds()
    band = " ".join(f"WHEN e.confidence < {float(edge)!r} THEN {i}" for i, edge in enumerate(edges))
    return con.sql(
        f"""
        WITH alloc AS (
            SELECT unnest($doc_types::VARCHAR[]) AS doc_type, unnest($fields::VARCHAR[]) AS field,
                   unnest($versions::VARCHAR[]) AS form_version,
                   unnest($bands::INTEGER[]) AS band_index,
                   unnest($cells::VARCHAR[]) AS cell, unnest($n::BIGINT[]) AS n
        )
        SELECT e.extraction_id, a.cell, e.doc_type, e.field, e.confidence
        FROM extractions e JOIN alloc a
          ON e.doc_type = a.doc_type AND e.field = a.field AND e.form_version = a.form_version
         AND (CASE {band} ELSE {len(edges)} END) = a.band_index
        WHERE e.extracted_at >= $start AND e.extracted_at < $end
        QUALIFY row_number() OVER (
            PARTITION BY a.cell
            ORDER BY md5_number(CAST($seed AS VARCHAR) || ':' || $week || ':' || e.extraction_id),
                     e.extraction_id
        ) <= a.n
        """,
        params={"start": start, "end": end, "seed": seed, "week": week, **parts},
    ).to_arrow_table()


# --- weekly estimates and alerts --------------------------------------------------------------

_WEIGHTED_SQL = """
WITH current_samples AS (
    SELECT sample_id, week FROM (
        SELECT sample_id, week,
               row_number() OVER (PARTITION BY week ORDER BY version DESC) AS rank_
        FROM audit_samples
    ) WHERE rank_ = 1
)
SELECT s.week, e.doc_type, e.field,
       sum(l.correct / i.inclusion_prob) / sum(1 / i.inclusion_prob) AS accuracy,
       count(*) AS n
FROM current_samples s
JOIN audit_items i USING (sample_id)
JOIN effective_labels l USING (extraction_id)
JOIN extractions e USING (extraction_id)
WHERE l.correct IS NOT NULL AND s.week IN (SELECT unnest(?::VARCHAR[]))
GROUP BY ALL
ORDER BY ALL
"""


def weighted_accuracy_sql(con: duckdb.DuckDBPyConnection, weeks: list[str]) -> pa.Table:
    """Hajek accuracy per (week, doc_type, field) from the current samples: one SQL query.

    The library adds per-cell variances, Korn-Graubard intervals and effective
    sizes (and the tests for alerts); this is the point estimate alone.
    """
    return con.sql(_WEIGHTED_SQL, params=[weeks]).to_arrow_table()


# --- calibration report in pandas -------------------------------------------------------------


def load_frames(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    """Every extraction, every effective label and every audit item, as pandas frames."""
    return {
        "extractions": con.sql(
            "SELECT extraction_id, doc_type, field, form_version, confidence, extracted_at"
            " FROM extractions"
        ).to_arrow_table().to_pandas(),
        "labels": con.sql(
            "SELECT extraction_id, correct FROM effective_labels WHERE correct IS NOT NULL"
        ).to_arrow_table().to_pandas(),
        "items": con.sql(
            "SELECT i.extraction_id, i.inclusion_prob, s.version"
            " FROM audit_items i JOIN audit_samples s USING (sample_id)"
        ).to_arrow_table().to_pandas(),
    }


def _iso_week_key(week: str) -> int:
    parsed = Week(week)
    return parsed.year * 100 + parsed.number


def pandas_calibration(
    con: duckdb.DuckDBPyConnection,
    weeks: tuple[str, ...],
    *,
    n_bins: int = 10,
    target: float = 0.95,
    confidence: float = 0.95,
    n_min: int = 100,
) -> pd.DataFrame:
    """The per-stratum calibration table from a full load into pandas.

    Per (doc_type, field): population, mean stated confidence, labels,
    design-weighted accuracy, Brier score, ECE over ``n_bins`` equal-mass bins
    (weighted means), and a threshold scan over the 0.005 grid (coverage,
    labels and weighted accuracy above each candidate, exact Clopper-Pearson
    lower bound) giving the point and a fixed-sequence certified threshold.
    """
    frames = load_frames(con)
    ext = frames["extractions"]
    iso = ext["extracted_at"].dt.isocalendar()
    in_scope = (iso["year"].astype(np.int64) * 100 + iso["week"].astype(np.int64)).isin(
        [_iso_week_key(w) for w in weeks]
    )
    ext = ext[in_scope.to_numpy()]
    keys = ["doc_type", "field"]

    items = frames["items"].sort_values("version").drop_duplicates("extraction_id", keep="last")
    labelled = frames["labels"].merge(ext, on="extraction_id").merge(
        items[["extraction_id", "inclusion_prob"]], on="extraction_id", how="left"
    )
    population = ext.groupby(keys, sort=True).agg(
        n_population=("confidence", "size"), mean_confidence=("confidence", "mean")
    )
    # Labels outside any audit sample: a simple random sample of their stratum.
    no_design = labelled["inclusion_prob"].isna()
    srs = labelled[no_design].groupby(keys).size().rename("n_srs").to_frame().join(population)
    srs_prob = (srs["n_srs"] / srs["n_population"]).rename("srs_prob")
    labelled = labelled.join(srs_prob, on=keys)
    labelled["weight"] = 1.0 / labelled["inclusion_prob"].fillna(labelled["srs_prob"])

    # Population per 0.005 grid step, for coverage above each candidate threshold.
    grid = np.minimum(np.floor(ext["confidence"].to_numpy() * GRID + 1e-9), GRID).astype(np.int64)
    hist = ext[keys].assign(k=grid).groupby([*keys, "k"], sort=True).size()
    hist = hist.unstack("k", fill_value=0).reindex(columns=range(GRID + 1), fill_value=0)

    rows = []
    for (doc_type, field), group in labelled.groupby(keys, sort=True):
        rows.append({"doc_type": doc_type, "field": field, **_stratum_figures(
            group, hist.loc[(doc_type, field)].to_numpy(), n_bins=n_bins, target=target,
            confidence=confidence, n_min=n_min,
        )})
    return population.reset_index().merge(pd.DataFrame(rows), on=keys, how="left")


def _stratum_figures(
    group: pd.DataFrame,
    population_hist: np.ndarray[Any, Any],
    *,
    n_bins: int,
    target: float,
    confidence: float,
    n_min: int,
) -> dict[str, Any]:
    c = group["confidence"].to_numpy(dtype=float)
    y = group["correct"].to_numpy(dtype=float)
    w = group["weight"].to_numpy(dtype=float)
    accuracy = float(np.sum(w * y) / np.sum(w))
    brier = float(np.sum(w * (c - y) ** 2) / np.sum(w))

    # ECE: equal-mass bins on the labels' confidences, weighted means inside.
    edges = np.quantile(c, np.linspace(0, 1, n_bins + 1))
    bins = np.clip(np.searchsorted(edges[1:-1], c, side="right"), 0, n_bins - 1)
    wb = np.bincount(bins, w, n_bins)
    conf_b = np.bincount(bins, w * c, n_bins) / np.where(wb > 0, wb, 1)
    acc_b = np.bincount(bins, w * y, n_bins) / np.where(wb > 0, wb, 1)
    ece = float(np.sum(wb / wb.sum() * np.abs(acc_b - conf_b)))

    # Threshold scan: suffix sums over the grid, high to low.
    k_lab = np.minimum(np.floor(c * GRID + 1e-9), GRID).astype(np.int64)
    pop_above = np.cumsum(population_hist[::-1])[::-1]
    n_above = np.cumsum(np.bincount(k_lab, minlength=GRID + 1)[::-1])[::-1]
    k_above = np.cumsum(np.bincount(k_lab, y, GRID + 1)[::-1])[::-1]
    w_above = np.cumsum(np.bincount(k_lab, w, GRID + 1)[::-1])[::-1]
    wy_above = np.cumsum(np.bincount(k_lab, w * y, GRID + 1)[::-1])[::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_above = wy_above / w_above
        low = stats.beta.ppf(1 - confidence, k_above, n_above - k_above + 1)
    low = np.where(k_above > 0, low, 0.0)
    coverage = pop_above / max(int(pop_above[0]), 1)

    point = np.flatnonzero((acc_above >= target) & (n_above > 0))
    certified = None
    for k in range(GRID, -1, -1):  # fixed sequence: walk down while the bound holds
        if n_above[k] < n_min:
            continue
        if low[k] < target:
            break
        certified = k
    return {
        "n_labeled": len(group),
        "accuracy": accuracy,
        "brier": brier,
        "ece": ece,
        "point_threshold": point[0] / GRID if point.size else None,
        "certified_threshold": certified / GRID if certified is not None else None,
        "coverage": float(coverage[certified]) if certified is not None else None,
    }

