"""Recalibration maps: choice of method, knots, and the view that applies them in DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from calib_store import DesignSpec, StratumSpec, build_store, weeks_from
from fieldtrust.calibration.errors import CalibrationInputError
from fieldtrust.calibration.recalibrate import (
    allowed_methods,
    choose_map,
    current_map,
    fit_map,
    fit_recalibration,
    stored_map,
)
from sklearn.isotonic import IsotonicRegression


def miscalibrated(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = rng.beta(6, 1.2, n)
    y = (rng.random(n) < c**3).astype(int)  # overconfident
    return c, y


def test_isotonic_map_equals_sklearn_predictions() -> None:
    c, y = miscalibrated(0, 2000)
    w = np.random.default_rng(1).uniform(1, 5, c.size)
    model = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(c, y, sample_weight=w)
    fitted = fit_map(c, y, weight=w, method="isotonic")
    grid = np.r_[np.linspace(0, 1, 1001), c[:200]]
    np.testing.assert_allclose(fitted.predict(grid), model.predict(grid), atol=1e-12)
    assert fitted.x[0] == 0.0 and fitted.x[-1] == 1.0
    assert np.all(np.diff(fitted.x) > 0)


def test_platt_map_is_a_sigmoid_of_logit_confidence() -> None:
    c, y = miscalibrated(2, 800)
    fitted = fit_map(c, y, method="platt")
    x = fitted.x[1:-1]
    logit_x = np.log(x / (1 - x))
    logit_y = np.log(fitted.y[1:-1] / (1 - fitted.y[1:-1]))
    slope, intercept = np.polyfit(logit_x, logit_y, 1)
    np.testing.assert_allclose(logit_y, slope * logit_x + intercept, atol=1e-6)
    assert slope > 1  # overconfident scores get stretched


def test_platt_copes_with_a_single_class() -> None:
    fitted = fit_map(np.linspace(0.9, 1, 60), np.ones(60), method="platt")
    assert np.all((fitted.y > 0.9) & (fitted.y < 1))


@pytest.mark.parametrize(
    ("n", "expected"),
    [(10, ("identity",)), (50, ("identity", "platt")), (999, ("identity", "platt")),
     (1000, ("identity", "platt", "isotonic"))],
)
def test_label_count_decides_which_methods_are_allowed(n, expected) -> None:
    assert allowed_methods(n, min_labels_isotonic=1000, min_labels_platt=50) == expected


def test_too_few_labels_keep_the_identity_with_a_warning() -> None:
    c, y = miscalibrated(3, 30)
    fitted, scores, _, _, warning = choose_map(c, y, min_labels_platt=50)
    assert fitted.method == "identity"
    assert set(scores) == {"identity"}
    assert warning is not None and "only 30 labels" in warning


def test_cross_validation_picks_a_map_that_helps_on_held_out_folds() -> None:
    c, y = miscalibrated(4, 3000)
    fitted, scores, ece_before, ece_after, warning = choose_map(c, y, min_labels_isotonic=1000)
    assert warning is None
    assert fitted.method in ("platt", "isotonic")
    assert scores[fitted.method] == min(scores.values())
    assert scores[fitted.method] < scores["identity"]
    assert ece_after < ece_before / 2


def test_calibrated_confidences_keep_the_identity() -> None:
    rng = np.random.default_rng(5)
    c = rng.uniform(0, 1, 400)
    y = (rng.random(c.size) < c).astype(int)
    fitted, *_ = choose_map(c, y, min_labels_isotonic=10_000)
    # Platt may win by a hair; either way the map stays close to the diagonal.
    grid = np.linspace(0.05, 0.95, 19)
    assert np.max(np.abs(fitted.predict(grid) - grid)) < 0.1


@pytest.fixture
def fitted_store(con):
    build_store(
        con,
        [StratumSpec("invoice", "total", per_week=6000,
                     p_correct=lambda c: np.where(c < 0.9, 0.5, 0.99)),  # a step: not a sigmoid
         StratumSpec("receipt", "tax", per_week=3000, p_correct=lambda c: np.full_like(c, 0.6)),
         StratumSpec("order", "number", per_week=300)],
        weeks=weeks_from("2026-W01", 2), design=DesignSpec(rate=0.1, minimum=3), seed=6,
    )
    results = fit_recalibration(con, min_labels_isotonic=1000, min_labels_platt=100, seed=1)
    return con, {(r.doc_type, r.field): r for r in results}


def test_each_stratum_gets_a_stored_map(fitted_store) -> None:
    con, results = fitted_store
    assert set(results) == {("invoice", "total"), ("receipt", "tax"), ("order", "number")}
    assert results[("invoice", "total")].method == "isotonic"  # > 1000 labels, a step
    assert results[("order", "number")].method == "identity"
    assert results[("order", "number")].warning is not None
    rows = con.execute(
        "SELECT doc_type, field, method, n_labels FROM current_recalibration_maps ORDER BY 1, 2"
    ).fetchall()
    assert [(d, f, m) for d, f, m, _ in rows] == sorted(
        (d, f, r.method) for (d, f), r in results.items()
    )
    for (doc_type, field), result in results.items():
        stored = current_map(con, doc_type, field)
        assert stored is not None and stored.x[0] == 0.0
        np.testing.assert_array_equal(stored.x, result.map.x)
        np.testing.assert_array_equal(stored.y, result.map.y)


def test_stored_map_carries_what_was_recorded(fitted_store) -> None:
    con, results = fitted_store
    info = stored_map(con, "invoice", "total")
    result = results[("invoice", "total")]
    assert info is not None and info.map_id == result.map_id
    assert (info.method, info.n_labels) == (result.method, result.n_labels)
    assert info.ece_before == pytest.approx(result.ece_before)
    assert info.ece_after == pytest.approx(result.ece_after)
    assert info.cv_score == pytest.approx(result.cv_brier[result.method])
    assert stored_map(con, "invoice", "nope") is None


def test_the_view_applies_the_fitted_maps_to_every_extraction(fitted_store) -> None:
    con, results = fitted_store
    applied = con.sql(
        "SELECT e.doc_type, e.field, e.confidence, c.calibrated_confidence, c.method"
        " FROM extractions e JOIN calibrated_confidence c USING (extraction_id)"
    ).to_arrow_table().to_pandas()
    assert len(applied) == con.execute("SELECT count(*) FROM extractions").fetchone()[0]
    for (doc_type, field), group in applied.groupby(["doc_type", "field"]):
        result = results[(doc_type, field)]
        expected = result.map.predict(group["confidence"].to_numpy())
        np.testing.assert_allclose(group["calibrated_confidence"], expected, rtol=0, atol=1e-12)
        assert set(group["method"]) == {result.method}


def test_refitting_makes_a_new_current_map(fitted_store) -> None:
    con, _ = fitted_store
    fit_recalibration(con, min_labels_isotonic=100_000, min_labels_platt=100, seed=2)
    assert con.execute(
        "SELECT method FROM current_recalibration_maps WHERE doc_type = 'invoice'"
    ).fetchone()[0] == "platt"
    assert con.execute("SELECT count(*) FROM recalibration_maps").fetchone()[0] == 6


def test_bad_minimums_are_refused(con) -> None:
    with pytest.raises(CalibrationInputError, match="min_labels_platt <= min_labels_isotonic"):
        fit_recalibration(con, min_labels_isotonic=10, min_labels_platt=50)
