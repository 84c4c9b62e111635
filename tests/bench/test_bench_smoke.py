"""The benchmark at a tiny size, so it cannot rot: every case runs and is reported.

No timing is asserted (benchmarks are not tests); what is asserted is that
every case and page ran beside its baseline, that the report carries each of
them with its ratio, and that the pandas baseline computes the same figures
as the library it is compared with.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fieldtrust.calibration.report import calibration_report
from fieldtrust.store.scope import Scope, last_weeks

from bench import baselines, report
from bench.cases import CASES
from bench.pages import PAGES
from bench.run import parse_size
from fieldtrust import store

ROOT = Path(__file__).resolve().parents[2]
ROWS = 20_000


# One worker runs this module: its module fixtures are built once, not once a worker.
pytestmark = pytest.mark.xdist_group("bench_smoke")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the documented command at 20,000 rows and 1 timed run per side."""
    folder = tmp_path_factory.mktemp("bench")
    out = folder / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--rows", str(ROWS), "--runs", "1",
         "--data", str(folder / "data"), "--out", str(out), "--timeout", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.with_suffix(".json").read_text())
    return {"text": out.read_text(), "results": results, "size": results["sizes"][str(ROWS)]}


def test_report_has_every_case_with_its_ratio(bench_run: dict[str, Any]) -> None:
    text = bench_run["text"]
    assert "failed" not in text, "a case failed or timed out; see the report"
    case_header = next(line for line in text.splitlines() if line.startswith("| case |"))
    assert "| ratio |" in case_header and "| baseline median (min–max) |" in case_header
    page_header = next(line for line in text.splitlines() if line.startswith("| page |"))
    assert "| ratio cold/warm |" in page_header
    for case in CASES:
        row = next(line for line in text.splitlines() if line.startswith(f"| **{case.name}** |"))
        ratio = row.split("|")[4].strip()
        assert float(ratio) > 0
    for page in PAGES:
        assert any(line.startswith(f"| **{page}** |") for line in text.splitlines())
    assert "| 2 |" in text or "| cores |" in text  # the machine table


def test_results_hold_runs_memory_and_load(bench_run: dict[str, Any]) -> None:
    size = bench_run["size"]
    assert size["rows"] == ROWS
    assert size["dataset"]["labelled"] > 0 and len(size["dataset"]["weeks"]) == 8
    for case in CASES:
        for side in ("library", "baseline"):
            result = size["cases"][case.name][side]
            assert len(result["times"]) == 1 and result["median"] > 0
            assert result["peak_rss"] > 50 * 1024**2  # a Python process with the libraries
    for page in PAGES:
        for kind in ("warm", "cold"):
            assert size["pages"][page][kind]["median"] > 0
        assert "data_version" in size["pages"][page]["warm"]["detail"]
    assert len(size["load_start"]) == 3


def test_pandas_baseline_computes_the_library_figures(bench_run: dict[str, Any]) -> None:
    con = store.connect(bench_run["size"]["dataset"]["store"], read_only=True)
    try:
        weeks = last_weeks(con.cursor(), 8)
        ours = calibration_report(con, Scope(weeks=weeks))
        theirs = baselines.pandas_calibration(con, weeks).set_index(["doc_type", "field"])
    finally:
        con.close()
    assert len(theirs) == len(ours.strata)
    for stratum in ours.strata:
        row = theirs.loc[(stratum.doc_type, stratum.field)]
        table = stratum.table
        assert row["n_population"] == table.n_population
        assert row["n_labeled"] == table.n_labeled
        assert row["mean_confidence"] == pytest.approx(table.mean_confidence, abs=1e-9)
        assert row["accuracy"] == pytest.approx(table.accuracy, abs=1e-9)
        assert row["brier"] == pytest.approx(table.brier, abs=1e-9)


@pytest.mark.parametrize(
    ("text", "rows"), [("20000", 20_000), ("20k", 20_000), ("1M", 1_000_000), ("2.5m", 2_500_000)]
)
def test_sizes_parse(text: str, rows: int) -> None:
    assert parse_size(text) == rows


def test_growth_is_relative_to_linear() -> None:
    points = [(1_000_000, 1.0, 0.0), (3_000_000, 3.0, 0.0), (10_000_000, 13.0, 0.0)]
    assert report.growth(points) == pytest.approx([1.0, 1.3])
    assert math.isclose(report.growth(points[:2])[0], 1.0)


def test_the_draw_baseline_picks_the_draws_own_sample(
    bench_run: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    from fieldtrust.sampling.draw import draw_sample

    from bench import cases
    from bench.generate import bench_design
    from fieldtrust.demo.users import QA_LEAD
    from fieldtrust.settings import Settings

    copy = tmp_path / "draw.duckdb"
    shutil.copyfile(bench_run["size"]["dataset"]["store"], copy)
    ctx = cases.Context(ROWS, copy, tmp_path / "none.parquet", tmp_path, Settings())
    con = store.connect(copy)
    try:
        week = store.latest_week(con.cursor())
        drawn = draw_sample(con, week, bench_design(), seed=ctx.settings.seed, actor=QA_LEAD,
                            redraw=True)
        ours = set(con.execute("SELECT extraction_id, cell FROM audit_items WHERE sample_id = ?",
                               [drawn.sample_id]).fetchall())
    finally:
        con.close()
    state = cases._cells_prepare(ctx)
    try:
        table = cases._md5_cells_draw(state)
    finally:
        cases._close(state)
    assert len(ours) == drawn.n_sample > 100
    picked = zip(table["extraction_id"].to_pylist(), table["cell"].to_pylist(), strict=True)
    assert set(picked) == ours
