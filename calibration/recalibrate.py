"""Recalibration per stratum: stated confidence -> estimated P(correct) (STATS.md section 5).

Which method a stratum may use depends on its label count: isotonic
regression with enough labels (scikit-learn warns below about a thousand),
Platt scaling (logistic regression on ``logit(c)``) below that, the identity
(stated confidence kept, with a warning) below a minimum. Among the methods
allowed, the one with the lowest cross-validated, design-weighted Brier
score wins; ties go to the simpler one. ECE before and after is measured on
the held-out folds.

Non-random labels (the review queue, ad hoc review: STATS.md sections 2 and
5) may join the fit on request (``non_random=True``). That assumes their
items were chosen, within the stratum, by stated confidence alone (the
queue's "least confident first"), so that at a given confidence their
errors are like everyone's: ``P(correct | c, chosen) = P(correct | c)``. A
choice that looks at anything else (conflicts with another source, values
marked unclear, a reviewer's hunch) breaks it. They only ever train: every
fold's held-out labels, the CV scores and the ECE before and after are the
design-based labels alone, so the figures stored with a map still describe
the stratum's extractions. In the fit each non-random label weighs 1 and
the design-based weights are scaled to average 1, so both count per label
and the audit's own weights still balance its cells.

Every fitted map is stored as knots of a piecewise-linear function
(``recalibration_maps`` / ``recalibration_knots``): isotonic regression is
exactly piecewise linear, Platt's sigmoid is sampled every 0.001. The view
``calibrated_confidence`` applies the current map of each stratum to every
extraction inside DuckDB with an ASOF join.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.bins import check_inputs
from fieldtrust.calibration.metrics import expected_calibration_error
from fieldtrust.calibration.population import load_strata
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.scope import Scope
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold

from fieldtrust.errors import InputError

#: Methods from simplest to most flexible; ties in CV go to the simpler.
METHODS = ("identity", "platt", "isotonic")
#: Platt's sigmoid is stored sampled at this many evenly spaced confidences.
PLATT_KNOTS = 1001
_EPS = 1e-4  # logit(c) is clipped to [logit(eps), logit(1 - eps)]


@dataclass(frozen=True)
class RecalibrationMap:
    """A piecewise-linear map through knots ``(x, y)``; ``x`` ascending, starting at 0."""

    method: str
    x: FloatArray
    y: FloatArray

    def predict(self, confidence: npt.ArrayLike) -> FloatArray:
        """Calibrated confidence: linear between knots, constant beyond the last one."""
        out: FloatArray = np.interp(np.asarray(confidence, dtype=float), self.x, self.y)
        return out


@dataclass(frozen=True)
class RecalibrationResult:
    """The map chosen for one stratum and how it was chosen."""

    doc_type: str
    field: str
    method: str
    n_labels: int
    cv_brier: dict[str, float]  # method -> cross-validated weighted Brier score
    ece_before: float  # stated confidence, on the held-out folds
    ece_after: float  # chosen map, out-of-fold predictions
    map: RecalibrationMap
    warning: str | None = None
    map_id: str | None = None  # set once stored
    n_non_random: int = 0  # non-random labels that joined the fit (never the scores)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a row of ``fieldtrust recalibrate --json``), without the knots."""
        return {"doc_type": self.doc_type, "field": self.field, "method": self.method,
                "labels": self.n_labels, "non_random_labels": self.n_non_random,
                "cv_brier": self.cv_brier.get(self.method),
                "ece_before": self.ece_before, "ece_after": self.ece_after,
                "map_id": self.map_id, "warning": self.warning}


def _logit(c: FloatArray) -> FloatArray:
    clipped = np.clip(c, _EPS, 1 - _EPS)
    return np.log(clipped / (1 - clipped))


