from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from fieldtrust.sampling.cells import plan_cells
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import _insert_items, draw_sample
from fieldtrust.sampling.items_csv import ITEM_COLUMNS
from fieldtrust.sampling.prn import candidate_cutoffs, prn
from fieldtrust.sampling.samples import current_sample_id, load_sample, sample_items
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import Week

from fieldtrust import store
from fieldtrust.errors import InputError
from tests.conftest import table_fingerprint

WEEK = "2026-W48"
SEED = 7


def drawn(con: duckdb.DuckDBPyConnection, sample_id: str) -> pd.DataFrame:
    return (
        con.sql(
            "SELECT extraction_id, cell, inclusion_prob, prn, double_review FROM audit_items"
            " WHERE sample_id = ? ORDER BY extraction_id",
            params=[sample_id],
        )
        .to_arrow_table()
        .to_pandas()
    )


def fresh(tmp_path: Path, name: str, world) -> duckdb.DuckDBPyConnection:
    """Another store, whose qa_lead may draw (as the ``con`` fixture's)."""
    con = store.connect(tmp_path / f"{name}.duckdb")
    world.grant(con)
    return con


def expected_cells(
    frame: pd.DataFrame, design: Design, new_versions: frozenset[str] = frozenset()
) -> pd.Series:
    """Cell of each row, computed here without SQL."""
    inner = np.asarray(design.bands[1:-1])
    band = np.asarray(design.band_labels)[np.searchsorted(inner, frame["confidence"], side="right")]
    status = np.where(frame["form_version"].isin(new_versions), "new", "established")
    return pd.Series(
        frame["doc_type"] + "|" + frame["field"] + "|" + band + "|" + status, index=frame.index
    )


def test_same_inputs_give_identical_samples(tmp_path: Path, world) -> None:
    frame = world.frame(WEEK, 4000, seed=1)
    samples = []
    for name in ("a", "b"):
        con = fresh(tmp_path, name, world)
        world.insert(con, frame)
        samples.append(drawn(con, draw_sample(con, WEEK, seed=SEED, actor=world.qa_lead).sample_id))
        con.close()
    pd.testing.assert_frame_equal(samples[0], samples[1])
    assert len(samples[0]) > 100


def test_row_order_and_threads_do_not_matter(tmp_path: Path, world) -> None:
    frame = world.frame(WEEK, 4000, seed=2)
    con = fresh(tmp_path, "ordered", world)
    world.insert(con, frame)
    reference = drawn(con, draw_sample(con, WEEK, seed=SEED, actor=world.qa_lead).sample_id)
    shuffled = fresh(tmp_path, "shuffled", world)
    shuffled.execute("SET threads = 1")
    mixed = frame.sample(frac=1.0, random_state=3)
    for start in range(0, len(mixed), 600):
        world.insert(shuffled, mixed.iloc[start : start + 600])
    pd.testing.assert_frame_equal(
        reference,
        drawn(shuffled, draw_sample(shuffled, WEEK, seed=SEED, actor=world.qa_lead).sample_id),
    )


def test_prn_is_the_documented_md5_number(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 600, seed=3))
    items = drawn(con, draw_sample(con, WEEK, seed=SEED, actor=world.qa_lead).sample_id)
    assert items["prn"].tolist() == [prn(SEED, WEEK, i) for i in items["extraction_id"]]
    assert ((items["prn"] >= 0) & (items["prn"] < 1)).all()


def test_each_cell_takes_its_smallest_prns(con: duckdb.DuckDBPyConnection, world) -> None:
    frame = world.frame(WEEK, 3000, seed=4)
    world.insert(con, frame)
    design = Design(base_rate=0.05, minimum=5)
    sample = draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead)
    frame["cell"] = expected_cells(frame, design)
    frame["u"] = [prn(SEED, WEEK, i) for i in frame["extraction_id"]]
    cells = sample.cells.to_pandas().set_index("cell")
    expected = set()
    for cell, rows in frame.groupby("cell"):
        n_h = min(len(rows), max(5, math.ceil(round(0.05 * len(rows), 9))))
        assert cells.loc[cell, "n_population"] == len(rows)
        assert cells.loc[cell, "n_sample"] == n_h
        expected |= set(rows.nsmallest(n_h, "u")["extraction_id"])
    assert set(drawn(con, sample.sample_id)["extraction_id"]) == expected


