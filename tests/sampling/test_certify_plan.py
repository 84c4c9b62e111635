"""The planner's answer: what a design certifies, when, and how to size it for a goal.

A real store with three labelled weeks: invoices 99.5% accurate, receipts
85%. The planner must say the invoices certify (and in which week), that the
receipts cannot at any volume (their error rate is above the allowance),
size a design for "certify invoice/total within N weeks" so that the sized
design, planned again, meets the goal while a smaller one does not, and say
the same through the CLI, in text and JSON, with one-line errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from fieldtrust.sampling.certify_plan import Goal, plan_certificates
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.planner import preview_design
from fieldtrust.store.bar import Bar

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError

PAST = ("2026-W45", "2026-W46", "2026-W47")
WEEK = "2026-W48"
BANDS = (0.0, 0.9, 1.0)
BAR = Bar()  # accuracy >= 0.95 at confidence 0.95, an 8-week window, n_min 100


def _fill(con: duckdb.DuckDBPyConnection, world) -> None:
    for i, week in enumerate((*PAST, WEEK)):
        world.insert(con, world.frame(week, 1500, seed=i, doc_types=("invoice",),
                                      accuracy_old=0.995, prefix="i"))
        world.insert(con, world.frame(week, 600, seed=10 + i, doc_types=("receipt",),
                                      accuracy_old=0.85, prefix="r"))
    for week in PAST:  # labelled weeks set each band's error rate
        sample = draw_sample(con, week, Design(bands=BANDS, base_rate=0.3), seed=1,
                             actor=world.qa_lead)
        world.label(con, sample.sample_id)


@pytest.fixture
def planned(con: duckdb.DuckDBPyConnection, world) -> duckdb.DuckDBPyConnection:
    _fill(con, world)
    return con


def _rows(con: duckdb.DuckDBPyConnection, design: Design, goal: Goal | None = None
          ) -> pd.DataFrame:
    return plan_certificates(con, WEEK, design, BAR, goal=goal).strata.to_pandas().set_index(
        ["doc_type", "field"])


def test_each_stratum_gets_its_threshold_week_or_reason(planned: duckdb.DuckDBPyConnection
                                                        ) -> None:
    design = Design(bands=BANDS, base_rate=0.3)
    rows = _rows(planned, design)
    invoice = rows.loc[("invoice", "total")]
    assert invoice["threshold"] in (0.0, 0.9)
    assert 1 <= invoice["certify_week"] <= BAR.weeks and pd.isna(invoice["reason"])
    # Its labels a week above the threshold are what the preview draws there.
    cells = preview_design(planned, WEEK, design).cells.to_pandas()
    mine = cells[(cells["doc_type"] == "invoice") & (cells["field"] == "total")]
    edge = {"[0.00,0.90)": 0.0, "[0.90,1.00]": 0.9}
    above = mine[mine["band"].map(edge) >= invoice["threshold"]]
    assert invoice["labels_per_week"] == above["n_sample"].sum()
    assert invoice["n_above"] == above["n_population"].sum()
    assert invoice["labels_needed"] == invoice["labels_per_week"] * invoice["certify_week"]
    assert invoice["labels_needed"] >= BAR.n_min
    receipt = rows.loc[("receipt", "total")]
    assert pd.isna(receipt["certify_week"]) and pd.isna(receipt["threshold"])
    assert receipt["reason"].startswith("cannot certify at any volume: the expected error rate")


def test_more_labels_never_certify_later(planned: duckdb.DuckDBPyConnection) -> None:
    weeks = [_rows(planned, Design(bands=BANDS, base_rate=rate)).loc[("invoice", "date"),
                                                                     "certify_week"]
             for rate in (0.1, 0.3, 1.0)]
    weeks = [w if pd.notna(w) else 99 for w in weeks]
    assert weeks == sorted(weeks, reverse=True) and weeks[-1] < weeks[0]


def test_a_goal_sizes_the_design_and_the_sized_design_meets_it(
    planned: duckdb.DuckDBPyConnection,
) -> None:
    goal = Goal.parse("invoice/total within 2 weeks")
    sizing = plan_certificates(planned, WEEK, Design(bands=BANDS), BAR, goal=goal).sizing
    assert sizing is not None and sizing.reason is None
    assert sizing.labels_per_week is not None and sizing.share_labelled is not None
    assert 0 < sizing.share_labelled < 1
    assert sizing.share_labelled == pytest.approx(sizing.labels_per_week / sizing.n_above)

    def week_at(share: float) -> float:
        row = _rows(planned, Design(bands=BANDS, base_rate=share)).loc[("invoice", "total")]
        return 99 if pd.isna(row["certify_week"]) else row["certify_week"]

    assert week_at(min(1.0, sizing.share_labelled + 0.02)) <= 2
    assert week_at(sizing.share_labelled * 0.8) > 2  # the sizing is not wasteful


def test_a_goal_no_size_meets_says_so(planned: duckdb.DuckDBPyConnection) -> None:
    sizing = plan_certificates(planned, WEEK, Design(bands=BANDS), BAR,
                               goal=Goal.parse("receipt/date within 4 weeks")).sizing
    assert sizing is not None and sizing.labels_per_week is None
    assert sizing.reason == ("receipt/date cannot certify within 4 weeks even with every item"
                             " labelled")


@pytest.mark.parametrize(("text", "message"), [
    ("invoice total in 4 weeks", "write it as DOC_TYPE/FIELD within N weeks"),
    ("invoice/total within 0 weeks", "the weeks must be at least 1"),
])
def test_goals_that_do_not_parse(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Goal.parse(text)


def test_the_cli_prints_the_table_and_the_sizing(db_path: Path, world) -> None:
    con = store.connect(db_path)
    world.grant(con)
    _fill(con, world)
    con.close()
    design = db_path.parent / "design.toml"
    design.write_text("[design]\nbands = [0, 0.9, 1]\nbase_rate = 0.3\n")
    runner = CliRunner()
    base = ["--db", str(db_path), "plan", "--week", WEEK, "--design", str(design)]
    text = runner.invoke(cli, [*base, "--goal", "invoice/total within 2 weeks"])
    assert text.exit_code == 0, text.output
    assert "what it can certify: extractions of 2026-W48 per (doc_type, field)" in text.output
    assert "goal invoice/total within 2 weeks: label " in text.output
    assert "cannot certify at any volume" in text.output
    raw = runner.invoke(cli, [*base, "--json"])
    payload = json.loads(raw.output)
    strata = {(r["doc_type"], r["field"]): r for r in payload["certify"]["strata"]}
    library = _rows(duckdb.connect(str(db_path), read_only=True),
                    Design(bands=BANDS, base_rate=0.3))
    assert strata[("invoice", "total")]["certify_week"] == library.loc[("invoice", "total"),
                                                                       "certify_week"]
    assert payload["certify"]["window"] == BAR.weeks and "sizing" not in payload["certify"]
    for goal, message in (("invoice total", "write it as DOC_TYPE/FIELD within N weeks"),
                          ("memo/total within 2 weeks", "which 2026-W48 does not hold")):
        bad = runner.invoke(cli, [*base, "--goal", goal])
        assert bad.exit_code == 2 and message in bad.output
        assert "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1
