"""Estimates against an independent hand computation of the stratified formulas."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.estimates import estimate_table, overall_estimate, weekly_estimates
from fieldtrust.sampling.stratified import clopper_pearson, effective_size, stratified_proportion
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope
from scipy import stats

from fieldtrust.errors import InputError

WEEKS = ("2026-W47", "2026-W48")


def labelled_cells(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every label on a current-sample item with its cell's N_h, read straight from the tables."""
    return (
        con.sql(
            """
        SELECT s.week, i.cell, c.doc_type, c.field, e.form_version, c.n_population,
               (l.verdict = 'correct')::INTEGER AS y
        FROM labels l
        JOIN audit_items i USING (extraction_id)
        JOIN audit_samples s ON s.sample_id = i.sample_id
        JOIN audit_cells c ON c.sample_id = i.sample_id AND c.cell = i.cell
        JOIN extractions e USING (extraction_id)
        WHERE s.version = (SELECT max(version) FROM audit_samples x WHERE x.week = s.week)
        """
        )
        .to_arrow_table()
        .to_pandas()
    )


def hand_stratified(rows: pd.DataFrame) -> tuple[float, float]:
    """Cochran 5.2: acc = sum W_h p_h, var = sum W_h^2 (1 - f_h) p_h (1 - p_h) / (n_h - 1)."""
    cells = rows.groupby(["week", "cell"]).agg(
        N=("n_population", "first"), n=("y", "size"), p=("y", "mean")
    )
    total = cells["N"].sum()
    acc = variance = 0.0
    for cell in cells.itertuples():
        share = cell.N / total
        acc += share * cell.p
        if cell.n < cell.N:  # a cell taken whole (census) adds no sampling variance
            unit = cell.p * (1 - cell.p) * cell.n / (cell.n - 1)
            if cell.p in (0.0, 1.0):  # labels all agree: the floor of their exact interval
                ci = stats.binomtest(0, int(cell.n)).proportion_ci(0.95, method="exact")
                unit = cell.n * ((ci.high - ci.low) / (2 * stats.norm.ppf(0.975))) ** 2
            variance += share**2 * (1 - cell.n / cell.N) * unit / cell.n
    return acc, variance


def hand_domain(rows: pd.DataFrame, in_domain: pd.Series) -> tuple[float, float]:
    """Ratio estimator of a domain and its linearised variance, item by item (Cochran 6.11)."""
    rows = rows.assign(d=in_domain.astype(int))
    rows["m"] = rows.groupby(["week", "cell"])["y"].transform("size")
    rows["w"] = rows["n_population"] / rows["m"]
    ratio = (rows["w"] * rows["y"] * rows["d"]).sum() / (rows["w"] * rows["d"]).sum()
    population = (rows["w"] * rows["d"]).sum()
    variance = 0.0
    for _, cell in rows.groupby(["week", "cell"]):
        z = cell["d"] * (cell["y"] - ratio)
        m, big_n = len(cell), cell["n_population"].iloc[0]
        m_d, k_d = cell["d"].sum(), (cell["d"] * cell["y"]).sum()
        s2 = z.var(ddof=1)
        if m_d > 0 and k_d in (0, m_d):  # the domain's labels agree: exact-interval floor
            ci = stats.binomtest(0, int(m_d)).proportion_ci(0.95, method="exact")
            floor = m_d * ((ci.high - ci.low) / (2 * stats.norm.ppf(0.975))) ** 2
            s2 = max(s2, m_d / m * floor)
        if m < big_n:
            variance += big_n**2 * (1 - m / big_n) * s2 / m
    return ratio, variance / population**2


@pytest.fixture
def audited(con: duckdb.DuckDBPyConnection, world) -> duckdb.DuckDBPyConnection:
    """Two weeks, boosted new version v9, every drawn item labelled."""
    design = Design(base_rate=0.03, minimum=6)
    for seed, week in enumerate(WEEKS):
        world.insert(
            con,
            world.frame(week, 4000, seed=seed, new_share=0.1, accuracy_old=0.93, accuracy_new=0.7),
        )
        world.label(con, draw_sample(con, week, design, seed=5, actor=world.qa_lead).sample_id)
    return con