def test_inclusion_probabilities_are_n_over_n(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 5000, seed=5, new_share=0.1))
    design = Design(base_rate=0.1, minimum=8, cap=20)
    sample = draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead)
    cells = sample.cells.to_pandas()
    counts = (
        drawn(con, sample.sample_id)
        .groupby("cell")
        .agg(
            n=("extraction_id", "size"),
            pi_min=("inclusion_prob", "min"),
            pi_max=("inclusion_prob", "max"),
        )
    )
    merged = cells.set_index("cell").join(counts)
    assert (merged["n"] == merged["n_sample"]).all()
    assert np.allclose(merged["inclusion_prob"], merged["n_sample"] / merged["n_population"])
    assert (merged["pi_min"] == merged["inclusion_prob"]).all()
    assert (merged["pi_max"] == merged["inclusion_prob"]).all()
    assert (merged["n_sample"] >= np.minimum(merged["n_population"], 8)).all()
    assert (merged["n_sample"] <= 20).all()
    assert merged["n_sample"].max() == 20  # the cap binds somewhere, so the test can fail
    assert sample.n_population == 5000


def test_new_form_versions_are_boosted(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 20000, seed=7, new_share=0.2))
    design = Design(base_rate=0.01, minimum=2, boost=5)
    cells = draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead).cells.to_pandas()
    new = cells["version_status"] == "new"
    assert set(cells["version_status"]) == {"new", "established"}
    rate_new = cells.loc[new, "n_sample"].sum() / cells.loc[new, "n_population"].sum()
    rate_old = cells.loc[~new, "n_sample"].sum() / cells.loc[~new, "n_population"].sum()
    assert rate_new == pytest.approx(0.05, rel=0.1)  # ceil adds under one item per cell
    assert rate_old == pytest.approx(0.01, rel=0.1)
    # v9 appeared in W48; v1 has been in use for years.
    items = sample_items(con, f"{WEEK}/v1").to_pandas()
    assert set(items.loc[items["form_version"] == "v9", "cell"].str.endswith("|new")) == {True}
    assert set(items.loc[items["form_version"] == "v1", "cell"].str.endswith("|established")) == {
        True
    }


def test_new_version_window_counts_weeks_before_the_end_of_the_week(con, world) -> None:
    for week, prefix in (("2026-W46", "a"), (WEEK, "b")):
        frame = world.frame(week, 300, seed=8, prefix=prefix)
        world.insert(con, frame.assign(form_version="v5"))  # v5 first seen in W46
    statuses = {
        weeks: set(plan_cells(con, WEEK, Design(new_version_weeks=weeks))["version_status"]
                   .to_pylist())
        for weeks in (0, 2, 3)
    }
    # W46 starts 3 weeks before the end of W48: outside a 2-week window, inside a 3-week one.
    assert statuses == {0: {"established"}, 2: {"established"}, 3: {"new"}}


def test_same_design_returns_the_existing_sample(
    con: duckdb.DuckDBPyConnection, world
) -> None:
    world.insert(con, world.frame(WEEK, 1000, seed=10))
    first = draw_sample(con, WEEK, Design(), seed=SEED, actor=world.qa_lead)
    before = table_fingerprint(con)
    again = draw_sample(
        con, WEEK, Design.from_json(Design().canonical_json()), seed=SEED, actor=world.qa_lead
    )
    assert (again.sample_id, again.created, first.created) == (first.sample_id, False, True)
    assert again.cells.equals(first.cells)
    assert table_fingerprint(con) == before


