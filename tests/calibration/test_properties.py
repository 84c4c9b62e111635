"""Properties that hold for any labels (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.bins import reliability_bins
from fieldtrust.calibration.design import N_GRID, Blocks, Labels, grid_index
from fieldtrust.calibration.metrics import brier_score, calibration_metrics
from fieldtrust.calibration.recalibrate import fit_map
from fieldtrust.calibration.table import weighted_accuracy
from fieldtrust.calibration.thresholds import select_thresholds
from fieldtrust.store.bar import Bar
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays


@st.composite
def labelled(draw, min_size: int = 1, max_size: int = 150):
    n = draw(st.integers(min_size, max_size))
    unit = st.floats(0, 1, allow_nan=False, allow_subnormal=False)
    c = draw(arrays(np.float64, n, elements=unit))
    c = np.round(c, draw(st.sampled_from([2, 3, 6])))  # ties happen in real data
    y = draw(arrays(np.int64, n, elements=st.integers(0, 1)))
    w = draw(arrays(np.float64, n, elements=st.floats(0.5, 50)))
    return c, y, w


FAST = settings(max_examples=60, deadline=None)


@FAST
@given(labelled(), st.integers(1, 15), st.sampled_from(["quantile", "uniform"]), st.booleans())
def test_ece_and_brier_lie_in_the_unit_interval(data, n_bins, strategy, weighted) -> None:
    c, y, w = data
    m = calibration_metrics(c, y, weight=w if weighted else None, n_bins=n_bins, strategy=strategy)
    assert 0.0 <= m.ece <= 1.0
    assert 0.0 <= m.brier <= 1.0


@FAST
@given(labelled(), st.randoms(use_true_random=False))
def test_results_do_not_depend_on_row_order(data, random) -> None:
    c, y, w = data
    order = np.arange(c.size)
    random.shuffle(order)
    a = reliability_bins(c, y, weight=w, n_bins=7).to_pandas()
    b = reliability_bins(c[order], y[order], weight=w[order], n_bins=7).to_pandas()
    np.testing.assert_allclose(a.to_numpy(dtype=float), b.to_numpy(dtype=float),
                               rtol=1e-12, atol=1e-12)
    m1 = calibration_metrics(c, y, weight=w)
    m2 = calibration_metrics(c[order], y[order], weight=w[order])
    assert m1.ece == pytest.approx(m2.ece, abs=1e-12)
    assert m1.brier == pytest.approx(m2.brier, abs=1e-12)
    cells = np.arange(c.size) % 3
    acc1 = weighted_accuracy(y, w, cells)
    acc2 = weighted_accuracy(y[order], w[order], cells[order])
    assert (acc1.accuracy, acc1.variance) == pytest.approx((acc2.accuracy, acc2.variance),
                                                           abs=1e-12)


@FAST
@given(labelled(min_size=2), st.floats(0.5, 200))
def test_equal_weights_reproduce_unweighted_results(data, constant) -> None:
    c, y, _ = data
    w = np.full(c.size, constant)  # a simple random sample: every weight N / n
    for strategy in ("quantile", "uniform"):
        plain = reliability_bins(c, y, n_bins=5, strategy=strategy).to_pandas()
        weighted = reliability_bins(c, y, weight=w, n_bins=5, strategy=strategy).to_pandas()
        for column in ("n", "mean_confidence", "accuracy", "accuracy_low", "accuracy_high"):
            np.testing.assert_allclose(weighted[column], plain[column], rtol=1e-9, atol=1e-12)
        m_plain = calibration_metrics(c, y, n_bins=5, strategy=strategy)
        m_weighted = calibration_metrics(c, y, weight=w, n_bins=5, strategy=strategy)
        assert m_weighted.ece == pytest.approx(m_plain.ece, abs=1e-12)
        assert m_weighted.ece_debiased == pytest.approx(m_plain.ece_debiased, abs=1e-12)
        assert m_weighted.brier == pytest.approx(m_plain.brier, abs=1e-12)
    assert weighted_accuracy(y, w, np.zeros(c.size)).accuracy == pytest.approx(y.mean())


@FAST
@given(labelled(min_size=2), st.floats(0.5, 200), st.integers(1, 30))
def test_equal_weights_leave_thresholds_unchanged(data, constant, n_min) -> None:
    c, y, _ = data
    k = grid_index(c)
    design = Blocks.simple_random_sample(np.bincount(k, minlength=N_GRID), c.size)
    u = np.linspace(0, 0.99, c.size)

    def result(weight: float):
        labels = Labels(k, y.astype(float), np.full(c.size, weight),
                        np.zeros(c.size, dtype=np.int64), u)
        return select_thresholds(design, labels, Bar(n_min=n_min, prior_error=0.0))

    one, other = result(1.0), result(constant)
    for name in ("point", "certified", "first_failure"):
        a, b = getattr(one, name), getattr(other, name)
        assert (a is None) == (b is None)
        if a is not None:
            assert vars(a) == pytest.approx(vars(b), rel=1e-12, abs=1e-12)
    assert (one.tested, one.labels_needed, one.labels_needed_threshold) == (
        other.tested, other.labels_needed, other.labels_needed_threshold)


@FAST
@given(labelled(min_size=2), st.booleans())
def test_isotonic_and_platt_maps_are_monotone_and_in_the_unit_interval(data, weighted) -> None:
    c, y, w = data
    grid = np.linspace(0, 1, 501)
    for method in ("isotonic", "platt"):
        fitted = fit_map(c, y, weight=w if weighted else None, method=method)
        values = fitted.predict(grid)
        assert np.all(np.diff(values) >= -1e-12)
        assert values.min() >= 0.0 and values.max() <= 1.0
        assert fitted.x[0] == 0.0 and np.all(np.diff(fitted.x) > 0)


@FAST
@given(labelled(min_size=1))
def test_brier_is_zero_only_for_perfect_certainty(data) -> None:
    c, y, _ = data
    assert brier_score(y.astype(float), y) == 0.0
    assert brier_score(c, y) >= 0.0
