"""The dashboard pages' data functions, called as a page render calls them on a cache miss.

Every render runs the entry point's reads (data version, users for the demo
picker, filter options), then the page's, on the one read-only connection a
page run shares (:func:`fieldtrust.dashboard.data.run_reads`), and calls the function
registered for ``data.cached``, exactly what ``dashboard.data._cached_call``
does when the Streamlit cache misses (a new label changes the data version,
so every page misses once after each label). The Streamlit cache itself is
left out: a hit costs microseconds.

*Warm*: the page rendered before in this process (lazy imports done, the
operating system's file cache warm). *Cold*: the first render in a fresh
process, with the libraries imported but no DuckDB database ever opened.

Writes are left out (the review page's ``next_items`` assigns an item).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldtrust.store.bar import Bar, resolve_bar

from bench.generate import bench_design, signing_key
from fieldtrust.settings import Settings

#: A page's reads: (registered query name, arguments built from the page inputs).
Calls = list[tuple[str, tuple[Any, ...]]]


@dataclass(frozen=True)
class PageInputs:
    """What the pages' default widgets select, resolved once per store."""

    weeks: tuple[str, ...]
    week: str
    sample_id: str | None
    current_sample: str | None
    doc_type: str
    field: str
    extraction_id: str | None
    reviewer: str
    bar: Bar  # the store's policy with the settings' asks, as data.bar() resolves it


def _scope(inputs: PageInputs) -> Any:
    from fieldtrust.dashboard.data import scope_from

    return scope_from(inputs.weeks, (), ())


def _report_args(inputs: PageInputs, s: Settings) -> tuple[Any, ...]:
    return (_scope(inputs), inputs.bar, 10, "quantile")


def _entry(inputs: PageInputs, s: Settings) -> Calls:
    return [("users", ()), ("role_of", ("quinn",)), ("filter_options", ())]


def _overview(inputs: PageInputs, s: Settings) -> Calls:
    return [("calibration_report", _report_args(inputs, s))]


def _calibration(inputs: PageInputs, s: Settings) -> Calls:
    scope = _scope(inputs)
    return [
        ("calibration_report", _report_args(inputs, s)),
        ("recalibration_info", (inputs.doc_type, inputs.field)),
        ("confidence_histogram", (inputs.doc_type, inputs.field, scope, 40)),
        ("threshold_curve", (inputs.doc_type, inputs.field, scope, inputs.bar)),
    ]


def _audit(inputs: PageInputs, s: Settings) -> Calls:
    scope = _scope(inputs)
    calls: Calls = [
        ("preview_design", (inputs.week, bench_design().canonical_json())),
        ("week_sample", (inputs.week,)),
    ]
    if inputs.sample_id is not None:
        calls += [("cell_progress", (inputs.sample_id,)),
                  ("sample_progress", (inputs.sample_id,))]
    return [
        *calls,
        ("weekly_alerts", (inputs.week, inputs.bar.target, inputs.bar.confidence)),
        ("weekly_estimates", (scope, inputs.bar.confidence)),
        ("adjudication_queue", (scope,)),
        ("error_report", (scope,)),
    ]


def _review(inputs: PageInputs, s: Settings) -> Calls:
    calls: Calls = [("current_sample", ())]
    if inputs.current_sample is not None:
        calls.append(("sample_progress", (inputs.current_sample,)))
        if inputs.extraction_id is not None:
            calls.append(
                ("item_context", (inputs.extraction_id, inputs.reviewer, inputs.current_sample))
            )
    return [*calls, ("priority_queue", (_scope(inputs), 200))]


def _automation(inputs: PageInputs, s: Settings) -> Calls:
    return [
        ("calibration_report", _report_args(inputs, s)),
        ("current_policy", ()),
        ("revocations", (inputs.bar.policy_or_stricter(),)),
        ("decision_history", ()),
        ("policy_export", ()),
    ]


PAGES: dict[str, Callable[[PageInputs, Settings], Calls]] = {
    "overview": _overview,
    "calibration": _calibration,
    "audit": _audit,
    "review": _review,
    "automation": _automation,
}


def resolve_inputs(store_path: Path, settings: Settings) -> PageInputs:
    """The default widget values of every page, read from the store."""
    from fieldtrust.calibration.report import calibration_report
    from fieldtrust.store.scope import Scope, last_weeks

    from fieldtrust import store

    con = store.connect(store_path, read_only=True)
    try:
        bar = resolve_bar(con, settings.criteria)
        weeks = last_weeks(con.cursor(), bar.weeks)
        week = weeks[-1]
        sample = con.execute(
            "SELECT sample_id FROM audit_samples WHERE week = ? ORDER BY version DESC LIMIT 1",
            [week],
        ).fetchall()
        newest = con.execute(
            "SELECT sample_id FROM audit_samples ORDER BY week DESC, version DESC LIMIT 1"
        ).fetchall()
        current = newest[0][0] if newest else None
        item = con.execute(
            "SELECT extraction_id FROM audit_items WHERE sample_id = ?"
            " ORDER BY cell, prn LIMIT 1",
            [current],
        ).fetchall()
        report = calibration_report(con, Scope(weeks=weeks), bar)
        worst = report.strata[0]  # the page's default stratum: worst accuracy first
        return PageInputs(
            weeks=weeks, week=week, sample_id=sample[0][0] if sample else None,
            current_sample=current, doc_type=worst.doc_type, field=worst.field,
            extraction_id=item[0][0] if item else None, reviewer="ana", bar=bar,
        )
    finally:
        con.close()


def render_page(page: str, store_path: Path, inputs: PageInputs, settings: Settings
                ) -> dict[str, float]:
    """Seconds of each read of one render of ``page`` (entry point reads first)."""
    from fieldtrust.dashboard import data
    from fieldtrust.store.signing import using

    path = str(store_path)
    timings: dict[str, float] = {}
    # One connection for the render, as the dashboard's entry point; the policy export
    # signs with the store's key, as a served dashboard does.
    with data.run_reads(path), using(str(signing_key(store_path))):
        started = time.perf_counter()
        data.data_version(path)
        timings["data_version"] = time.perf_counter() - started
        for name, args in [*_entry(inputs, settings), *PAGES[page](inputs, settings)]:
            started = time.perf_counter()
            with data.reading(path) as con:
                data._QUERIES[name](con, *args)
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
    return timings


def time_page_warm(page: str, store_path: Path, inputs: PageInputs, settings: Settings,
                   runs: int, warmup: int = 1) -> dict[str, Any]:
    """Renders after ``warmup`` untimed ones: total seconds per run and per-read medians."""
    runs_detail, cpu = [], []
    for index in range(warmup + runs):
        started_cpu = time.process_time()
        timings = render_page(page, store_path, inputs, settings)
        if index >= warmup:
            runs_detail.append(timings)
            cpu.append(time.process_time() - started_cpu)
    return {"times": [sum(t.values()) for t in runs_detail], "cpu": cpu,
            "detail": _per_read(runs_detail)}


def time_page_cold(page: str, store_path: Path, inputs: PageInputs, settings: Settings
                   ) -> dict[str, Any]:
    """One render, the first in this process."""
    started_cpu = time.process_time()
    timings = render_page(page, store_path, inputs, settings)
    return {"times": [sum(timings.values())], "cpu": [time.process_time() - started_cpu],
            "detail": timings}


def _per_read(runs: list[dict[str, float]]) -> dict[str, float]:
    import statistics

    names = runs[0] if runs else {}
    return {name: statistics.median(r[name] for r in runs) for name in names}
