"""Seeds at the draw: known wrong values mixed into the review queue, never labels (issue 23).

Real DuckDB files: a week of invoices (total, tax, date per document), the
policy's seed_rate set by an admin, the sample drawn through the one door,
items handed out and judged through the review path.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from fieldtrust.calibration.seeds import MIN_SEEDS, SeedJudgements
from fieldtrust.labels.assignment import item_view, next_items
from fieldtrust.labels.label_studio import write_tasks
from fieldtrust.labels.review_progress import item_context
from fieldtrust.labels.seed_verdicts import TOO_FEW_SEEDS, seed_judgements, seed_refusal
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.samples import sample_items
from fieldtrust.sampling.seed_values import wrong_value
from fieldtrust.store.access import bootstrap_admin, grant_role
from fieldtrust.store.bar import Bar
from fieldtrust.store.locations import document_location

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.conftest import Builder
from tests.seeded import WEEK, invoices, seeded_store


@pytest.fixture
def seeded(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return seeded_store(tmp_path / "seeds.duckdb")


def _seeds(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.sql("SELECT * FROM seed_items ORDER BY seed_id").df()


def test_seed_rate_is_a_bar_setting_checked_from_0_to_half() -> None:
    assert Bar().seed_rate == 0.0
    assert Bar(seed_rate=0.5).seed_rate == 0.5
    with pytest.raises(InputError, match=r"seed_rate = 0.6 must be between 0 and 0.5"):
        Bar(seed_rate=0.6)


def test_the_draw_adds_a_tenth_of_each_stratum_as_seeds_apart_from_the_sample(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    seeds = _seeds(seeded)
    per_field = seeded.sql(
        "SELECT c.field, sum(n_sample) AS n FROM audit_cells c GROUP BY c.field"
    ).df().set_index("field")["n"]
    made = seeds.groupby("field").size()
    for field_name, n in per_field.items():
        assert made[field_name] == int(np.ceil(0.1 * n))
    # Never an extraction, never an audit item: no estimate can see one.
    assert seeded.sql("SELECT count(*) FROM extractions e JOIN seed_items s"
                      " ON e.extraction_id = s.seed_id").fetchall() == [(0,)]
    assert seeded.sql("SELECT count(*) FROM audit_items i JOIN seed_items s"
                      " ON i.extraction_id = s.seed_id OR i.extraction_id = s.host_extraction_id"
                      ).fetchall() == [(0,)]
    # Each seed's value is wrong: never the host's own value.
    assert (seeds["seed_value"].str.strip() != seeds["true_value"].str.strip()).all()
    assert set(seeds["seed_kind"]) <= {"sibling_field", "digit_swap", "neighbour_date"}
    assert {"sibling_field", "digit_swap"} <= set(seeds["seed_kind"])


def test_the_same_draw_makes_the_same_seeds(tmp_path: Path) -> None:
    made = []
    for name in ("a", "b"):
        con = store.connect(tmp_path / f"{name}.duckdb")
        bootstrap_admin(con, "root")
        grant_role(con, "root", "quinn", "qa_lead")
        Builder(con).extractions(invoices(600))
        draw_sample(con, WEEK, Design(base_rate=0.05), seed=5, actor="quinn", seed_rate=0.2)
        made.append(_seeds(con).drop(columns="created_at"))
        con.close()
    pd.testing.assert_frame_equal(made[0], made[1])
    assert len(made[0]) > 0


def test_no_seeds_at_the_default_rate(tmp_path: Path) -> None:
    con = store.connect(tmp_path / "off.duckdb")
    bootstrap_admin(con, "root")
    grant_role(con, "root", "quinn", "qa_lead")
    Builder(con).extractions(invoices(300))
    draw_sample(con, WEEK, Design(base_rate=0.05), seed=5, actor="quinn")
    assert con.sql("SELECT count(*) FROM seed_items").fetchall() == [(0,)]


def test_a_seed_looks_like_any_item_and_its_verdict_is_no_label(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    sample = seeded.sql("SELECT sample_id FROM audit_samples").fetchall()[0][0]
    n_items = seeded.sql("SELECT count(*) FROM audit_items").fetchall()[0][0]
    n_seeds = len(_seeds(seeded))
    items = next_items(seeded, "ana", sample, count=n_items + n_seeds)
    seed_ids = set(_seeds(seeded)["seed_id"])
    shown_seeds = [i for i in items if i.extraction_id in seed_ids]
    assert len(shown_seeds) == n_seeds and len(items) == n_items + n_seeds
    # Spread through the queue, not bunched at its end.
    places = [k for k, item in enumerate(items) if item.extraction_id in seed_ids]
    assert places[0] < len(items) / 4 and places[-1] > len(items) / 2
    first = shown_seeds[0]
    host = seeded.execute("SELECT host_extraction_id, seed_value FROM seed_items"
                          " WHERE seed_id = ?", [first.extraction_id]).fetchall()[0]
    real = seeded.execute("SELECT doc_id, field, source_excerpt, confidence FROM extractions"
                          " WHERE extraction_id = ?", [host[0]]).fetchall()[0]
    assert (first.doc_id, first.field, first.source_excerpt) == real[:3]
    assert (first.value, first.value_status) == (host[1], "present")
    assert item_view(seeded, "ana", sample, first.extraction_id) == first
    assert item_context(seeded, first.extraction_id, "ana", sample).confidence == real[3]
    location = document_location(seeded, first.extraction_id)
    assert location is not None and location.doc_id == real[0]

    label = record_verdict(seeded, actor="ana", extraction_id=first.extraction_id,
                           verdict="correct", sample_id=sample, review_round="primary")
    assert (label.extraction_id, label.review_round, label.verdict) == (
        first.extraction_id, "primary", "correct")
    assert seeded.sql("SELECT count(*) FROM labels").fetchall() == [(0,)]
    assert seeded.sql("SELECT verdict, reviewer FROM seed_verdicts").fetchall() == [
        ("correct", "ana")]
    assert item_context(seeded, first.extraction_id, "ana", sample).reviewer_labelled == 1
    # The judged seed leaves the reviewer's queue, and nobody else gets it.
    assert first.extraction_id not in {i.extraction_id for i in next_items(
        seeded, "ana", sample, count=n_items + n_seeds)}
    assert first.extraction_id not in {i.extraction_id for i in next_items(
        seeded, "ben", sample, count=n_items + n_seeds)}


def test_an_incorrect_verdict_on_a_seed_needs_what_any_incorrect_verdict_needs(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    # The one verdict rule: an absent field has no corrected value, on a seed as anywhere.
    seed_id = _seeds(seeded)["seed_id"].iloc[0]
    with pytest.raises(InputError, match="Absent"):
        record_verdict(seeded, actor="ana", extraction_id=seed_id, verdict="incorrect",
                       corrected_status="null", corrected_value="12.50")
    assert seeded.sql("SELECT count(*) FROM seed_verdicts").fetchall() == [(0,)]


def test_seed_judgements_count_judged_and_missed_per_stratum(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    seeds = _seeds(seeded)
    totals = seeds[seeds["field"] == "total"]["seed_id"].tolist()
    assert len(totals) > MIN_SEEDS

    def judge(ids: list[str]) -> None:
        for seed_id in ids:
            if int(seed_id[-4:], 16) % 3 == 0:
                record_verdict(seeded, actor="ana", extraction_id=seed_id, verdict="correct")
            else:
                record_verdict(seeded, actor="ben", extraction_id=seed_id, verdict="incorrect",
                               corrected_value="1.00", error_type="wrong_field")

    missed = sum(int(s[-4:], 16) % 3 == 0 for s in totals)
    judge(totals[:12])
    early = seed_judgements(seeded, doc_type="invoice", field="total")
    assert early.judged == 12
    refusal = seed_refusal(early)
    assert refusal is not None and refusal.code == TOO_FEW_SEEDS
    assert refusal.text == f"refused: 12 seeds judged, at least {MIN_SEEDS} needed"
    judge(totals[12:])
    judged = seed_judgements(seeded, doc_type="invoice", field="total")
    assert judged == SeedJudgements(judged=len(totals), missed=missed)
    assert seed_refusal(judged) is None
    assert seed_judgements(seeded, doc_type="invoice", field="tax") == SeedJudgements(0, 0)


@pytest.mark.parametrize(("value", "siblings", "kinds"), [
    ("1423.50", [("total", "7117.50")], {"sibling_field", "digit_swap"}),
    ("2026-03-13", [("total", "12.00")], {"digit_swap", "neighbour_date"}),
    ("ACME Ltd", [("total", "12.00")], set()),
    ("1111", [], set()),
])
def test_wrong_values_are_of_the_same_kind_and_never_the_value(
    value: str, siblings: list[tuple[str, str]], kinds: set[str],
) -> None:
    made = {wrong_value(value, siblings, u) for u in np.linspace(0, 0.999, 40)}
    assert {m.kind for m in made if m is not None} == kinds
    for m in made:
        if m is not None:
            assert m.value.strip() != value
            if m.kind == "sibling_field":
                assert (m.source_field, m.value) == siblings[0]
            if m.kind == "neighbour_date":
                gap = dt.date.fromisoformat(m.value) - dt.date.fromisoformat(value)
                assert 1 <= abs(gap.days) <= 2


def test_the_sheet_export_mixes_seeds_in_and_their_verdicts_come_back_as_seed_verdicts(
    seeded: duckdb.DuckDBPyConnection, tmp_path: Path,
) -> None:
    db = Path(seeded.execute("SELECT path FROM duckdb_databases()"
                             " WHERE database_name = current_database()").fetchall()[0][0])
    seeded.close()
    sheet = tmp_path / "sample.csv"
    drawn = CliRunner().invoke(cli, ["--db", str(db), "sample", "--week", WEEK, "--seed", "11",
                                     "--design", str(_design_file(tmp_path)), "--out",
                                     str(sheet), "--as", "quinn"])
    assert drawn.exit_code == 0, drawn.output
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    con = store.connect(db)
    seeds = dict(con.sql("SELECT seed_id, seed_value FROM seed_items").fetchall())
    n_items = con.sql("SELECT count(*) FROM audit_items").fetchall()[0][0]
    con.close()
    assert len(rows) == n_items + len(seeds)
    shown = [r for r in rows if r["extraction_id"] in seeds]
    assert {r["extraction_id"]: r["value"] for r in shown} == seeds
    assert "confidence" not in rows[0]  # hidden from reviewers, seeds and items alike
    assert all(r["inclusion_prob"] and r["cell"] for r in shown)  # no blank gives it away
    for r in rows:  # the reviewer passes everything: each seed is a miss
        r["verdict"], r["reviewer"] = "correct", "ana"
    with sheet.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    imported = CliRunner().invoke(cli, ["--db", str(db), "labels", "import", str(sheet),
                                        "--as", "quinn", "--json"])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["rows_added"] == n_items + len(seeds)
    con = store.connect(db)
    assert con.sql("SELECT count(*) FROM labels").fetchall() == [(n_items,)]
    assert con.sql("SELECT count(*), count(*) FILTER (WHERE verdict = 'correct')"
                   " FROM seed_verdicts").fetchall() == [(len(seeds), len(seeds))]
    assert con.sql("SELECT count(*) FROM labels l JOIN seed_items s"
                   " ON l.extraction_id = s.seed_id").fetchall() == [(0,)]
    con.close()


def test_label_studio_tasks_carry_the_seeds_as_items(
    seeded: duckdb.DuckDBPyConnection, tmp_path: Path,
) -> None:
    sample = seeded.sql("SELECT sample_id FROM audit_samples").fetchall()[0][0]
    items = sample_items(seeded, sample, with_seeds=True)
    tasks = tmp_path / "tasks.json"
    write_tasks(items, tasks)
    written = json.loads(tasks.read_text(encoding="utf-8"))
    seed_ids = {s for (s,) in seeded.sql("SELECT seed_id FROM seed_items").fetchall()}
    in_tasks = [t["data"] for t in written if t["data"]["extraction_id"] in seed_ids]
    assert len(in_tasks) == len(seed_ids)
    assert set(in_tasks[0]) == set(written[0]["data"])  # the same keys as a real task
    assert len(sample_items(seeded, sample)) == len(items) - len(seed_ids)


def _design_file(folder: Path) -> Path:
    path = folder / "design.toml"
    path.write_text("base_rate = 0.05\n", encoding="utf-8")
    return path
