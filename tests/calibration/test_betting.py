"""The stratified betting evidence against closed forms, brute force and its own guarantee.

Checks, each against something computed independently:

* one cell, a population so large that drawing is as with replacement:
  the closed form ``S log(1 - c) - n log(1 - c a)``;
* one cell, without replacement, any bets: a plain loop over the labels
  multiplying the factors ``(1 - c X) / (1 - c m_i)``;
* zero errors and the largest bet: ``1 / P(no error in n draws)``, the
  hypergeometric probability (the exact test's p-value), from scipy;
* SHANGRLA's ALPHA test with a fixed alternative (its test suite: 8 draws of
  ones against a null mean 1/2 at alternative 3/4 give 1.5^8 = 25.6 > 20);
* 2 and 3 cells: the minimum over the null boundary equals a brute-force
  grid search;
* the supermartingale: at a null count the mean of the evidence over
  random orders is 1, and over time it reaches 20 in at most 5% of orders.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from fieldtrust.calibration.bets import growth_bets
from fieldtrust.calibration.betting import (
    MAX_BET,
    CellLabels,
    LabelStack,
    cell_log_evalue,
    least_evidence,
    stratified_evalue,
)
from scipy.stats import hypergeom

from fieldtrust.errors import InputError


def loop_log_evalue(n_population: int, errors: np.ndarray, bets: np.ndarray,
                    null_errors: float) -> float:
    """The cell's log betting product, one label at a time, as the definition reads."""
    total, seen = 0.0, 0.0
    for i, (x, c) in enumerate(zip(errors, bets, strict=True)):
        left = (null_errors - seen) / (n_population - i)
        total += math.log((1 - c * x) / (1 - c * left))
        seen += x
    return total


