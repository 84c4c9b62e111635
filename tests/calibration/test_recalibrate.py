"""Recalibration maps: choice of method, knots, and the view that applies them in DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from calib_store import DesignSpec, StratumSpec, build_store, insert_labels, weeks_from
from fieldtrust.calibration.metrics import expected_calibration_error
from fieldtrust.calibration.recalibrate import (
    allowed_methods,
    choose_map,
    current_map,
    fit_map,
    fit_recalibration,
    stored_map,
)
from sklearn.isotonic import IsotonicRegression

from fieldtrust.errors import InputError


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
    with pytest.raises(InputError, match="min_labels_platt <= min_labels_isotonic"):
        fit_recalibration(con, min_labels_isotonic=10, min_labels_platt=50)


def test_non_random_labels_train_but_are_never_scored() -> None:
    """Queue labels join every fit (weight 1, design weights scaled to average 1) and
    never the held-out scores: the ECE before is the audit labels' own."""
    rng = np.random.default_rng(3)
    c = rng.beta(8, 1, 1500)
    y = (rng.random(c.size) < np.where(c < 0.9, 0.6, 0.98)).astype(int)  # a step: isotonic
    w = rng.uniform(10, 30, c.size)
    queue_c = rng.uniform(0.3, 0.8, 800)
    queue_y = (rng.random(queue_c.size) < 0.6).astype(int)
    fitted, scores, before, _, _ = choose_map(
        c, y, weight=w, non_random_confidence=queue_c, non_random_correct=queue_y)
    alone, alone_scores, alone_before, _, _ = choose_map(c, y, weight=w)
    assert fitted.method == "isotonic"
    assert before == pytest.approx(expected_calibration_error(c, y, weight=w, n_bins=10))
    assert before == alone_before and set(scores) == set(alone_scores)
    # Independently: scikit-learn on the union with those weights.
    model = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
        np.r_[c, queue_c], np.r_[y, queue_y], sample_weight=np.r_[w / w.mean(), np.ones(800)])
    grid = np.linspace(0.3, 1.0, 141)
    np.testing.assert_allclose(fitted.predict(grid), model.predict(grid), atol=1e-9)
    assert not np.allclose(fitted.predict(grid), alone.predict(grid))
    # Labels counted towards the methods allowed: 40 audit labels alone keep the identity.
    _, few_scores, *_, warning = choose_map(c[:40], y[:40], weight=w[:40],
                                            non_random_confidence=queue_c,
                                            non_random_correct=queue_y)
    assert warning is None and "platt" in few_scores
    assert choose_map(c[:40], y[:40], weight=w[:40])[-1] is not None


def test_queue_labels_chosen_by_confidence_sharpen_the_map_where_audits_are_few() -> None:
    """Simulation of the assumption (P(correct | c, chosen) = P(correct | c)).

    A stratum audited at random (200 labels, few below 0.7) and a review queue
    of its 1,000 least confident items. Chosen by confidence alone, the queue's
    labels bring the map closer to the truth below 0.7; chosen by outcome
    (items a second source contradicts, mostly wrong) they pull it below the
    truth: the assumption is what makes them usable.
    """
    grid = np.linspace(0.5, 0.7, 21)
    errors: dict[str, list[float]] = {"audit only": [], "queue by confidence": [],
                                      "queue by outcome": []}
    for seed in range(30):
        rng = np.random.default_rng([seed, 5])
        c = rng.beta(6, 1.2, 20_000)
        p = c**3
        y = (rng.random(c.size) < p).astype(int)
        audit = rng.choice(c.size, 200, replace=False)
        rest = np.setdiff1d(np.arange(c.size), audit)
        by_confidence = rest[np.argsort(c[rest])[:1000]]
        wrong_ones = rest[y[rest] == 0]
        by_outcome = wrong_ones[np.argsort(c[wrong_ones])[:700]]
        by_outcome = np.r_[by_outcome, rest[y[rest] == 1][:300]]
        weight = np.full(200, c.size / 200)
        for name, queue in (("audit only", None), ("queue by confidence", by_confidence),
                            ("queue by outcome", by_outcome)):
            extra = {} if queue is None else {"non_random_confidence": c[queue],
                                              "non_random_correct": y[queue]}
            fitted, *_ = choose_map(c[audit], y[audit], weight=weight, min_labels_platt=50,
                                    min_labels_isotonic=1000, seed=seed, **extra)
            errors[name].append(float(np.mean(np.abs(fitted.predict(grid) - grid**3))))
    mean = {name: float(np.mean(v)) for name, v in errors.items()}
    print("\nrecalibration, mean |map - truth| on [0.5, 0.7]: "
          + ", ".join(f"{k} {v:.3f}" for k, v in mean.items()))
    assert mean["queue by confidence"] < 0.7 * mean["audit only"]
    assert mean["queue by outcome"] > mean["audit only"]


def test_fit_recalibration_uses_queue_labels_only_when_asked(con) -> None:
    population = build_store(
        con, [StratumSpec("invoice", "total", per_week=3000)], weeks=weeks_from("2026-W01", 1),
        design=DesignSpec(rate=0.05), seed=2,
    )
    labelled = {r[0] for r in con.execute("SELECT extraction_id FROM labels").fetchall()}
    queue = population[~population["extraction_id"].isin(labelled)].nsmallest(400, "confidence")
    insert_labels(con, queue["extraction_id"].to_numpy(), queue["truth"].to_numpy(),
                  random_sample=False, prefix="Q")
    plain = fit_recalibration(con, seed=1)[0]
    with_queue = fit_recalibration(con, seed=1, non_random=True)[0]
    assert (plain.n_non_random, with_queue.n_non_random) == (0, 400)
    assert plain.n_labels == with_queue.n_labels == len(labelled)
    assert plain.ece_before == with_queue.ece_before  # scored on the audit labels alone
    assert with_queue.to_dict()["non_random_labels"] == 400
    assert not np.allclose(plain.map.predict([0.5, 0.6]), with_queue.map.predict([0.5, 0.6]))
