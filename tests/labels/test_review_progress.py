"""Review progress per sampling cell, and the context shown beside an item."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.labels.assignment import sample_progress
from fieldtrust.labels.review_progress import ItemContext, cell_progress, item_context

from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.conftest import Builder

# The review_store fixture's sample and cells (tests/labels/conftest.py).
SAMPLE = "2026-W10/v1"
CELLS = ("invoice|total|high|established", "invoice|total|low|established",
         "invoice|tax|high|established")


def _label(builder: Builder, extraction_id: str, reviewer: str, verdict: str = "correct",
           review_round: str = "primary", sample_id: str | None = SAMPLE) -> None:
    builder.labels([{"extraction_id": extraction_id, "reviewer": reviewer, "verdict": verdict,
                     "review_round": review_round, "sample_id": sample_id}])


def test_cell_progress_counts_labelled_items_per_cell(
    review_store: duckdb.DuckDBPyConnection, builder: Builder
) -> None:
    # Cell 0: two primaries (one unclear still counts: it is a verdict given).
    _label(builder, "e00", "alice")
    _label(builder, "e01", "bob", verdict="unclear")
    # Cell 1: a second review alone does not make an item labelled.
    _label(builder, "e10", "bob", review_round="second")
    # Cell 2: an imported and an adjudicated label both count.
    _label(builder, "e20", "import", review_round="import", sample_id=None)
    _label(builder, "e21", "carol", review_round="adjudication")

    table = cell_progress(review_store, SAMPLE)
    rows = {r["cell"]: r for r in table.to_pylist()}
    assert table.column_names == [
        "sample_id", "cell", "doc_type", "field", "band", "version_status", "n_population",
        "n_sample", "inclusion_prob", "n_labelled", "n_usable",
    ]
    # The usable prefix lies inside the sample.
    assert all(r["n_usable"] <= r["n_sample"] for r in rows.values())
    assert {c: r["n_labelled"] for c, r in rows.items()} == {
        CELLS[0]: 2, CELLS[1]: 0, CELLS[2]: 2,
    }
    # Each fixture cell has 4 items drawn at inclusion probability 0.5 (population 8).
    assert {(r["n_sample"], r["n_population"], r["inclusion_prob"]) for r in rows.values()} \
        == {(4, 8, 0.5)}
    # Ordered by doc_type, field, band: tax before total, high before low.
    assert [r["cell"] for r in table.to_pylist()] == [CELLS[2], CELLS[0], CELLS[1]]
    assert {r["sample_id"] for r in rows.values()} == {SAMPLE}
    # The cells add up to the sample's own count.
    assert sum(rows[c]["n_labelled"] for c in rows) == sample_progress(review_store).labelled


def test_cell_progress_defaults_to_the_newest_sample(
    review_store: duckdb.DuckDBPyConnection, builder: Builder
) -> None:
    builder.extraction("n1")
    builder.sample("2026-W11/v1", "2026-W11", [("n1", CELLS[0], 0.25, 0.1, False)])
    _label(builder, "n1", "alice", sample_id="2026-W11/v1")
    (row,) = cell_progress(review_store).to_pylist()
    shown = (row["sample_id"], row["cell"], row["n_sample"], row["n_population"],
             row["n_labelled"])
    assert shown == ("2026-W11/v1", CELLS[0], 1, 4, 1)
    assert len(cell_progress(review_store, SAMPLE)) == 3


def test_cell_progress_refuses_an_unknown_sample(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(InputError, match=r"no audit sample '2026-W99/v1'"):
        cell_progress(review_store, "2026-W99/v1")


def test_cell_progress_before_any_draw(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match="no audit sample has been drawn yet"):
        cell_progress(con)


def test_item_context_gives_confidence_conflict_and_the_reviewers_count(
    review_store: duckdb.DuckDBPyConnection, builder: Builder
) -> None:
    review_store.execute(
        "UPDATE extractions SET conflict = true, conflict_value = '**12.00**'"
        " WHERE extraction_id = 'e01'"
    )
    _label(builder, "e00", "alice")
    _label(builder, "e10", "alice", verdict="incorrect")
    _label(builder, "e20", "alice", sample_id="2026-W09/v1")  # another sample: not counted
    _label(builder, "e21", "bob")  # another reviewer: not counted

    assert item_context(review_store, "e01", "alice", SAMPLE) == ItemContext(
        extraction_id="e01", confidence=0.97, conflict=True, conflict_value="**12.00**",
        reviewer_labelled=2,
    )
    assert item_context(review_store, "e11", "dave", SAMPLE) == ItemContext(
        extraction_id="e11", confidence=0.6, conflict=False, conflict_value=None,
        reviewer_labelled=0,
    )


def test_item_context_of_an_unknown_extraction(review_store: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match=r"no extraction 'nope' in the store"):
        item_context(review_store, "nope", "alice", SAMPLE)


def test_progress_command_shows_cells_and_the_total(
    review_store: duckdb.DuckDBPyConnection, builder: Builder, db_path: Path
) -> None:
    _label(builder, "e00", "alice")
    _label(builder, "e21", "carol", review_round="adjudication")
    review_store.close()  # the command opens the file read-only, in this same process
    result = CliRunner().invoke(cli, ["--db", str(db_path), "progress", "--json"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["sample_id"], shown["labelled"], shown["items"]) == (SAMPLE, 2, 12)
    assert shown["cells_without_labels"] == [CELLS[1]]
    result = CliRunner().invoke(cli, ["--db", str(db_path), "progress", "--sample", SAMPLE])
    assert result.exit_code == 0
    assert f"{SAMPLE}: 2 of 12 items labelled, " in result.stdout
    assert "1 of 3 cells without a label yet" in result.stdout
    result = CliRunner().invoke(cli, ["--db", str(db_path), "progress", "--sample", "nope"])
    assert result.exit_code == 2
    assert "error: no audit sample 'nope'" in result.stderr