def test_weekly_estimates_match_cochran(audited: duckdb.DuckDBPyConnection) -> None:
    rows = labelled_cells(audited)
    table = weekly_estimates(audited).to_pandas()
    assert len(table) == 2 * 4  # two weeks x (2 doc types x 2 fields)
    for row in table.itertuples():
        mine = rows[
            (rows["week"] == row.week)
            & (rows["doc_type"] == row.doc_type)
            & (rows["field"] == row.field)
        ]
        acc, variance = hand_stratified(mine)
        assert row.estimate == pytest.approx(acc, abs=1e-12)
        assert row.std_error == pytest.approx(np.sqrt(variance), rel=1e-9)
        assert row.n == len(mine)
        assert row.population == mine.groupby("cell")["n_population"].first().sum()


def test_overall_spans_weeks_as_separate_strata(audited: duckdb.DuckDBPyConnection) -> None:
    rows = labelled_cells(audited)
    acc, variance = hand_stratified(rows)
    overall = overall_estimate(audited)
    assert overall.estimate == pytest.approx(acc, abs=1e-12)
    assert overall.variance == pytest.approx(variance, rel=1e-9)
    assert overall.population == 8000
    assert overall.strata == rows.groupby(["week", "cell"]).ngroups


def test_fully_labelled_estimate_is_the_hajek_ratio_of_the_store_weights(audited) -> None:
    items = labelled_items(audited, Scope()).to_pandas()
    hajek = (items["weight"] * items["correct"]).sum() / items["weight"].sum()
    assert overall_estimate(audited).estimate == pytest.approx(hajek, abs=1e-12)


def test_form_version_domain_matches_linearisation(audited: duckdb.DuckDBPyConnection) -> None:
    rows = labelled_cells(audited)
    table = estimate_table(audited, by=("form_version",)).to_pandas().set_index("form_version")
    for version in ("v1", "v9"):
        ratio, variance = hand_domain(rows, rows["form_version"] == version)
        assert table.loc[version, "estimate"] == pytest.approx(ratio, abs=1e-12)
        assert table.loc[version, "std_error"] == pytest.approx(np.sqrt(variance), rel=1e-9)
    assert table.loc["v9", "estimate"] < table.loc["v1", "estimate"] - 0.1


def test_scope_by_form_version_keeps_cell_weights(audited: duckdb.DuckDBPyConnection) -> None:
    grouped = estimate_table(audited, by=("form_version",)).to_pandas().set_index("form_version")
    scoped = estimate_table(audited, Scope(form_versions=("v9",)), by=()).to_pandas()
    assert scoped["estimate"].iloc[0] == pytest.approx(grouped.loc["v9", "estimate"], abs=1e-12)
    assert scoped["std_error"].iloc[0] == pytest.approx(grouped.loc["v9", "std_error"], rel=1e-9)


def test_interval_is_korn_graubard(audited: duckdb.DuckDBPyConnection) -> None:
    row = estimate_table(audited, by=()).to_pandas().iloc[0]
    variance = row["std_error"] ** 2
    n, strata = row["n"], row["strata"]
    factor = (stats.t.ppf(0.975, n - 1) / stats.t.ppf(0.975, n - strata)) ** 2
    n_eff = row["estimate"] * (1 - row["estimate"]) / variance * factor
    x = row["estimate"] * n_eff
    assert row["n_eff"] == pytest.approx(n_eff, rel=1e-9)
    assert row["lower"] == pytest.approx(stats.beta.ppf(0.025, x, n_eff - x + 1), rel=1e-9)
    assert row["upper"] == pytest.approx(stats.beta.ppf(0.975, x + 1, n_eff - x), rel=1e-9)
    assert row["lower"] < row["estimate"] < row["upper"]


@pytest.mark.parametrize(("k", "n"), [(3, 100), (0, 20), (20, 20), (7, 31)])
def test_clopper_pearson_matches_scipy(k: int, n: int) -> None:
    lower, upper = clopper_pearson(k, n)
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert (lower[0], upper[0]) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_clopper_pearson_stats_md_check() -> None:
    lower, upper = clopper_pearson(3, 100)
    assert (round(lower[0], 4), round(upper[0], 4)) == (0.0062, 0.0852)


