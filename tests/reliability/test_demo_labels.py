"""The demo store: any size builds, and its labels export imports back (issue 25, faults 21, 23).

Fault 21: the demo held labels dated days ahead of the clock (the newest
week's reviews were spread over the working days after it, which had not all
come yet), so its own ``labels export`` did not import back. Fault 23:
``demo --rows 200`` (also 100 and 300) ended in an Arrow schema mismatch.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner
from fieldtrust.store.weeks import Week

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.demo import build_demo
from fieldtrust.demo.reviewers import simulate_reviews
from tests.conftest import file_rows


@pytest.mark.parametrize("rows", [100, 200, 300])
def test_a_small_demo_builds(rows: int, tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(db), "demo", "--rows", str(rows)])
    assert result.exit_code == 0, (result.output, result.exc_info)
    assert file_rows(db, "SELECT count(*) FROM extractions") == [(rows,)]
    assert file_rows(db, "SELECT count(*) > 0 FROM labels") == [(True,)]


def test_the_demos_labels_export_imports_back(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    assert CliRunner().invoke(cli, ["--db", str(db), "demo", "--rows", "600"]).exit_code == 0
    out = tmp_path / "labels.csv"
    assert CliRunner().invoke(cli, ["--db", str(db), "labels", "export", "--out",
                                    str(out)]).exit_code == 0
    result = CliRunner().invoke(cli, ["--db", str(db), "labels", "import", str(out),
                                      "--as", "quinn"])
    assert result.exit_code == 0, result.output
    assert "added 0 new labels and 0 replacing" in result.output  # every one already there


def test_no_demo_label_lies_ahead_of_the_clock(tmp_path: Path) -> None:
    # The clock a day after the newest week ended: most of its review days are still to come.
    end = Week("2026-W48").end
    now = end + dt.timedelta(days=1)
    con = store.connect(tmp_path / "demo.duckdb")
    try:
        build_demo(con, rows=600, labelled=False)
        simulate_reviews(con, seed=7, now=now)
        latest, newest = con.execute(
            "SELECT max(labeled_at), max(labeled_at) FILTER (WHERE sample_id LIKE '2026-W48%')"
            " FROM labels"
        ).fetchall()[0]
        assert latest <= now and newest >= end  # reviewed after the week, before now
    finally:
        con.close()