def test_other_design_or_seed_makes_a_new_version(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 3000, seed=11))
    v1 = draw_sample(con, WEEK, seed=SEED, actor=world.qa_lead)
    world.label(con, v1.sample_id)
    labels_before = con.sql("SELECT * FROM labels ORDER BY label_id").fetchall()
    v2 = draw_sample(con, WEEK, Design(base_rate=0.05), seed=SEED, actor=world.qa_lead)
    v3 = draw_sample(con, WEEK, Design(base_rate=0.05), seed=SEED + 1, actor=world.qa_lead)
    assert [v.sample_id for v in (v1, v2, v3)] == [f"{WEEK}/v1", f"{WEEK}/v2", f"{WEEK}/v3"]
    assert [v.replaced for v in (v1, v2, v3)] == [None, f"{WEEK}/v1", f"{WEEK}/v2"]
    assert current_sample_id(con, WEEK) == f"{WEEK}/v3"
    # Nothing lost or re-pointed: v1 and its labels are exactly as they were.
    assert con.sql("SELECT * FROM labels ORDER BY label_id").fetchall() == labels_before
    assert len(drawn(con, v1.sample_id)) == v1.n_sample
    # Same seed, higher rate: every v1 pick is again in v2 (the smallest PRNs stay smallest).
    assert set(drawn(con, v1.sample_id)["extraction_id"]) <= set(
        drawn(con, v2.sample_id)["extraction_id"]
    )
    # Labels count in one version per stratum: the one whose labelled PRN
    # prefixes hold the most labels, the newest on ties. v1's picks are the PRN
    # prefix of v2's cells (same seed), so v2 ties and wins, with v1's weights.
    items = labelled_items(con, Scope()).to_pandas().set_index("extraction_id")
    v1_items = drawn(con, v1.sample_id).set_index("extraction_id")["inclusion_prob"]
    assert set(items["sample_id"]) == {v2.sample_id}
    for extraction_id, pi in items["inclusion_prob"].items():
        assert pi == pytest.approx(v1_items[extraction_id])


def test_stored_design_round_trips(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 500, seed=12))
    design = Design(base_rate=0.03, cap=50, bands=(0, 0.9, 1))
    sample = draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead)
    loaded = load_sample(con, sample.sample_id)
    assert (loaded.design, loaded.design_sha256, loaded.seed) == (design, design.sha256(), SEED)
    row = con.sql("SELECT design_json, drawn_by FROM audit_samples").fetchall()[0]
    assert row == (design.canonical_json(), world.qa_lead)


def late_rows_property(old: pd.DataFrame, new: pd.DataFrame) -> None:
    """The PRN guarantee: an old pick whose PRN is within the new cutoff of its cell stays drawn.

    Per cell, with ``c`` the largest PRN drawn now: the new sample is exactly the
    rows (old or late) with PRN <= c, so old picks drop out only when late rows
    with smaller PRNs push the cutoff below them.
    """
    for cell, now in new.groupby("cell"):
        cutoff = now["prn"].max()
        before = old[old["cell"] == cell]
        kept = before[before["prn"] <= cutoff]
        assert set(kept["extraction_id"]) <= set(now["extraction_id"]), cell
        dropped = before[before["prn"] > cutoff]
        assert not set(dropped["extraction_id"]) & set(now["extraction_id"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_late_rows_leave_earlier_picks(tmp_path: Path, world, seed: int) -> None:
    design = Design(base_rate=0.02, minimum=10)
    frame = world.frame(WEEK, 3000, seed=seed)
    late = world.frame(WEEK, 300, seed=seed + 100, prefix="late-")
    con = fresh(tmp_path, "s", world)
    world.insert(con, frame)
    old = drawn(con, draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead).sample_id)
    world.insert(con, late)
    assert not draw_sample(
        con, WEEK, design, seed=SEED, actor=world.qa_lead
    ).created  # no silent redraw
    new_sample = draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead, redraw=True)
    new = drawn(con, new_sample.sample_id)
    late_rows_property(old, new)
    # Most picks survive 10% more rows; late rows enter only below the cutoff.
    assert len(set(old["extraction_id"]) & set(new["extraction_id"])) > 0.8 * len(old)
    entered = new[new["extraction_id"].str.startswith("late-")]
    assert len(entered) > 0
    # The same population in a fresh store draws the same sample: order of arrival is irrelevant.
    other = fresh(tmp_path, "all-at-once", world)
    world.insert(other, pd.concat([late, frame]))
    pd.testing.assert_frame_equal(
        new,
        drawn(other, draw_sample(other, WEEK, design, seed=SEED, actor=world.qa_lead).sample_id),
    )


