"""Draw a week's audit sample on a lake source's engine (STATS.md section 8).

The same design, the same cells and the same permanent random numbers as
:func:`fieldtrust.sampling.draw.draw_sample`: the source counts the week's
cells and ranks each cell by the MD5 rank key of
:func:`fieldtrust.ingest.sources.queries.rank_key` (the order of ``H``), so the
picks are the ones the embedded store would make from the same rows. Only
the picked rows come home: into ``extractions`` under a batch of format
``source`` (reviewers see their value and excerpt), ``sampled_extractions``
and ``audit_items``. The week's population is read from the files already
counted by a refresh, so the sample and the rollup describe the same rows.

A refresh checks only what a row is counted by; the draw checks every other
ingest rule (ids, values, statuses, locations) on every counted row of its
week, which it reads anyway. A week holding rows those rules reject is
refused with ingest's messages (file, row, column, value) and nothing is
written, unless ``skip_invalid``: then they are left out of the week's
population and sample, and their count is recorded with the sample.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from fieldtrust.ingest.extractions import STORED_COLUMNS, typed_columns
from fieldtrust.ingest.sources import Source, queries
from fieldtrust.ingest.sources.changes import counted_files
from fieldtrust.ingest.sources.checks import any_fails, counting_rules, storing_rules
from fieldtrust.ingest.sources.refresh import rule_problems
from fieldtrust.sampling.cells import checked_week, plan_frame
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import (
    _CELLS_SQL,
    SampleResult,
    _current,
    _insert_cells,
    _next_version,
    candidate_cutoffs,
    load_sample,
)
from fieldtrust.sampling.prn import prn
from fieldtrust.store.access import require, user_name
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.rollup import record_sampled
from fieldtrust.store.weeks import week_bounds

from fieldtrust.errors import InputError, ValidationError

#: A rank key above every MD5 hex text: no cutoff.
_NO_CUTOFF = "g"

_PARTS = "_fieldtrust_source_parts"
_PICKS = "_fieldtrust_source_picks"


def cutoff_key(cutoff: float) -> str:
    """The rank-key text below which ``prn < cutoff`` (``u = (H >> 75) / 2**53``)."""
    if cutoff >= 1:
        return _NO_CUTOFF
    # prn < c  <=>  H >> 75 < ceil(c * 2**53)  <=>  H < ceil(c * 2**53) << 75.
    return format(math.ceil(cutoff * 2**53) << 75, "032x")


def select_counted(con: duckdb.DuckDBPyConnection, source: Source) -> None:
    """Point the source at the rows a refresh counted (every row of a table source)."""
    files = source.files()
    if files is None:
        source.select(None)
        return
    counted = sorted(counted_files(con, source.config.name))
    if not counted:
        raise InputError(
            f"nothing counted from {source.config.name} yet; run `fieldtrust refresh` first"
        )
    source.select(counted)


def draw_from_source(
    con: duckdb.DuckDBPyConnection,
    source: Source,
    week: str,
    design: Design | None = None,
    *,
    seed: int,
    actor: str,
    redraw: bool = False,
    skip_invalid: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> SampleResult:
    """Draw ISO ``week``'s audit sample from ``source``, or return it if drawn so.

    Parameters and result as :func:`fieldtrust.sampling.draw.draw_sample`;
    ``source`` is an open lake source the store was refreshed from;
    ``skip_invalid`` leaves the week's rows an ingest rule rejects out of the
    sample and its population (how many is recorded) instead of refusing;
    ``progress(stage, done, total)`` is called as each of 3 stages starts.

    Raises
    ------
    PermissionDenied
        ``actor`` may not draw; nothing was written.
    ValidationError
        Counted rows of the week hold a bad id, value or status (unless
        ``skip_invalid``); nothing was written.
    InputError
        The week holds no counted extractions, or nothing was refreshed yet.
    """
    actor = user_name(actor, what="acting user")
    week = checked_week(week)
    design = design or Design()
    digest = design.sha256()
    with transaction(con):
        require(con, actor, "draw_sample")
        current = _current(con, week)
        if current is not None and not redraw and current[2] == digest and current[1] == seed:
            return load_sample(con, current[0])
    report = progress or (lambda stage, done, total: None)
    report(f"counting the cells of {week} on {source.config.kind}", 0, 3)
    select_counted(con, source)
    start, end = week_bounds(week)
    edges = [float(edge) for edge in design.bands[1:-1]]
    parts_sql, params = queries.cell_parts(edges)
    parts = source.query(parts_sql, params | {"start": start, "end": end})
    invalid = 0
    has_bad = bool(pc.sum(parts["bad"]).as_py())
    if has_bad:  # rows the refresh skipped, or rows it does not check
        invalid = int(source.query(queries.WEEK_INVALID, {"start": start, "end": end})
                      ["invalid"][0].as_py() or 0)
    if invalid and not skip_invalid:
        raise ValidationError(f"{source.config.name}, week {week}",
                              _invalid_rows(source, week), invalid)
    parts = parts.filter(pc.greater(parts["n"], 0))
    with transaction(con):
        require(con, actor, "draw_sample")  # again: a role revoked meanwhile cannot draw
        con.register(_PARTS, parts)
        try:
            cells = plan_frame(con, week, design, parts=_PARTS)
        finally:
            con.unregister(_PARTS)
        report(f"ranking {len(cells)} cells' rows by permanent random number", 1, 3)
        picks = _picks(source, week, seed, design, cells, edges, skip_bad=has_bad)
        report(f"storing {picks.num_rows:,} picked rows", 2, 3)
        version = _next_version(con, week)
        sample_id = f"{week}/v{version}"
        con.execute(
            "INSERT INTO audit_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [sample_id, week, version, seed, design.canonical_json(), digest, utc_now(), actor],
        )
        _insert_cells(con, sample_id, cells)
        _store_picks(con, source, sample_id, week, seed, design, cells, picks)
        if invalid:
            con.execute("INSERT INTO source_draw_skips VALUES (?, ?)", [sample_id, invalid])
    report("done", 3, 3)
    return SampleResult(
        sample_id, week, version, seed, design, digest, True,
        con.sql(_CELLS_SQL, params=[sample_id]).to_arrow_table(),
        replaced=None if current is None else current[0], rows_skipped=invalid,
    )


def _invalid_rows(source: Source, week: str) -> list[str]:
    """The first counted rows of ``week`` a rule the refresh did not ask rejects, as messages."""
    start, end = week_bounds(week)
    stamp = typed_columns(source.dtypes)["extracted_at"]
    where = (f"NOT {any_fails(counting_rules(source.rules))}"
             f" AND {stamp} >= $start AND {stamp} < $end")
    return rule_problems(source, storing_rules(source.rules), where,
                         {"start": start, "end": end})


def _allocation(cells: pd.DataFrame, cutoffs: np.ndarray) -> pa.Table:
    parts = cells.assign(cutoff=cutoffs).explode("form_versions")
    return pa.table({
        "doc_type": parts["doc_type"].astype(str).tolist(),
        "field": parts["field"].astype(str).tolist(),
        "form_version": parts["form_versions"].astype(str).tolist(),
        "band_index": pa.array(parts["band_index"].tolist(), pa.int32()),
        "cell": parts["cell"].astype(str).tolist(),
        "n_sample": pa.array(parts["n_sample"].tolist(), pa.int64()),
        "cutoff_top": [cutoff_key(c)[:2] for c in parts["cutoff"]],
    })


def _picks(
    source: Source, week: str, seed: int, design: Design, cells: pd.DataFrame,
    edges: list[float], *, skip_bad: bool,
) -> pa.Table:
    """Each cell's first ``n_h`` rows by rank key; rank every row if a cutoff fell short."""
    start, end = week_bounds(week)
    sql, params = queries.draw_picks(edges, skip_bad=skip_bad)
    params |= {"seed": str(seed), "week": week, "start": start, "end": end}
    wanted = dict(zip(cells["cell"], cells["n_sample"], strict=True))
    cutoffs = candidate_cutoffs(cells["n_population"].to_numpy(), cells["n_sample"].to_numpy())
    for attempt in (cutoffs, np.full(len(cells), 2.0)):
        source.register("draw_alloc", _allocation(cells, attempt))
        picks = source.query(sql, params)
        drawn = pd.Series(picks["cell"].to_pylist()).value_counts().to_dict()
        if all(drawn.get(cell, 0) == n for cell, n in wanted.items()):
            break
    ids = picks["extraction_id"].to_pylist()
    if len(set(ids)) != len(ids):
        raise InputError(
            f"{source.config.name}: week {week} repeats extraction ids among the drawn rows;"
            " extraction_id must be unique in the source"
        )
    return picks


