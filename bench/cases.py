"""The benchmark cases: each library call beside the baseline it is compared with.

A :class:`Side` is one thing timed: ``prepare`` (untimed, once) builds its
state, ``reset`` (untimed, before every run) puts it back where a run starts,
``run`` is the timed call, ``finish`` cleans up. :func:`time_side` runs it
after a warm-up and returns the seconds of each run; the runner calls it in a
fresh child process per side (:mod:`bench.isolate`), so each side's peak
memory is its own.

Goals are the issue's: ratios are fieldtrust's median over the baseline's
(below 1: fieldtrust is faster), seconds and memory are at 10M rows unless
said otherwise.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from fieldtrust.calibration.report import calibration_report
from fieldtrust.ingest.extractions import ingest_files
from fieldtrust.sampling.alerts import weekly_alerts
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.estimates import weekly_estimates
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.scope import Scope, last_weeks

from bench import baselines
from bench.generate import bench_design
from fieldtrust import store
from fieldtrust.demo.users import QA_LEAD
from fieldtrust.settings import Settings

GB = 1024**3


@dataclass(frozen=True)
class Context:
    """What every side needs: the size's files, a scratch folder, the settings."""

    rows: int
    store: Path
    parquet: Path
    work: Path
    settings: Settings


@dataclass(frozen=True)
class Side:
    """One timed thing; see the module docstring."""

    label: str
    prepare: Callable[[Context], dict[str, Any]]
    run: Callable[[dict[str, Any]], object]
    reset: Callable[[dict[str, Any]], None] | None = None
    finish: Callable[[dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class Goal:
    """What a case should reach; None where the issue sets nothing."""

    max_ratio: float | None = None
    max_seconds_10m: float | None = None
    max_rss_10m: float = 1.5 * GB
    #: Seconds at every size (for work that does not grow with the store).
    max_seconds: float | None = None

    def text(self) -> str:
        parts = []
        if self.max_ratio is not None:
            parts.append(
                f"ratio <= {self.max_ratio:g}"
                + (f" ({1 / self.max_ratio:.0f}x faster)" if self.max_ratio < 1 else "")
            )
        if self.max_seconds_10m is not None:
            parts.append(f"< {self.max_seconds_10m:g} s at 10M")
        if self.max_seconds is not None:
            parts.append(f"< {self.max_seconds * 1000:g} ms at any size")
        parts.append(f"peak < {self.max_rss_10m / GB:g} GB at 10M")
        return "; ".join(parts)


@dataclass(frozen=True)
class Case:
    """A library call, its baseline and its goal."""

    name: str
    title: str
    library: Side
    baseline: Side
    goal: Goal


def time_side(side: Side, ctx: Context, runs: int, warmup: int = 1) -> dict[str, Any]:
    """Seconds of each of ``runs`` timed runs after ``warmup`` untimed ones.

    ``times`` is wall-clock time; ``cpu`` the CPU time of the process (all its
    threads, DuckDB's included) during each run, which other work on a busy
    machine inflates far less.
    """
    ctx.work.mkdir(parents=True, exist_ok=True)
    state = side.prepare(ctx)
    times, cpu = [], []
    try:
        for index in range(warmup + runs):
            if side.reset is not None:
                side.reset(state)
            started, started_cpu = time.perf_counter(), time.process_time()
            side.run(state)
            elapsed, used = time.perf_counter() - started, time.process_time() - started_cpu
            if index >= warmup:
                times.append(elapsed)
                cpu.append(used)
    finally:
        if side.finish is not None:
            side.finish(state)
    return {"times": times, "cpu": cpu, "detail": state.get("detail", {})}


# --- shared helpers ---------------------------------------------------------------------------


def _read(ctx: Context) -> dict[str, Any]:
    con = store.connect(ctx.store, read_only=True)
    # The bar every command is held to: the store's policy, then the settings' asks.
    return {"con": con, "ctx": ctx, "bar": resolve_bar(con, ctx.settings.criteria)}


def _close(state: dict[str, Any]) -> None:
    con = state.get("con")
    if con is not None:
        con.close()


def _window(con: duckdb.DuckDBPyConnection, weeks: int) -> tuple[str, ...]:
    cursor = con.cursor()  # last_weeks leaves a result open; keep it off the main cursor
    try:
        return last_weeks(cursor, weeks)
    finally:
        cursor.close()


def _remove_store(path: Path) -> None:
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)


# --- ingest -----------------------------------------------------------------------------------


def _ingest_prepare(ctx: Context) -> dict[str, Any]:
    return {"ctx": ctx, "path": ctx.work / "ingest.duckdb", "con": None}


def _fresh_store(state: dict[str, Any]) -> None:
    """An empty, migrated store (the same schema for both sides), not timed."""
    _close(state)
    _remove_store(state["path"])
    state["con"] = store.connect(state["path"])


def _ingest_finish(state: dict[str, Any]) -> None:
    _close(state)
    _remove_store(state["path"])


INGEST = Case(
    name="ingest",
    title="Ingest a Parquet file into an empty store",
    library=Side(
        "store.ingest.ingest_files (validation, derived ids, dedup, form_versions, batch)",
        _ingest_prepare,
        lambda s: ingest_files(s["con"], [s["ctx"].parquet]),
        _fresh_store,
        _ingest_finish,
    ),
    baseline=Side(
        "INSERT INTO extractions SELECT * FROM read_parquet(...)",
        _ingest_prepare,
        lambda s: baselines.bare_insert(s["con"], s["ctx"].parquet),
        _fresh_store,
        _ingest_finish,
    ),
    goal=Goal(max_ratio=1.5),
)


# --- calibration report -----------------------------------------------------------------------


def _calibrate_prepare(ctx: Context) -> dict[str, Any]:
    state = _read(ctx)
    state["weeks"] = _window(state["con"], state["bar"].weeks)
    return state


def _calibrate(state: dict[str, Any]) -> object:
    return calibration_report(state["con"], Scope(weeks=state["weeks"]), state["bar"])


def _calibrate_pandas(state: dict[str, Any]) -> object:
    bar: Bar = state["bar"]
    return baselines.pandas_calibration(
        state["con"], state["weeks"], target=bar.target, confidence=bar.confidence,
        n_min=bar.n_min,
    )


CALIBRATE = Case(
    name="calibrate",
    title="Calibration report: every stratum's table, bins and thresholds (8 weeks)",
    library=Side(
        "calibration.report.calibration_report", _calibrate_prepare, _calibrate, None, _close
    ),
    baseline=Side(
        "pandas: load extractions, labels and audit items, then the same table",
        _calibrate_prepare,
        _calibrate_pandas,
        None,
        _close,
    ),
    goal=Goal(max_ratio=0.1, max_seconds_10m=2.0),
)


# --- drawing a week's sample ------------------------------------------------------------------


def _draw_prepare(ctx: Context) -> dict[str, Any]:
    """A private copy of the store (each run adds a sample version), and the newest week."""
    copy = ctx.work / "draw.duckdb"
    _remove_store(copy)
    shutil.copyfile(ctx.store, copy)
    con = store.connect(copy)
    week = store.latest_week(con.cursor())
    return {"con": con, "ctx": ctx, "week": week, "path": copy}


def _draw_finish(state: dict[str, Any]) -> None:
    _close(state)
    _remove_store(state["path"])


def _draw(state: dict[str, Any]) -> object:
    # As the demo qa_lead, whom the bench store's build granted the role.
    result = draw_sample(
        state["con"], state["week"], bench_design(), seed=state["ctx"].settings.seed,
        actor=QA_LEAD, redraw=True,
    )
    state["detail"] = {"week": result.week, "n_sample": result.n_sample,
                       "n_population": result.n_population}
    return result


def _hash_prepare(ctx: Context) -> dict[str, Any]:
    state = _read(ctx)
    con = state["con"]
    week = store.latest_week(con.cursor())
    row = con.execute(
        "SELECT sum(n_sample) FROM audit_cells c JOIN audit_samples s USING (sample_id)"
        " WHERE s.week = ? AND s.version = 1",
        [week],
    ).fetchall()
    state.update(week=week, size=int(row[0][0]))
    return state


def _md5_draw(state: dict[str, Any]) -> object:
    return baselines.md5_sample(
        state["con"], state["week"], state["ctx"].settings.seed, state["size"]
    )


def _cells_prepare(ctx: Context) -> dict[str, Any]:
    """The newest week and the draw's allocation per (doc_type, field, version, band)."""
    from fieldtrust.sampling.cells import plan_frame

    state = _read(ctx)
    design = bench_design()
    week = store.latest_week(state["con"].cursor())
    parts = plan_frame(state["con"], week, design).explode("form_versions")
    state.update(week=week, edges=list(design.bands[1:-1]), parts={
        "doc_types": parts["doc_type"].tolist(), "fields": parts["field"].tolist(),
        "versions": parts["form_versions"].tolist(), "bands": parts["band_index"].tolist(),
        "cells": parts["cell"].tolist(), "n": parts["n_sample"].tolist(),
    })
    return state


def _md5_cells_draw(state: dict[str, Any]) -> object:
    return baselines.md5_cell_sample(
        state["con"], state["week"], state["ctx"].settings.seed, state["edges"], state["parts"]
    )


def _hash_draw(state: dict[str, Any]) -> object:
    return baselines.hash_sample(
        state["con"], state["week"], state["ctx"].settings.seed, state["size"]
    )


DRAW = Case(
    name="draw",
    title="Draw the newest week's audit sample",
    library=Side(
        "sampling.draw.draw_sample (cells, md5 PRN, per-cell top-n, items and copy stored)",
        _draw_prepare,
        _draw,
        None,
        _draw_finish,
    ),
    baseline=Side(
        "SELECT ... WHERE week ORDER BY md5_number(seed:week:id) LIMIT n (same n, unstratified)",
        _hash_prepare,
        _md5_draw,
        None,
        _close,
    ),
    goal=Goal(max_ratio=2.0, max_seconds_10m=2.0, max_rss_10m=1.0 * GB),
)


DRAW_CELLS = Case(
    name="draw_cells",
    title="The same draw, against one bare query picking the same items",
    library=DRAW.library,
    baseline=Side(
        "SELECT ... WHERE week QUALIFY row_number() OVER (PARTITION BY cell ORDER BY"
        " md5_number(seed:week:id)) <= n_cell (the draw's own items, not stored)",
        _cells_prepare,
        _md5_cells_draw,
        None,
        _close,
    ),
    goal=Goal(),
)


DRAW_HASH = Case(
    name="draw_hash",
    title="The same draw, against an unstratified top-n by DuckDB's hash()",
    library=DRAW.library,
    baseline=Side(
        "SELECT ... WHERE week ORDER BY hash(seed, id) LIMIT n (same n, unstratified)",
        _hash_prepare,
        _hash_draw,
        None,
        _close,
    ),
    goal=Goal(),
)


# --- weekly estimates and alerts --------------------------------------------------------------


def _estimates(state: dict[str, Any]) -> object:
    return weekly_estimates(
        state["con"], Scope(weeks=state["weeks"]), confidence=state["bar"].confidence
    )


def _sql_estimates(state: dict[str, Any]) -> object:
    return baselines.weighted_accuracy_sql(state["con"], list(state["weeks"]))


def _sql_estimates_side(title: str, prepare: Callable[[Context], dict[str, Any]]) -> Side:
    """The baseline of the estimates and the alerts: Hajek point estimates of the state's weeks
    in one SQL query."""
    return Side(title, prepare, _sql_estimates, None, _close)


ESTIMATES = Case(
    name="estimates",
    title="Weekly estimates per (week, doc_type, field), 8 weeks",
    library=Side(
        "sampling.estimates.weekly_estimates (variances, Korn-Graubard intervals)",
        _calibrate_prepare,
        _estimates,
        None,
        _close,
    ),
    baseline=_sql_estimates_side("one SQL query: Hajek point estimates only", _calibrate_prepare),
    goal=Goal(),
)


def _alerts_prepare(ctx: Context) -> dict[str, Any]:
    state = _read(ctx)
    state["weeks"] = _window(state["con"], 10)  # the week and the 9 its tests compare with
    return state


def _alerts(state: dict[str, Any]) -> object:
    bar: Bar = state["bar"]
    return weekly_alerts(
        state["con"], state["weeks"][-1], target=bar.target, confidence=bar.confidence
    )


ALERTS = Case(
    name="alerts",
    title="Alerts for the newest week (below target, drop vs 8 weeks, sustained, new versions)",
    library=Side("sampling.alerts.weekly_alerts", _alerts_prepare, _alerts, None, _close),
    baseline=_sql_estimates_side(
        "one SQL query: Hajek estimates of the 10 weeks compared (no tests)", _alerts_prepare
    ),
    goal=Goal(),
)

# --- the review page's document viewer -------------------------------------------------------


def _render_prepare(ctx: Context) -> dict[str, Any]:
    """A one-page demo invoice of the store, drawn once (untimed) and kept as a file."""
    from fieldtrust.dashboard import render
    from fieldtrust.store.locations import Location

    from fieldtrust.demo.drawn_documents import demo_document, render_demo
    from fieldtrust.demo.page_layout import field_box

    state = _read(ctx)
    con = state["con"]
    row = con.execute(
        "SELECT e.extraction_id, e.doc_id FROM extractions e SEMI JOIN demo_truth t"
        " USING (extraction_id) WHERE e.doc_type = 'invoice' AND e.field = 'total'"
        " ORDER BY e.extraction_id LIMIT 1"
    ).fetchone()
    drawn, document = render_demo(con, row[1]), demo_document(con, row[1])
    assert drawn is not None and document is not None, "the bench store holds no demo invoice"
    path = ctx.work / "invoice.pdf"
    path.write_bytes(drawn.data)
    # The total's box as the demo's layout gives it (the bench data keeps no locations).
    bbox = field_box("invoice", document.form_version, "total",
                     document.fields["total"].text, False)
    state.update(path=path, bbox=bbox, render=render,
                 location=Location(row[0], row[1], path.name, 1, bbox))
    return state


def _render_reset(state: dict[str, Any]) -> None:
    state["render"].PAGES.clear()  # every timed run renders the page: the cache is no help


def _render(state: dict[str, Any]) -> object:
    """What the viewer does on a cache miss: find and read the file, render, box, encode."""
    render = state["render"]
    source = render.open_document(None, state["location"], root=state["path"].parent)
    image = render.page_image(source, 1, state["bbox"])
    assert isinstance(image, render.PageImage)
    return image


def _bare_render(state: dict[str, Any]) -> object:
    """pypdfium2 straight: open the PDF, render page 1 at the same width, encode PNG."""
    import io

    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(state["path"].read_bytes())
    page = pdf[0]
    image = page.render(scale=state["render"].PAGE_WIDTH / page.get_size()[0]).to_pil()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    pdf.close()
    return buffer.getvalue()


RENDER_PAGE = Case(
    name="render_page",
    title="The review page's document: a one-page demo invoice rendered with its value boxed",
    library=Side("dashboard.render.page_image (cache cleared each run)", _render_prepare,
                 _render, _render_reset, _close),
    baseline=Side("pypdfium2 render + PNG encode of the same page (no box, no checks)",
                  _render_prepare, _bare_render, None, _close),
    goal=Goal(max_seconds=0.3),
)

CASES: tuple[Case, ...] = (
    INGEST, CALIBRATE, DRAW, DRAW_CELLS, DRAW_HASH, ESTIMATES, ALERTS, RENDER_PAGE
)


def case_named(name: str) -> Case:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no case {name!r}; cases: {', '.join(c.name for c in CASES)}")