def fit_map(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    method: str,
) -> RecalibrationMap:
    """Fit one method on labels and return it as knots.

    References
    ----------
    Zadrozny & Elkan (2002), KDD (isotonic); Platt (1999), "Probabilistic
    outputs for support vector machines"; Niculescu-Mizil & Caruana (2005).
    """
    c, y, w = check_inputs(confidence, correct, weight)
    if method == "identity":
        return RecalibrationMap("identity", np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    if method == "isotonic":
        model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
        model.fit(c, y, sample_weight=w)
        x = np.asarray(model.X_thresholds_, dtype=float)
        fx = np.asarray(model.y_thresholds_, dtype=float)
        # Clipping makes the map flat outside the data: add the ends explicitly.
        if x[0] > 0:
            x, fx = np.r_[0.0, x], np.r_[fx[0], fx]
        if x[-1] < 1:
            x, fx = np.r_[x, 1.0], np.r_[fx, fx[-1]]
        return RecalibrationMap("isotonic", x, np.clip(fx, 0.0, 1.0))
    if method == "platt":
        return RecalibrationMap("platt", *_platt_knots(c, y, w))
    raise InputError(f"method {method!r} is not one of {', '.join(METHODS)}")


def _platt_knots(c: FloatArray, y: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Platt's sigmoid on ``logit(c)`` with his smoothed targets, sampled as knots.

    Platt replaces the 0/1 targets by ``1 / (N- + 2)`` and ``(N+ + 1) / (N+ + 2)``
    (so separable labels, even a single class, still give a finite fit); each
    label enters twice, once per class, weighted by its target.
    """
    n_pos, n_neg = float(np.sum(w * y)), float(np.sum(w * (1 - y)))
    target = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    features = np.r_[_logit(c), _logit(c)].reshape(-1, 1)
    classes = np.r_[np.ones(c.size), np.zeros(c.size)].astype(int)
    sample_weight = np.r_[w * target, w * (1 - target)]
    x = np.linspace(0.0, 1.0, PLATT_KNOTS)
    if np.unique(c).size >= 2:
        model = LogisticRegression(C=np.inf, solver="newton-cholesky", max_iter=200)
        model.fit(features, classes, sample_weight=sample_weight)
        if model.coef_[0, 0] > 0:
            return x, np.clip(model.predict_proba(_logit(x).reshape(-1, 1))[:, 1], 0.0, 1.0)
    # One distinct confidence, or more confidence meaning fewer correct labels:
    # a map must not reverse the ranking, so the best monotone sigmoid is flat.
    flat = float(np.sum(sample_weight[: c.size]) / np.sum(w))
    return x, np.full(x.size, flat)


def allowed_methods(
    n_labels: int, *, min_labels_isotonic: int, min_labels_platt: int
) -> tuple[str, ...]:
    """Methods a stratum with ``n_labels`` labels may use."""
    if n_labels >= min_labels_isotonic:
        return METHODS
    if n_labels >= min_labels_platt:
        return METHODS[:2]
    return METHODS[:1]


Folds = list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]


def _folds(y: FloatArray, n_folds: int, seed: int) -> Folds:
    """Stratified by verdict when each fold can hold a minority label, else plain."""
    minority = int(min(y.sum(), y.size - y.sum()))
    if minority >= n_folds:
        splitter = StratifiedKFold(n_folds, shuffle=True, random_state=seed)
        return list(splitter.split(y.reshape(-1, 1), y.astype(int)))
    return list(KFold(n_folds, shuffle=True, random_state=seed).split(y.reshape(-1, 1)))


def cross_validate(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    methods: tuple[str, ...] = METHODS,
    n_folds: int = 5,
    seed: int = 0,
    non_random_confidence: npt.ArrayLike | None = None,
    non_random_correct: npt.ArrayLike | None = None,
) -> dict[str, FloatArray]:
    """Out-of-fold predictions of each method (methods that cannot fit a fold are left out).

    Folds split the (design-based) labels given first; non-random labels, if
    any, join every fold's training set and are never held out.
    """
    c, y, w = check_inputs(confidence, correct, weight)
    extra_c, extra_y, _ = check_inputs(
        np.zeros(0) if non_random_confidence is None else non_random_confidence,
        np.zeros(0) if non_random_correct is None else non_random_correct, None)
    if c.size < n_folds:
        return {"identity": c.copy()} if "identity" in methods else {}
    folds = _folds(y, n_folds, seed)
    out: dict[str, FloatArray] = {}
    for method in methods:
        pred = np.empty_like(c)
        try:
            for train, test in folds:
                train_c, train_y, train_w = _training_set(
                    c[train], y[train], w[train], extra_c, extra_y)
                pred[test] = fit_map(train_c, train_y, weight=train_w, method=method).predict(
                    c[test]
                )
        except InputError:
            continue  # a method that cannot fit some fold is not a choice
        out[method] = pred
    return out


def _training_set(
    c: FloatArray, y: FloatArray, w: FloatArray, extra_c: FloatArray, extra_y: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Design-based labels (weights scaled to average 1) and non-random ones (weight 1)."""
    if extra_c.size == 0:
        return c, y, w
    scaled = w / w.mean() if w.size else w
    return np.r_[c, extra_c], np.r_[y, extra_y], np.r_[scaled, np.ones(extra_c.size)]


def choose_map(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    min_labels_isotonic: int = 1000,
    min_labels_platt: int = 50,
    n_folds: int = 5,
    seed: int = 0,
    n_bins: int = 10,
    non_random_confidence: npt.ArrayLike | None = None,
    non_random_correct: npt.ArrayLike | None = None,
) -> tuple[RecalibrationMap, dict[str, float], float, float, str | None]:
    """Pick a method by cross-validated Brier score and fit it on all labels.

    Returns the map, the CV Brier score of each method tried, ECE before and
    after on the held-out folds, and a warning when the identity was forced.
    Non-random labels (``non_random_confidence``, ``non_random_correct``)
    count towards the methods allowed and join every fit; the scores and ECE
    are the design-based labels' alone (module docstring: the assumption).
    """
    c, y, w = check_inputs(confidence, correct, weight)
    extra_c, extra_y, _ = check_inputs(
        np.zeros(0) if non_random_confidence is None else non_random_confidence,
        np.zeros(0) if non_random_correct is None else non_random_correct, None)
    n_fit = c.size + extra_c.size
    allowed = allowed_methods(
        n_fit, min_labels_isotonic=min_labels_isotonic, min_labels_platt=min_labels_platt
    )
    warning = None
    if allowed == ("identity",):
        warning = (
            f"only {n_fit} labels: stated confidence kept (identity map);"
            f" recalibration needs at least {min_labels_platt}"
        )
    predictions = cross_validate(c, y, weight=w, methods=allowed, n_folds=n_folds, seed=seed,
                                 non_random_confidence=extra_c, non_random_correct=extra_y)
    scores = {m: float(np.sum(w * (p - y) ** 2) / np.sum(w)) for m, p in predictions.items()}
    best = min(scores, key=lambda m: (scores[m], METHODS.index(m))) if scores else "identity"

    def ece(p: FloatArray) -> float:
        return expected_calibration_error(p, y, weight=w, n_bins=n_bins) if c.size else np.nan

    after = predictions.get(best, c)
    fit_c, fit_y, fit_w = _training_set(c, y, w, extra_c, extra_y)
    fitted = fit_map(fit_c, fit_y, weight=fit_w, method=best)
    return fitted, scores, ece(c), ece(after), warning


def store_map(
    con: duckdb.DuckDBPyConnection, result: RecalibrationResult
) -> str:
    """Write one map and its knots; it becomes the stratum's current map. Returns map_id."""
    map_id = uuid.uuid4().hex
    cv = result.cv_brier.get(result.method)
    with transaction(con):
        con.execute(
            "INSERT INTO recalibration_maps (map_id, doc_type, field, method, n_labels, cv_score,"
            " ece_before, ece_after, fitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [map_id, result.doc_type, result.field, result.method, result.n_labels, cv,
             _finite(result.ece_before), _finite(result.ece_after), utc_now()],
        )
        knots = pa.table(  # noqa: F841 (read by the SQL below)
            {"map_id": [map_id] * result.map.x.size, "x": result.map.x, "y": result.map.y}
        )
        con.execute("INSERT INTO recalibration_knots (map_id, x, y) SELECT map_id, x, y FROM knots")
    return map_id


def _finite(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def fit_recalibration(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    min_labels_isotonic: int = 1000,
    min_labels_platt: int = 50,
    n_folds: int = 5,
    seed: int = 0,
    n_bins: int = 10,
    non_random: bool = False,
) -> list[RecalibrationResult]:
    """Fit, choose and store a recalibration map for every stratum with labels in ``scope``.

    Parameters
    ----------
    con
        A writable store connection.
    scope
        Labels used for fitting (the map is applied to all extractions).
    min_labels_isotonic, min_labels_platt
        Label counts from which isotonic regression, and Platt scaling, may be used.
    n_folds, seed
        Cross-validation folds and their shuffling seed.
    non_random
        Let the stratum's non-random labels join the fit (never the scores),
        assuming their items were chosen by stated confidence alone (module
        docstring). A stratum without design-based labels gets no map either way.

    Returns
    -------
    list of RecalibrationResult
        One per stratum with design-based labels, with ``map_id`` of the
        stored map (its ``n_labels`` counts the design-based labels only).
        Strata forced to the identity carry a ``warning``.
    """
    if min_labels_platt < 2 or min_labels_isotonic < min_labels_platt:
        raise InputError(
            f"need 2 <= min_labels_platt <= min_labels_isotonic, got {min_labels_platt}"
            f" and {min_labels_isotonic}"
        )
    results = []
    for data in load_strata(con, scope):
        if data.n_labeled == 0:
            continue
        extra_c = data.other_confidence if non_random else np.zeros(0)
        extra_y = data.other_correct if non_random else np.zeros(0)
        fitted, scores, before, after, warning = choose_map(
            data.confidence, data.correct, weight=data.weight,
            min_labels_isotonic=min_labels_isotonic, min_labels_platt=min_labels_platt,
            n_folds=n_folds, seed=seed, n_bins=n_bins,
            non_random_confidence=extra_c, non_random_correct=extra_y,
        )
        result = RecalibrationResult(
            doc_type=data.doc_type, field=data.field, method=fitted.method,
            n_labels=data.n_labeled, cv_brier=scores, ece_before=before, ece_after=after,
            map=fitted, warning=warning, n_non_random=int(extra_c.size),
        )
        map_id = store_map(con, result)
        results.append(
            RecalibrationResult(**{**vars(result), "map_id": map_id})
        )
    return results


@dataclass(frozen=True)
class StoredMap:
    """A stratum's current stored map with what was recorded when it was fitted."""

    map_id: str
    method: str
    n_labels: int
    cv_score: float | None
    ece_before: float | None
    ece_after: float | None
    fitted_at: dt.datetime
    map: RecalibrationMap


def stored_map(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str
) -> StoredMap | None:
    """The current map of a stratum with its metadata, or None when it has none."""
    rows = con.execute(
        "SELECT map_id, method, n_labels, cv_score, ece_before, ece_after, fitted_at"
        " FROM current_recalibration_maps WHERE doc_type = ? AND field = ?",
        [doc_type, field],
    ).fetchall()
    fitted = current_map(con, doc_type, field)
    if not rows or fitted is None:
        return None
    map_id, method, n_labels, cv_score, before, after, fitted_at = rows[0]
    return StoredMap(str(map_id), str(method), int(n_labels), cv_score, before, after,
                     fitted_at, fitted)


def current_map(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str
) -> RecalibrationMap | None:
    """The stored current map of a stratum, or None when it has none."""
    rows = con.execute(
        "SELECT m.method, k.x, k.y FROM current_recalibration_maps m"
        " JOIN recalibration_knots k USING (map_id)"
        " WHERE m.doc_type = ? AND m.field = ? ORDER BY k.x",
        [doc_type, field],
    ).fetchall()
    if not rows:
        return None
    return RecalibrationMap(
        rows[0][0], np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    )