def test_late_rows_above_the_cutoff_change_nothing(con: duckdb.DuckDBPyConnection, world) -> None:
    design = Design(base_rate=0.001, minimum=10)  # n_h = 10 whatever N_h: only the minimum
    frame = world.frame(WEEK, 2000, seed=13)
    world.insert(con, frame)
    old = drawn(con, draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead).sample_id)
    per_cell = old.groupby("cell")["prn"].agg(["max", "size"])
    # A cell drawn whole (under the minimum) takes any late row: keep late rows out of those.
    cutoffs = per_cell["max"].where(per_cell["size"] == 10, 2.0)
    late = world.frame(WEEK, 400, seed=14, prefix="late-")
    late["cell"] = expected_cells(late, design)
    late["u"] = [prn(SEED, WEEK, i) for i in late["extraction_id"]]
    late = late[late["u"] > late["cell"].map(cutoffs).fillna(2.0)]
    world.insert(con, late.drop(columns=["cell", "u"]))
    new = drawn(
        con, draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead, redraw=True).sample_id
    )
    assert new["extraction_id"].tolist() == old["extraction_id"].tolist()


def test_double_review_share_by_cell(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 6000, seed=15))
    sample = draw_sample(
        con, WEEK, Design(base_rate=0.05, double_review_share=0.1), seed=SEED, actor=world.qa_lead
    )
    items = drawn(con, sample.sample_id)
    for cell, rows in items.groupby("cell"):
        expected = math.floor(len(rows) * 0.1 + 0.5)
        assert rows["double_review"].sum() == expected, cell
        # The first PRNs of the cell: reproducible, and a random subset of it.
        assert set(rows.nsmallest(expected, "prn")["extraction_id"]) == set(
            rows.loc[rows["double_review"], "extraction_id"]
        )


def test_sample_items_in_review_order(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 800, seed=16))
    sample = draw_sample(con, WEEK, seed=SEED, actor=world.qa_lead)
    items = sample_items(con, sample.sample_id)
    # every column the export writes, and where the value came from
    assert set(ITEM_COLUMNS) | {"confidence"} <= set(items.column_names)
    assert items.column_names[-7:] == ["document_uri", "page", "bbox_x0", "bbox_y0", "bbox_x1",
                                       "bbox_y1", "source_excerpt"]
    frame = items.to_pandas()
    frame["u"] = [prn(SEED, WEEK, i) for i in frame["extraction_id"]]
    assert frame.equals(frame.sort_values(["cell", "u"], kind="stable"))
    assert items.num_rows == sample.n_sample


@pytest.mark.parametrize(
    ("week", "message"),
    [
        ("2026-W01", r"week 2026-W01 holds no extractions"),
        ("2026-48", r"not an ISO week"),
        ("2026-W54", r"does not exist"),
    ],
)
def test_unusable_weeks(
    con: duckdb.DuckDBPyConnection, world, week: str, message: str
) -> None:
    world.insert(con, world.frame(WEEK, 50, seed=17))
    before = table_fingerprint(con)
    with pytest.raises(InputError, match=message):
        draw_sample(con, week, seed=SEED, actor=world.qa_lead)
    assert table_fingerprint(con) == before


def test_unknown_sample(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match=r"no audit sample '2026-W48/v9'"):
        sample_items(con, "2026-W48/v9")


def test_cutoffs_are_safe_and_full_cells_have_none() -> None:
    cutoffs = candidate_cutoffs(np.array([100000, 50, 50]), np.array([1000, 10, 50]))
    assert cutoffs[2] == 2.0
    # The 1000th smallest of 100000 uniforms sits near 0.01; the cutoff leaves room.
    assert 0.0105 < cutoffs[0] < 0.02
    assert 0.2 < cutoffs[1] < 1


def test_fallback_when_a_cutoff_falls_short(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 2000, seed=18))
    design = Design(base_rate=0.05)
    reference = drawn(con, draw_sample(con, WEEK, design, seed=SEED, actor=world.qa_lead).sample_id)
    cells = plan_cells(con, WEEK, design).to_pandas()
    con.execute(
        "INSERT INTO audit_samples VALUES ('x/v1', ?, 99, ?, '{}', '', now()::TIMESTAMP, NULL)",
        [WEEK, SEED],
    )
    # Cutoffs of zero admit no candidates: the draw must notice and rank every row.
    _insert_items(con, "x/v1", Week(WEEK), SEED, design, cells, cutoffs=np.zeros(len(cells)))
    pd.testing.assert_frame_equal(reference, drawn(con, "x/v1"))
