from __future__ import annotations

import duckdb
import numpy as np
import pytest
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.planner import (
    PREVIEW_COLUMNS,
    attribute_sample_size,
    attribute_sampling_table,
    preview_design,
    sample_size,
)
from scipy import stats

from tests.conftest import table_fingerprint

WEEK = "2026-W48"


def test_sample_size_stats_md_example() -> None:
    assert sample_size(0.05, 0.02) == 457


def test_sample_size_with_finite_population() -> None:
    n0 = 1.96**2 * 0.05 * 0.95 / 0.02**2
    assert sample_size(0.05, 0.02, N=1000) == int(np.ceil(n0 / (1 + (n0 - 1) / 1000)))
    assert sample_size(0.05, 0.02, N=1000) == 314
    assert sample_size(0.5, 0.01, N=50) <= 50


@pytest.mark.parametrize(
    ("p", "margin", "message"), [(1.5, 0.02, "p = 1.5"), (0.05, 0, "margin = 0")]
)
def test_sample_size_rejects_nonsense(p: float, margin: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sample_size(p, margin)


@pytest.mark.parametrize(
    ("rate", "deviations", "expected"),
    [
        (0.05, 0, 59),
        (0.03, 0, 99),
        (0.02, 0, 149),
        (0.05, 1, 93),
        (0.05, 2, 124),
        (0.05, 3, 153),
        (0.05, 4, 181),
        (0.05, 5, 208),
    ],
)
def test_attribute_sampling_matches_aicpa_and_stats_md(
    rate: float, deviations: int, expected: int
) -> None:
    n = attribute_sample_size(rate, expected_deviations=deviations)
    assert n == expected
    assert stats.binom.cdf(deviations, n, rate) <= 0.05 < stats.binom.cdf(deviations, n - 1, rate)


def test_attribute_table_shape() -> None:
    table = attribute_sampling_table((0.05, 0.02), (0, 1))
    assert table.column_names == ["tolerable_rate", "0 deviations", "1 deviations"]
    assert table.to_pylist() == [
        {"tolerable_rate": 0.05, "0 deviations": 59, "1 deviations": 93},
        {"tolerable_rate": 0.02, "0 deviations": 149, "1 deviations": 236},
    ]


def test_preview_writes_nothing_and_matches_the_draw(
    con: duckdb.DuckDBPyConnection, world
) -> None:
    world.insert(con, world.frame(WEEK, 5000, seed=1, new_share=0.1))
    design = Design(base_rate=0.02, minimum=8)
    before = table_fingerprint(con)
    result = preview_design(con, WEEK, design)
    assert table_fingerprint(con) == before
    preview = result.cells.to_pandas()
    drawn = draw_sample(con, WEEK, design, seed=1, actor=world.qa_lead).cells.to_pandas()
    assert preview["cell"].tolist() == drawn["cell"].tolist()
    assert preview["n_sample"].tolist() == drawn["n_sample"].tolist()
    assert preview["boosted"].tolist() == (drawn["version_status"] == "new").tolist()
    assert tuple(preview.columns) == PREVIEW_COLUMNS
    assert result.n_sample == drawn["n_sample"].sum()
    assert result.n_population == 5000
    assert result.to_dict()["cells"] == result.cells.to_pylist()
    row = preview.iloc[0]
    p = design.prior_error
    expected = 1.96 * np.sqrt(
        (1 - row["n_sample"] / row["n_population"]) * p * (1 - p) / row["n_sample"]
    )
    assert row["margin"] == pytest.approx(expected)


def test_budget_preview_uses_past_error_rates(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame("2026-W47", 4000, seed=2, accuracy_old=0.8))
    world.label(
        con,
        draw_sample(con, "2026-W47", Design(base_rate=0.05), seed=1, actor=world.qa_lead).sample_id,
    )
    world.insert(con, world.frame(WEEK, 4000, seed=3))
    result = preview_design(con, WEEK, Design(budget=300, minimum=5))
    preview = result.cells.to_pandas()
    assert preview["n_sample"].sum() == 300
    assert result.over_budget is False
    assert (preview["n_sample"] >= np.minimum(preview["n_population"], 5)).all()
    # Each band's past error rate, shrunk towards the 5% prior by 20 pseudo-labels.
    past = (
        con.sql(
            """
        SELECT e.doc_type, e.field, e.confidence, (l.verdict = 'incorrect')::INTEGER AS error
        FROM labels l JOIN extractions e USING (extraction_id)
        """
        )
        .to_arrow_table()
        .to_pandas()
    )
    top = (
        past[past["confidence"] >= 0.95]
        .groupby(["doc_type", "field"])["error"]
        .agg(["sum", "size"])
    )
    cells = preview[preview["band"] == "[0.95,1.00]"].set_index(["doc_type", "field"])
    for key, row in top.iterrows():
        expected = (row["sum"] + 20 * 0.05) / (row["size"] + 20)
        assert cells.loc[key, "error_rate"] == pytest.approx(expected)
    assert preview["error_rate"].mean() > 0.08  # 20% errors pull the rates above the prior


def test_budget_below_minimums_is_reported(con: duckdb.DuckDBPyConnection, world) -> None:
    world.insert(con, world.frame(WEEK, 4000, seed=4))
    preview = preview_design(con, WEEK, Design(budget=20, minimum=10))
    assert preview.over_budget is True
    assert preview.n_sample > 20 and preview.budget == 20
