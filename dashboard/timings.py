"""Time each page's data functions on a store: ``python -m fieldtrust.dashboard.timings --db PATH``.

Runs, per page, the reads the page makes on a first visit (default filters,
worst stratum, newest week), on one read-only connection per page run as
the dashboard does (dashboard.data.run_reads). *Cold* is the first run in a fresh process after the
imports (DuckDB's buffers empty); *warm* the second, still bypassing
Streamlit's cache (a cached read costs microseconds). Prints one line per page
with the slowest read, and every read with ``--verbose``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from fieldtrust.dashboard import data
from fieldtrust.sampling.design import Design
from fieldtrust.store.bar import resolve_bar
from fieldtrust.store.scope import Scope

from fieldtrust import store
from fieldtrust.errors import FieldtrustError

Call = tuple[str, tuple[Any, ...]]


def page_calls(path: str) -> dict[str, list[Call]]:
    """The reads each page makes on a first visit, with the arguments it would pass."""
    with data.reading(path) as con:
        bar = resolve_bar(con, data.settings().criteria)  # as data.bar(), on this path
        options = data.filter_options(con)
        sample_id = data.current_sample(con)
        extraction = con.execute("SELECT min(extraction_id) FROM extractions").fetchall()[0][0]
    weeks = options.weeks[-min(bar.weeks, len(options.weeks)):]
    scope = Scope(weeks=weeks)
    week = options.weeks[-1]
    report = (scope, bar, 10, "quantile")
    with data.reading(path) as con:
        worst = data.calibration_report(con, *report).strata[0]
    stratum = (worst.doc_type, worst.field)
    shared: list[Call] = [("filter_options", ()), ("users", ())]
    return {
        "overview": [*shared, ("calibration_report", report)],
        "calibration": [
            *shared, ("calibration_report", report), ("recalibration_info", stratum),
            ("confidence_histogram", (*stratum, scope, 40)),
            ("threshold_curve", (*stratum, scope, bar)),
        ],
        "audit": [
            *shared, ("preview_design", (week, Design().canonical_json())),
            ("week_sample", (week,)), ("sample_progress", (sample_id,)),
            ("cell_progress", (sample_id,)), ("weekly_alerts", (week, bar.target,
                                                                bar.confidence)),
            ("weekly_estimates", (scope, bar.confidence)),
            ("adjudication_queue", (scope,)), ("error_report", (scope,)),
        ],
        "review": [
            *shared, ("current_sample", ()), ("sample_progress", (sample_id,)),
            ("item_context", (extraction, "ana", sample_id)),
            ("priority_queue", (scope, 200)),
        ],
        "automation": [
            *shared, ("calibration_report", report), ("current_policy", ()),
            ("revocations", (bar.policy_or_stricter(),)), ("policy_export", ()),
            ("decision_history", ()),
        ],
    }


def _time(path: str, name: str, args: tuple[Any, ...]) -> float:
    started = time.perf_counter()
    with data.reading(path) as con:
        data._QUERIES[name](con, *args)
    return time.perf_counter() - started


def time_pages(path: str, report: Callable[[str], None] = print, verbose: bool = False,
               pages: tuple[str, ...] = ()) -> dict[str, tuple[float, float]]:
    """Cold and warm seconds of every page's reads (or of ``pages``); a line per page."""
    calls = page_calls(path)
    results = {}
    for page, reads in calls.items():
        if pages and page not in pages:
            continue
        runs = []
        for _ in range(2):
            with data.run_reads(path):  # one connection per page run, as the dashboard
                runs.append([(name, _time(path, name, args)) for name, args in reads])
        cold, warm = (sum(t for _, t in run) for run in runs)
        slowest = max(runs[0], key=lambda item: item[1])
        report(f"{page:12s} cold {cold:6.2f} s  warm {warm:6.2f} s"
               f"  (slowest cold: {slowest[0]} {slowest[1]:.2f} s)")
        if verbose:
            for (name, first), (_, second) in zip(runs[0], runs[1], strict=True):
                report(f"    {name:22s} {first:6.3f} {second:6.3f}")
        results[page] = (cold, warm)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="store to time (e.g. the demo store)")
    parser.add_argument("--verbose", action="store_true", help="time of every read")
    parser.add_argument("--pages", nargs="*", default=(), help="only these pages")
    args = parser.parse_args()
    try:
        store.connect(args.db, read_only=True).close()  # fail early on a missing store
        # The policy export signs what it writes, with the settings' key, as the page does.
        with data.signing_keys():
            time_pages(args.db, verbose=args.verbose, pages=tuple(args.pages))
    except FieldtrustError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
