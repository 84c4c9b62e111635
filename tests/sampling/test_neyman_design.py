"""``allocation = "neyman"`` in the sampling design, drawn on a real store (STATS.md section 8).

A week whose confidence bands differ in error rate: past labels say the low
bands are wrong more often, so Neyman allocation moves labels there, keeps
every band's minimum (the items the model is surest of are still audited),
spends what the rate rule would, and records each cell's ``pi_h`` so the
Horvitz-Thompson estimate stays unbiased over the draw.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from fieldtrust.sampling.cells import plan_cells
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.samples import load_sample

from fieldtrust.errors import InputError

PAST, WEEK = "2026-W47", "2026-W48"
BANDS = (0.0, 0.8, 0.9, 0.95, 1.0)
#: Error rate by band: the lowest band is wrong a quarter of the time, the top one 1%.
BAND_ERROR = np.array([0.25, 0.10, 0.04, 0.01])


def banded_frame(world, week: str, n: int, seed: int) -> pd.DataFrame:
    """The world's rows with the truth set by confidence band (BAND_ERROR)."""
    frame = world.frame(week, n, seed=seed)
    rng = np.random.default_rng(seed + 100)
    band = np.searchsorted(np.asarray(BANDS[1:-1]), frame["confidence"], side="right")
    frame["correct"] = rng.random(n) >= BAND_ERROR[band]
    return frame


@pytest.fixture
def banded(con: duckdb.DuckDBPyConnection, world) -> pd.DataFrame:
    """W47 drawn at 30% and labelled from the truth; W48's rows, returned with their truth."""
    world.insert(con, banded_frame(world, PAST, 4000, seed=1))
    past = draw_sample(con, PAST, Design(bands=BANDS, base_rate=0.3), seed=3,
                       actor=world.qa_lead)
    world.label(con, past.sample_id)
    frame = banded_frame(world, WEEK, 8000, seed=2)
    world.insert(con, frame)
    return frame


def test_the_default_is_spelled_one_way() -> None:
    assert Design(allocation="proportional") == Design()
    assert Design(allocation="proportional").sha256() == Design().sha256()
    assert Design(budget=500, allocation="neyman").sha256() == Design(budget=500).sha256()
    assert "allocation" not in Design().canonical_json()  # samples drawn before keep their sha
    neyman = Design(allocation="neyman")
    assert '"allocation":"neyman"' in neyman.canonical_json()
    assert Design.from_json(neyman.canonical_json()) == neyman
    assert (Design().allocation_rule, Design(budget=9).allocation_rule) == (
        "proportional", "neyman")
    assert Design(budget=9, allocation="proportional").allocation_rule == "proportional"


@pytest.mark.parametrize("value", ["optimal", 1, ""])
def test_an_unknown_allocation_is_refused(value: object) -> None:
    with pytest.raises(InputError, match=r"allocation = .* is not one of 'proportional', 'neyman'"):
        Design.from_mapping({"allocation": value})


def test_neyman_spends_the_rate_rules_labels_where_errors_vary(
    con: duckdb.DuckDBPyConnection, banded: pd.DataFrame
) -> None:
    base = dict(bands=BANDS, base_rate=0.05, minimum=10)
    rate = plan_cells(con, WEEK, Design(**base)).to_pandas()
    neyman = plan_cells(con, WEEK, Design(**base, allocation="neyman")).to_pandas()
    assert neyman["n_sample"].sum() == rate["n_sample"].sum()  # moved, never added
    assert rate["error_rate"].isna().all()
    # The past week's labels, shrunk towards the prior, set p_h: low bands err more.
    by_band = neyman.groupby("band")["error_rate"].mean()
    assert by_band.iloc[0] > 0.15 > 0.03 > by_band.iloc[-1]
    # Independent arithmetic: cells above their floor get n_h ~ N_h sqrt(p_h (1 - p_h)).
    free = neyman[neyman["n_sample"] > 10]
    weight = free["n_population"] * np.sqrt(free["error_rate"] * (1 - free["error_rate"]))
    assert np.allclose(free["n_sample"] / weight, (free["n_sample"] / weight).mean(), rtol=0.05)
    # Every band stays audited: the floor holds where Neyman would go lower.
    assert (neyman["n_sample"] >= np.minimum(neyman["n_population"], 10)).all()
    top = neyman["band"] == neyman["band"].iloc[-1]
    assert neyman.loc[top, "n_sample"].sum() < rate.loc[top, "n_sample"].sum()
    low = neyman["band"] == neyman["band"].iloc[0]
    assert neyman.loc[low, "n_sample"].sum() > 1.3 * rate.loc[low, "n_sample"].sum()


def test_proportional_with_a_budget_spreads_it_by_size(
    con: duckdb.DuckDBPyConnection, banded: pd.DataFrame
) -> None:
    design = Design(bands=BANDS, budget=400, minimum=5, allocation="proportional")
    cells = plan_cells(con, WEEK, design).to_pandas()
    assert cells["n_sample"].sum() == 400
    free = cells[cells["n_sample"] > 5]
    share = free["n_sample"] / free["n_population"]
    assert share.max() - share.min() < 2 / free["n_population"].min() + 1e-9


def test_the_draw_records_neyman_probabilities_and_estimates_stay_unbiased(
    con: duckdb.DuckDBPyConnection, banded: pd.DataFrame, world
) -> None:
    design = Design(bands=BANDS, base_rate=0.04, minimum=10, allocation="neyman")
    truth = banded.set_index("extraction_id")["correct"]
    true_errors = float((~truth).sum())
    estimates, naive = [], []
    for seed in range(40):
        sample = draw_sample(con, WEEK, design, seed=seed, actor=world.qa_lead, redraw=True)
        items = con.sql("SELECT extraction_id, inclusion_prob FROM audit_items"
                        " WHERE sample_id = ?", params=[sample.sample_id]).df()
        wrong = ~truth.loc[items["extraction_id"]].to_numpy()
        estimates.append(float(np.sum(wrong / items["inclusion_prob"].to_numpy())))
        naive.append(float(wrong.mean()) * len(truth))
    loaded = load_sample(con, sample.sample_id)
    assert loaded.design == design and loaded.design.allocation == "neyman"
    cells = loaded.cells.to_pandas()
    assert np.allclose(cells["inclusion_prob"], cells["n_sample"] / cells["n_population"])
    # Horvitz-Thompson with the recorded pi_h: unbiased over the draw (within 3 standard
    # errors of the mean of 40 draws); the unweighted error rate is not (Neyman oversamples
    # the bands that err).
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / np.sqrt(len(estimates))
    assert abs(mean - true_errors) < 3 * se + 1
    assert np.mean(naive) > 1.2 * true_errors
