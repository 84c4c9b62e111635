"""Point and certified thresholds on hand-built designs (pure functions)."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.design import (
    GRID,
    N_GRID,
    Blocks,
    Labels,
    error_bound,
    error_bounds,
    grid_index,
    kept_labels,
    unlabelled_mass,
)
from fieldtrust.calibration.thresholds import candidate_grid, select_thresholds, threshold_table
from fieldtrust.store.bar import Bar
from scipy.stats import beta

from fieldtrust.errors import InputError


def srs(confidence: np.ndarray, labelled: np.ndarray, correct: np.ndarray, seed: int = 0):
    """Blocks and labels of a simple random sample (one block, one cell)."""
    hist = np.bincount(grid_index(confidence), minlength=N_GRID)
    design = Blocks.simple_random_sample(hist, labelled.size)
    labels = Labels(
        k=grid_index(confidence[labelled]),
        correct=correct.astype(float),
        weight=np.full(labelled.size, confidence.size / labelled.size),
        cell=np.zeros(labelled.size, dtype=np.int64),
        u=np.random.default_rng(seed).random(labelled.size),
    )
    return design, labels


def brute_force_walk(confidence, lab_conf, correct, *, target, delta, n_min):
    """STATS.md section 6 written out plainly: grid, skip, walk down, stop at first failure."""
    grid = sorted({int(np.floor(c * 200 + 1e-9)) for c in confidence}, reverse=True)
    lab_k = np.floor(lab_conf * 200 + 1e-9)
    certified = None
    for k in grid:
        above = lab_k >= k
        n = int(above.sum())
        if n < n_min:
            continue
        errors = int(n - correct[above].sum())
        bound = 1.0 if errors == n else beta.ppf(1 - delta, errors + 1, n - errors)
        if bound <= 1 - target and correct[above].mean() >= target:
            certified = k / 200
        else:
            break
    return certified


@pytest.mark.parametrize("seed", range(6))
def test_certified_threshold_equals_a_brute_force_walk_for_a_simple_random_sample(seed) -> None:
    rng = np.random.default_rng(seed)
    c = rng.beta(8, 1, 20_000)
    y = rng.random(c.size) < 1 - 1.6 * (1 - c)
    labelled = rng.choice(c.size, 2000, replace=False)
    design, labels = srs(c, labelled, y[labelled])
    result = select_thresholds(design, labels,
                               Bar(target=0.95, confidence=0.95, n_min=100, prior_error=0.0))
    expected = brute_force_walk(c, c[labelled], y[labelled].astype(float),
                                target=0.95, delta=0.05, n_min=100)
    got = result.certified.threshold if result.certified else None
    assert got == expected
    if result.certified:
        assert result.certified.exact  # one probability, no remainder: plain Clopper-Pearson


def test_walk_stops_at_the_first_failure_even_if_lower_candidates_would_pass() -> None:
    c = np.repeat([0.99, 0.97, 0.95, 0.93], 500)
    y = np.ones(c.size)
    y[(c == 0.97)] = 0  # a bad band in the middle
    design, labels = srs(c, np.arange(c.size), y)
    result = select_thresholds(design, labels, Bar(n_min=100, prior_error=0.0))
    assert result.certified.threshold == 0.99
    assert result.first_failure.threshold == 0.97
    assert result.tested == 2


def test_candidates_with_too_few_labels_are_skipped_not_failed() -> None:
    # 50 perfect labels at the top: skipped (n_min = 100); the walk starts lower.
    c = np.r_[np.full(50, 0.995), np.full(400, 0.90)]
    y = np.ones(c.size)
    design, labels = srs(c, np.arange(c.size), y)
    result = select_thresholds(design, labels, Bar(n_min=100, prior_error=0.0))
    assert result.tested == 1
    assert result.certified.threshold == 0.90
    assert result.certified.coverage == 1.0


def test_point_threshold_is_the_lowest_candidate_whose_weighted_accuracy_reaches_target() -> None:
    c = np.repeat([0.99, 0.95, 0.90, 0.80], 100)
    y = np.r_[np.ones(100), np.ones(95), np.zeros(5), np.ones(90), np.zeros(10), np.zeros(100)]
    design, labels = srs(c, np.arange(c.size), y)
    result = select_thresholds(design, labels, Bar(target=0.95, n_min=1000, prior_error=0.0))
    # Above 0.90: (100 + 95 + 90) / 300 = 0.95 exactly; above 0.80 it drops.
    assert result.point.threshold == 0.90
    assert result.point.accuracy == pytest.approx(0.95)
    assert result.point.coverage == pytest.approx(0.75)
    assert result.certified is None and result.tested == 0


def test_labels_needed_when_nothing_is_tested() -> None:
    # 80 perfect labels, n_min = 100: 20 more above the lowest candidate would do.
    c = np.linspace(0.9, 0.99, 80)
    design, labels = srs(c, np.arange(c.size), np.ones(c.size))
    result = select_thresholds(design, labels, Bar(n_min=100, prior_error=0.0))
    assert result.certified is None
    assert result.labels_needed == 20
    assert result.labels_needed_threshold == 0.9


def test_labels_needed_follows_the_table_at_zero_errors() -> None:
    # 40 perfect labels, n_min below 59: 19 more reach the 59 of STATS.md's table.
    c = np.full(40, 0.97)
    design, labels = srs(c, np.arange(c.size), np.ones(c.size))
    result = select_thresholds(design, labels, Bar(n_min=10, prior_error=0.0))
    assert result.certified is None and result.first_failure.threshold == 0.97
    assert result.labels_needed == 19


def test_nothing_to_gain_from_labels_when_every_candidate_is_below_target() -> None:
    c = np.full(300, 0.97)
    y = np.r_[np.ones(240), np.zeros(60)]
    design, labels = srs(c, np.arange(c.size), y)
    result = select_thresholds(design, labels, Bar(prior_error=0.0))
    assert result.point is None and result.certified is None
    assert result.labels_needed is None


def two_cell_design(pi_a: float, pi_b: float, cap_b: float = 1000.0) -> Blocks:
    hist = np.zeros((1, N_GRID), dtype=np.int64)
    hist[0, 190] = 2000
    return Blocks(
        block_hist=hist,
        cell_block=np.array([0, 0]),
        cell_pi=np.array([pi_a, pi_b]),
        cell_cap=np.array([1000.0, cap_b]),
    )


def test_thinning_keeps_labels_by_random_number_never_by_verdict() -> None:
    design = two_cell_design(0.1, 0.5)
    rng = np.random.default_rng(0)
    cell = np.r_[np.zeros(100, dtype=np.int64), np.ones(500, dtype=np.int64)]
    u = rng.random(cell.size)
    good = Labels(np.full(600, 190), np.ones(600), 1 / np.r_[[0.1] * 100, [0.5] * 500], cell, u)
    bad = Labels(good.k, np.zeros(600), good.weight, cell, u)
    keep = kept_labels(design, good, 190)
    assert np.array_equal(keep, kept_labels(design, bad, 190))
    assert keep[:100].all()  # the lowest probability keeps everything
    assert np.array_equal(keep[100:], u[100:] < 0.2)  # 0.5 thinned to 0.1


def test_equal_probabilities_give_the_plain_clopper_pearson_bound() -> None:
    design = two_cell_design(0.1, 0.1)
    labels = Labels(np.full(200, 190), np.r_[np.ones(197), np.zeros(3)], np.full(200, 10.0),
                    np.r_[np.zeros(100), np.ones(100)].astype(np.int64), np.full(200, 0.5))
    bound = error_bound(design, labels, 190, delta=0.05)
    assert bound.exact and bound.kept_labels == 200
    assert bound.value == pytest.approx(beta.ppf(0.95, 4, 197))


def test_rows_no_cell_accounts_for_count_as_errors() -> None:
    # The block holds 2000 extractions but the cells recorded 1500 (late rows).
    design = two_cell_design(0.1, 0.1, cap_b=500.0)
    assert unlabelled_mass(design, 190) == 500
    labels = Labels(np.full(150, 190), np.ones(150), np.full(150, 10.0),
                    np.zeros(150, dtype=np.int64), np.full(150, 0.5))
    bound = error_bound(design, labels, 190, delta=0.05)
    ucb = 1 - 0.05 ** (1 / 150)
    assert bound.value == pytest.approx(0.25 * 1 + 0.75 * ucb)
    assert not bound.exact
    lower = error_bound(design, labels, 190, delta=0.05, side="lower")
    assert lower.value == 0.0


def test_threshold_table_marks_certified_and_point_rows() -> None:
    rng = np.random.default_rng(4)
    c = rng.beta(8, 1, 5000)
    y = rng.random(c.size) < 1 - 1.6 * (1 - c)
    labelled = rng.choice(c.size, 1500, replace=False)
    design, labels = srs(c, labelled, y[labelled])
    table = threshold_table(design, labels, Bar(prior_error=0.0)).to_pandas()
    result = select_thresholds(design, labels, Bar(prior_error=0.0))
    assert table["threshold"].tolist() == [k / GRID for k in candidate_grid(design.population_hist)]
    assert table["coverage"].is_monotonic_increasing
    assert table["labels_above"].is_monotonic_increasing
    assert (table["accuracy_low"] <= table["accuracy"] + 1e-12).all()
    if result.certified:
        assert table.loc[table["certified"], "threshold"].min() == result.certified.threshold
    assert table.loc[table["point"], "threshold"].tolist() == (
        [result.point.threshold] if result.point else []
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"target": 1.0}, "target = 1.0 must be strictly between 0 and 1"),
     ({"confidence": 0.0}, "confidence = 0.0 must be strictly between 0 and 1"),
     ({"n_min": 0}, "n_min = 0 must be at least 1"),
     ({"stability_weeks": 521}, "stability_weeks = 521 must be between 1 and 520 weeks")],
)
def test_a_bar_with_settings_out_of_range_cannot_be_made(kwargs, message) -> None:
    # The thresholds take the bar whole, so a bad setting is refused before any of them runs.
    with pytest.raises(InputError, match=message):
        Bar(**kwargs)


def _plain_bound(design: Blocks, labels: Labels, k: int, delta: float, side: str) -> float:
    """STATS.md section 6 at one index, written out with scipy: thin, bound, add the remainder."""
    total = design.suffix[:, k].sum()
    if total == 0:
        return float("nan")
    keep = kept_labels(design, labels, k)
    n, errors = int(keep.sum()), round(keep.sum() - labels.correct[keep].sum())
    if side == "upper":
        covered = 1.0 if errors == n else beta.ppf(1 - delta, errors + 1, n - errors)
        above = (labels.k >= k) & (labels.cell >= 0)
        w, wrong = labels.weight[above], 1 - labels.correct[above]
        if w.size and (w * wrong).sum() < w.sum():
            p, n_eff = (w * wrong).sum() / w.sum(), w.sum() ** 2 / (w**2).sum()
            covered = max(covered, beta.ppf(1 - delta, n_eff * p + 1, n_eff * (1 - p)))
        else:
            covered = 1.0
        rest_value = 1.0
    else:
        covered = 0.0 if errors == 0 else beta.ppf(delta, errors, n - errors + 1)
        rest_value = 0.0
    rest = unlabelled_mass(design, k)
    return float((rest * rest_value + (total - rest) * covered) / total)


@pytest.mark.parametrize("side", ["upper", "lower"])
@pytest.mark.parametrize("seed", range(4))
def test_the_vectorised_scan_equals_a_plain_bound_at_every_index(side: str, seed: int) -> None:
    # Three blocks (two audited weeks and the unaudited rest), cells of unequal
    # probability, late rows no cell accounts for, labels outside any cell.
    rng = np.random.default_rng(seed)
    hist = np.stack([np.bincount(grid_index(rng.beta(6, 1, size)), minlength=N_GRID)
                     for size in (3000, 2000, 4000)])
    design = Blocks(hist, cell_block=np.array([0, 0, 1, 1]),
                    cell_pi=np.array([0.05, 0.2, 0.1, 0.1]),
                    cell_cap=np.array([2000.0, 900.0, 1000.0, 900.0]))
    n = 700
    cell = rng.integers(-1, 4, n)
    labels = Labels(k=grid_index(rng.beta(6, 1, n)), correct=(rng.random(n) < 0.93).astype(float),
                    weight=1 / design.cell_pi[np.maximum(cell, 0)], cell=cell, u=rng.random(n))
    ks = np.arange(N_GRID)
    bounds = error_bounds(design, labels, ks, delta=0.05, side=side)
    for k in ks:
        expected = _plain_bound(design, labels, int(k), 0.05, side)
        assert bounds.value[k] == pytest.approx(expected, rel=1e-9, abs=1e-12, nan_ok=True), k
        assert bounds.kept_labels[k] == kept_labels(design, labels, int(k)).sum()
        one = error_bound(design, labels, int(k), delta=0.05, side=side)
        assert one.value == pytest.approx(bounds.value[k], nan_ok=True)
        assert (one.kept_labels, one.kept_errors, one.exact) == (
            bounds.kept_labels[k], bounds.kept_errors[k], bounds.exact[k])
