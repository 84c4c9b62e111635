"""Unbiasedness and coverage by simulation: a new form version boosted 5x, worse than the rest."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from fieldtrust.sampling.allocation import rate_allocation
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.estimates import estimate_table, overall_estimate
from fieldtrust.sampling.stratified import domain_estimates, stratified_proportion

# Five confidence bands of the established versions, then the same five of a new
# form version: 10% of the volume, much worse, sampled at five times the rate.
POPULATION = np.array([2000, 3000, 5000, 8000, 30000, 200, 300, 500, 800, 3000])
ACCURACY = np.array([0.60, 0.85, 0.93, 0.97, 0.995, 0.40, 0.60, 0.75, 0.85, 0.90])
NEW = np.arange(10) >= 5
REPLICATIONS = 2000


def simulate(rng: np.random.Generator) -> dict[str, np.ndarray | float]:
    correct = np.round(POPULATION * ACCURACY).astype(np.int64)
    truth = correct.sum() / POPULATION.sum()
    size = rate_allocation(POPULATION, NEW, Design(base_rate=0.01, minimum=10, boost=5))
    shape = (REPLICATIONS, len(POPULATION))
    # Each cell's sample is a simple random sample: its count correct is hypergeometric.
    k = rng.hypergeometric(
        np.broadcast_to(correct, shape),
        np.broadcast_to(POPULATION - correct, shape),
        np.broadcast_to(size, shape),
    )
    group = np.repeat(np.arange(REPLICATIONS), len(POPULATION))
    result = domain_estimates(
        group,
        np.tile(POPULATION, REPLICATIONS),
        np.tile(size, REPLICATIONS),
        np.tile(size, REPLICATIONS),
        k.ravel(),
        n_groups=REPLICATIONS,
    )
    return {"truth": truth, "unweighted": k.sum(axis=1) / size.sum(), "size": size, **result}


def test_weighted_estimate_is_unbiased_and_intervals_cover() -> None:
    run = simulate(np.random.default_rng(20261130))
    truth = run["truth"]
    bias = np.mean(run["estimate"]) - truth
    naive_bias = np.mean(run["unweighted"]) - truth
    coverage = np.mean((run["lower"] <= truth) & (truth <= run["upper"]))
    assert abs(bias) < 0.005
    assert naive_bias < -0.02  # boosting the worse version drags the raw share down
    # n_eff is capped at the label count (STATS.md 3): where stratification gains
    # much precision, as here, the interval is exact Clopper-Pearson at n, a little wide.
    assert 0.93 <= coverage <= 0.98
    # The design-based standard error matches the spread over replications.
    assert np.mean(np.sqrt(run["variance"])) == pytest.approx(np.std(run["estimate"]), rel=0.1)


def test_new_version_domain_is_unbiased_and_covered() -> None:
    rng = np.random.default_rng(7)
    correct = np.round(POPULATION * ACCURACY).astype(np.int64)
    truth = correct[NEW].sum() / POPULATION[NEW].sum()
    size = rate_allocation(POPULATION, NEW, Design(base_rate=0.01, minimum=10, boost=5))
    estimates, covered = [], []
    for _ in range(500):
        k = rng.hypergeometric(correct, POPULATION - correct, size)
        domain = np.where(NEW, size, 0)
        est = stratified_proportion(POPULATION, size, np.where(NEW, k, 0), n_domain=domain)
        estimates.append(est.estimate)
        covered.append(est.lower <= truth <= est.upper)
    assert abs(np.mean(estimates) - truth) < 0.005
    assert 0.93 <= np.mean(covered) <= 0.99


@pytest.mark.slow
def test_end_to_end_through_duckdb(con: duckdb.DuckDBPyConnection, world) -> None:
    week = "2026-W48"
    world.insert(
        con, world.frame(week, 30000, seed=1, new_share=0.1, accuracy_old=0.96, accuracy_new=0.70)
    )
    truth = con.sql("SELECT avg(correct::INTEGER) FROM demo_truth").fetchall()[0][0]
    design = Design(base_rate=0.01, minimum=10, boost=5)
    weighted, unweighted, covered = [], [], []
    for seed in range(8):  # each seed draws a new version; only the newest one counts
        world.label(con, draw_sample(con, week, design, seed=seed, actor=world.qa_lead).sample_id)
        table = estimate_table(con, by=("cell",)).to_pandas()
        overall = overall_estimate(con)
        # Through the store or straight from the counts: the same numbers.
        counts = (
            con.sql(
                """
            SELECT c.n_population, count(*) AS m, sum((l.verdict = 'correct')::INTEGER) AS k
            FROM audit_items i JOIN audit_cells c USING (sample_id, cell)
            JOIN effective_labels l USING (extraction_id)
            WHERE i.sample_id = ? GROUP BY c.cell, c.n_population ORDER BY c.cell
            """,
                params=[f"{week}/v{seed + 1}"],
            )
            .to_arrow_table()
            .to_pandas()
        )
        direct = stratified_proportion(counts["n_population"], counts["m"], counts["k"])
        assert overall.estimate == pytest.approx(direct.estimate, abs=1e-12)
        assert overall.variance == pytest.approx(direct.variance, rel=1e-9)
        assert len(table) == len(counts)
        weighted.append(overall.estimate)
        unweighted.append(counts["k"].sum() / counts["m"].sum())
        covered.append(overall.lower <= truth <= overall.upper)
    assert abs(np.mean(weighted) - truth) < 0.01
    assert np.mean(unweighted) < truth - 0.03
    assert np.mean(covered) >= 0.75
