"""No page run scans the extractions: pages read the rollup, the sampled copy and labels.

Every read a page makes on a first visit (bench.pages lists them, with the
entry point's) runs on the demo store through DuckDB's profiler
(tests/dashboard/profiled.py), which reports each table scan with the rows it
read and the filters pushed into it. A scan of ``extractions`` is allowed only
as a lookup of given ids (the review screen's item, the waiting adjudications'
values); anything else would grow with the store.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fieldtrust.dashboard import data
from fieldtrust.sampling import queue
from fieldtrust.store.scope import Scope

from bench import pages
from fieldtrust import store
from fieldtrust.settings import Settings
from tests.dashboard.profiled import Profiled


@pytest.fixture(scope="module")
def inputs(demo_template: Path) -> pages.PageInputs:
    return pages.resolve_inputs(demo_template, Settings())


@pytest.mark.parametrize("page", list(pages.PAGES))
def test_a_page_run_scans_no_extractions(
    demo_template: Path, inputs: pages.PageInputs, page: str
) -> None:
    settings = Settings()
    con = store.connect(demo_template, read_only=True)
    try:
        profiled = Profiled(con)
        profiled.execute(data._VERSION_SQL).fetchall()
        reads = [*pages._entry(inputs, settings), *pages.PAGES[page](inputs, settings)]
        for name, args in reads:
            before = len(profiled.scans)
            data._QUERIES[name](profiled, *args)
            full = [s for s in profiled.scans[before:] if not s.by_id]
            assert not full, (
                f"{page}: {name} scanned {full[0].rows_scanned:,} extraction rows:"
                f" {' '.join(full[0].sql.split())[:300]}"
            )
    finally:
        con.close()


def test_the_profiler_sees_a_scan_of_the_extractions(demo_template: Path) -> None:
    con = store.connect(demo_template, read_only=True)
    try:
        profiled = Profiled(con)
        queue._ranked_rows(profiled, Scope(), 5)  # the queue ranking every row
        rows = con.sql("SELECT count(*) FROM extractions").fetchall()[0][0]
    finally:
        con.close()
    assert max(s.rows_scanned for s in profiled.scans if not s.by_id) == rows