def test_one_large_cell_matches_the_with_replacement_closed_form() -> None:
    rng = np.random.default_rng(1)
    x = (rng.random(300) < 0.03).astype(float)
    c, a = 0.4, 0.05
    result = stratified_evalue([CellLabels(10**9, x, c)], max_error=a)
    closed = x.sum() * math.log(1 - c) - x.size * math.log(1 - c * a)
    assert result.log_evalue == pytest.approx(closed, abs=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_one_cell_matches_the_factor_by_factor_product(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_pop, n = 400, 120
    x = (rng.random(n) < 0.06).astype(float)
    bets = rng.uniform(0.0, 0.9, n)
    cell = CellLabels(n_pop, x, bets)
    for m in (x.sum(), 20.0, 31.5, 80.0):
        assert cell_log_evalue(cell, m) == pytest.approx(loop_log_evalue(n_pop, x, bets, m),
                                                         rel=1e-12, abs=1e-12)
    # The stratified statistic of one cell is that product at the null count a N.
    assert stratified_evalue([cell], max_error=0.05).log_evalue == pytest.approx(
        loop_log_evalue(n_pop, x, bets, 0.05 * n_pop), abs=1e-8)


def test_no_errors_at_the_largest_bet_approaches_the_exact_hypergeometric_test() -> None:
    n_pop, null, n = 500, 25, 40
    evidence = cell_log_evalue(CellLabels(n_pop, np.zeros(n), MAX_BET), null)
    exact = -math.log(hypergeom.pmf(0, n_pop, null, n))
    # With bet c < 1 each factor is 1 / (1 - c m_i) <= 1 / (1 - m_i): below the exact test.
    assert exact * 0.98 < evidence <= exact
    assert evidence == pytest.approx(loop_log_evalue(n_pop, np.zeros(n), np.full(n, MAX_BET),
                                                     null), rel=1e-12)


def test_shangrla_alpha_fixed_alternative_sample_size() -> None:
    """SHANGRLA test_NonnegMean.test_sample_size: 8 draws certify at alternative 3/4 vs 1/2.

    Its assorter ``x`` is our ``1 - X``; ALPHA's factor for ``x = 1`` is
    ``eta / t = 1.5``, ours for ``X = 0`` is ``1 / (1 - c m)``: ``c = 2/3``.
    """
    n_pop = 1000
    cell_logs = [cell_log_evalue(CellLabels(n_pop, np.zeros(k), 2 / 3), 0.5 * n_pop)
                 for k in range(1, 12)]
    first = next(k for k, v in enumerate(cell_logs, start=1) if v >= math.log(20))
    assert first == 8
    # Drawing without replacement from 1,000 raises the null mean a little: 26.0, not 25.6.
    assert math.exp(cell_logs[7]) == pytest.approx(1.5**8, rel=0.02)


def brute_force_minimum(cells: list[CellLabels], budget: float, steps: int) -> float:
    """Least sum of cell evidence over a grid of null splits (the last cell takes the rest)."""
    bounds = [(c.n_errors, c.n_population - c.n_labels + c.n_errors) for c in cells]
    grids = [np.linspace(lo, hi, steps) for lo, hi in bounds[:-1]]
    best = math.inf
    for split in itertools.product(*grids):
        last = budget - sum(split)
        lo, hi = bounds[-1]
        if not lo <= last <= hi:
            continue
        value = sum(cell_log_evalue(c, m) for c, m in zip(cells, [*split, last], strict=True))
        best = min(best, value)
    return best


@pytest.mark.parametrize("seed", range(3))
def test_two_cells_minimum_matches_a_brute_force_grid(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cells = [CellLabels(200, (rng.random(30) < 0.05).astype(float), 0.5),
             CellLabels(800, (rng.random(40) < 0.02).astype(float), 0.7)]
    result = stratified_evalue(cells, max_error=0.05)
    grid = brute_force_minimum(cells, 50.0, 20001)
    assert result.log_evalue <= grid + 1e-9  # a lower bound, never above the minimum
    assert result.log_evalue == pytest.approx(grid, abs=1e-4)


def test_three_cells_minimum_matches_a_brute_force_grid() -> None:
    rng = np.random.default_rng(7)
    sizes, labels, rates = (300, 900, 150), (40, 45, 60), (0.04, 0.01, 0.08)
    pi = np.array(labels) / np.array(sizes)
    bets = growth_bets(sizes, pi, 0.03, max_error=0.08)
    cells = [CellLabels(n, (rng.random(k) < p).astype(float), c)
             for n, k, p, c in zip(sizes, labels, rates, bets, strict=True)]
    result = stratified_evalue(cells, max_error=0.08)
    grid = brute_force_minimum(cells, 0.08 * sum(sizes), 401)
    assert result.log_evalue <= grid + 1e-9
    assert result.log_evalue == pytest.approx(grid, abs=2e-3)
    assert result.null_errors.sum() == pytest.approx(0.08 * sum(sizes), rel=1e-5)


def test_cell_evidence_is_convex_and_non_decreasing_in_the_null_count() -> None:
    rng = np.random.default_rng(3)
    cell = CellLabels(600, (rng.random(90) < 0.05).astype(float), rng.uniform(0.1, 0.8, 90))
    counts = np.linspace(cell.n_errors, 600 - 90 + cell.n_errors, 400)
    values = np.array([cell_log_evalue(cell, m) for m in counts])
    assert np.all(np.diff(values) >= -1e-12)
    assert np.all(np.diff(values, 2) >= -1e-9)


def test_batched_groups_equal_their_solves_one_by_one() -> None:
    rng = np.random.default_rng(4)
    groups = []
    for _ in range(6):
        groups.append([CellLabels(int(n), (rng.random(k) < 0.03).astype(float), c)
                       for n, k, c in zip(rng.integers(100, 900, 3), rng.integers(10, 60, 3),
                                          rng.uniform(0.2, 0.8, 3), strict=True)])
    cells = [c for g in groups for c in g]
    stack = LabelStack.from_cells(cells, np.repeat(np.arange(6), 3))
    budgets = [0.05 * sum(c.n_population for c in g) for g in groups]
    batch = least_evidence(stack, budgets)
    one_by_one = [stratified_evalue(g, max_error=0.05).log_evalue for g in groups]
    np.testing.assert_allclose(batch.log_evalue, one_by_one, atol=1e-7)


def test_the_labels_ruling_the_null_in_or_out() -> None:
    # Every item labelled, 2% wrong: no 5% null is possible.
    census = CellLabels(100, np.r_[np.ones(2), np.zeros(98)], 0.5)
    assert stratified_evalue([census], max_error=0.05).log_evalue == math.inf
    # Errors seen already exceed the allowance: the null holds for certain.
    wrong = CellLabels(100, np.ones(6), 0.5)
    assert stratified_evalue([wrong], max_error=0.05).log_evalue == -math.inf
    # Unaccounted items count as errors.
    clean = CellLabels(1000, np.zeros(200), 0.5)
    assert stratified_evalue([clean], max_error=0.05, unaccounted=60).log_evalue == -math.inf
    assert stratified_evalue([clean], max_error=0.05, unaccounted=20).log_evalue > 0
    # A cell without labels holds as many errors as the null wants: no evidence.
    empty = CellLabels(1000, np.zeros(0), 0.5)
    assert stratified_evalue([clean, empty], max_error=0.05).log_evalue <= 1e-9


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n_population": 5, "errors": np.zeros(6), "bets": 0.5}, "cannot hold 6 labels"),
    ({"n_population": 10, "errors": [0, 2], "bets": 0.5}, "must be 0"),
    ({"n_population": 10, "errors": [0, 1], "bets": 1.0}, "bets must lie"),
])
def test_cells_refuse_impossible_input(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        CellLabels(**kwargs)  # type: ignore[arg-type]


def _evidence_paths(n_pop: int, null: int, n: int, bet: float, reps: int,
                    rng: np.random.Generator, wrong: int | None = None) -> np.ndarray:
    """Log evidence against ``null`` errors after each label, ``reps`` random orders.

    The population holds ``wrong`` errors (default: exactly the null's).
    """
    wrong = null if wrong is None else wrong
    population = np.r_[np.ones(wrong), np.zeros(n_pop - wrong)]
    x = np.stack([rng.permutation(population)[:n] for _ in range(reps)])
    seen = np.cumsum(x, axis=1) - x
    left = (null - seen) / (n_pop - np.arange(n))
    return np.asarray(np.cumsum(np.log((1 - bet * x) / (1 - bet * left)), axis=1))


def test_at_the_null_the_product_is_a_martingale_and_ville_holds() -> None:
    rng = np.random.default_rng(11)
    paths = _evidence_paths(2000, 100, 400, 0.6, 4000, rng)
    final = np.exp(paths[:, -1])
    # Mean 1 (a martingale): within four standard errors.
    assert abs(final.mean() - 1) <= 4 * final.std() / math.sqrt(final.size)
    ever = np.mean(paths.max(axis=1) >= math.log(20))
    assert ever <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / final.size)
    # More errors than the null count (inside the composite null): a supermartingale.
    heavier = np.exp(_evidence_paths(2000, 100, 400, 0.6, 4000, rng, wrong=130)[:, -1])
    assert heavier.mean() < 1 - 4 * heavier.std() / math.sqrt(heavier.size)