def test_perfect_record_gets_an_exact_interval_not_zero_width() -> None:
    estimate = stratified_proportion([1000, 2000], [20, 30], [20, 30])
    # Each clean cell keeps the variance of its exact interval, so the domain's
    # variance is not zero; at p = 1 n_eff is the label count (times the
    # degrees-of-freedom factor for 2 strata, which is below 1).
    assert estimate.estimate == 1.0
    assert estimate.variance > 0
    n_eff = 50 * (stats.t.ppf(0.975, 49) / stats.t.ppf(0.975, 48)) ** 2
    assert estimate.upper == 1.0
    assert estimate.lower == pytest.approx(0.025 ** (1 / n_eff))


def test_census_cell_has_no_sampling_variance() -> None:
    estimate = stratified_proportion([10], [10], [7])
    assert (estimate.estimate, estimate.variance) == (0.7, 0.0)


def test_lonely_label_gets_conservative_variance() -> None:
    estimate = stratified_proportion([100, 100], [1, 10], [1, 9])
    # Cell 1 has one label: its variance term uses 1/4, not 0 or NaN.
    expected = 0.5**2 * (0.99 * 0.25 / 1) + 0.5**2 * (0.9 * 0.9 * 0.1 / 9)
    assert estimate.variance == pytest.approx(expected)


def test_effective_size_without_strata_factor() -> None:
    assert float(effective_size(0.9, 0.09 / 100, 100, 99)) == pytest.approx(100)


def test_half_labelled_cells_reweight_by_labels_done(con, world) -> None:
    world.insert(con, world.frame(WEEKS[1], 3000, seed=3))
    sample = draw_sample(
        con, WEEKS[1], Design(base_rate=0.05, minimum=10), seed=5, actor=world.qa_lead
    )
    world.label(con, sample.sample_id, share=0.5)
    rows = labelled_cells(con)
    acc, variance = hand_stratified(rows)  # N_h over labels done, as the module says
    overall = overall_estimate(con)
    assert overall.estimate == pytest.approx(acc, abs=1e-12)
    assert overall.variance == pytest.approx(variance, rel=1e-9)
    assert overall.n < sample.n_sample


def test_only_the_current_sample_counts(con: duckdb.DuckDBPyConnection, world) -> None:
    week = WEEKS[1]
    world.insert(con, world.frame(week, 3000, seed=4))
    world.label(
        con, draw_sample(con, week, Design(base_rate=0.05), seed=5, actor=world.qa_lead).sample_id
    )
    v2 = draw_sample(con, week, Design(base_rate=0.02), seed=5, actor=world.qa_lead)
    # A queue label on an item outside every sample: chosen by another rule, left out.
    con.execute(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round, labeled_at)"
        " SELECT 'queue-1', extraction_id, 'incorrect', 'q', 'primary', TIMESTAMP '2027-01-01'"
        " FROM extractions WHERE extraction_id NOT IN (SELECT extraction_id FROM audit_items)"
        " LIMIT 1"
    )
    def drawn(sample_id: str) -> int:
        return con.sql("SELECT count(*) FROM audit_items WHERE sample_id = ?",
                       params=[sample_id]).fetchall()[0][0]

    # One sample per stratum and week counts: the version whose labelled PRN
    # prefixes hold the most labels (here v1, fully labelled; v2's items are a
    # subset of it), never both, and never the queue label.
    assert overall_estimate(con).n == max(drawn(f"{week}/v1"), drawn(v2.sample_id))
    assert overall_estimate(con).n < con.sql("SELECT count(*) FROM labels").fetchall()[0][0]


def test_grouping_must_be_known(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match=r"cannot group estimates by 'reviewer'; choose from"):
        estimate_table(con, by=("reviewer",))


def test_no_labels_gives_empty_table_and_nan(con: duckdb.DuckDBPyConnection) -> None:
    table = weekly_estimates(con)
    assert table.num_rows == 0 and table.column_names[:3] == ["week", "doc_type", "field"]
    estimate = overall_estimate(con)
    assert np.isnan(estimate.estimate) and estimate.n == 0