def _store_picks(
    con: duckdb.DuckDBPyConnection, source: Source, sample_id: str, week: str, seed: int,
    design: Design, cells: pd.DataFrame, picks: pa.Table,
) -> None:
    """audit_items, the picked rows in ``extractions`` and ``sampled_extractions``."""
    double = dict(zip(
        cells["cell"],
        np.floor(cells["n_sample"].to_numpy() * design.double_review_share + 0.5),
        strict=True,
    ))
    prob = dict(zip(cells["cell"], cells["inclusion_prob"], strict=True))
    cell_of = picks["cell"].to_pylist()
    ids = picks["extraction_id"].to_pylist()
    items = pa.table({
        "extraction_id": ids,
        "cell": cell_of,
        "inclusion_prob": [float(prob[c]) for c in cell_of],
        "prn": [prn(seed, week, i) for i in ids],
        "double_review": [
            int(r) <= double[c] for r, c in zip(picks["rank_"].to_pylist(), cell_of, strict=True)
        ],
    })
    # The optional columns (a document's location) come home when the lake has them.
    stored = [c for c in STORED_COLUMNS if c in picks.column_names]
    rows = picks.select(stored)
    batch_sha = hashlib.sha256(f"{source.config.name}\n{sample_id}".encode()).hexdigest()
    batch_id = f"source-{batch_sha[:16]}"
    columns = ", ".join(stored)
    con.register(_PICKS, rows)
    try:
        added = con.execute(
            f"INSERT INTO extractions ({columns}, batch_id)"
            f" SELECT {columns}, ? FROM {_PICKS} p WHERE NOT EXISTS"
            " (SELECT 1 FROM extractions e WHERE e.extraction_id = p.extraction_id)",
            [batch_id],
        ).fetchall()[0][0]
        con.execute(
            "INSERT INTO ingest_batches VALUES (?, ?, ?, 'source', ?, ?, ?)",
            [batch_id, f"{source.config.name} ({sample_id})", batch_sha, len(ids), int(added),
             utc_now()],
        )
        # From the rows just stored, so the copy has every column the store keeps.
        record_sampled(con, f"SELECT extraction_id FROM {_PICKS}", [])
    finally:
        con.unregister(_PICKS)
    con.register(_PICKS, items)
    try:
        con.execute(
            "INSERT INTO audit_items (sample_id, extraction_id, cell, inclusion_prob, prn,"
            f" double_review) SELECT ?, extraction_id, cell, inclusion_prob, prn, double_review"
            f" FROM {_PICKS}",
            [sample_id],
        )
    finally:
        con.unregister(_PICKS)
