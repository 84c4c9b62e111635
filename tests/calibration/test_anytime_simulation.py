"""The store-facing anytime certificate, by simulation: reviewers label on, a manager looks weekly.

The worlds are :class:`~fieldtrust.calibration.closed.ClosedCells` as the
store read builds them (three closed weeks, three bands above 0.9 each, the
labelled prefix in PRN order growing look by look), so the walk, its start,
the allowances and the unaccounted mass are the ones ``candidates`` runs.
A certificate is wrong when the closed weeks' true accuracy above its
threshold is below the target. Allowed: delta plus three Monte Carlo errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration.anytime import anytime_certificate
from fieldtrust.calibration.closed import ClosedCells
from fieldtrust.calibration.design import N_GRID
from fieldtrust.calibration.population import AuditCell
from fieldtrust.store.bar import Bar

WEEKS = ("2026-W45", "2026-W46", "2026-W47")
BANDS = ((180, 190), (190, 198), (198, 201))  # [.90,.95), [.95,.99), [.99,1]
BAR = Bar(certificate="anytime", stability_weeks=3)
PER_WEEK = 400  # items above 0.9 in a week


def _world(rng: np.random.Generator, accuracy: float, late: int):
    """Items of each week with a grid index, an error, a PRN rank; ``late`` rows after the draw."""
    weeks = []
    for _ in WEEKS:
        k = rng.integers(180, 201, PER_WEEK)
        error = (rng.random(PER_WEEK) >= accuracy).astype(float)
        weeks.append((k, error, rng.permutation(PER_WEEK)))
    extra = rng.integers(180, 201, late)
    return weeks, extra


def _closed(weeks, extra, share: float) -> ClosedCells:
    """The closed weeks with the first ``share`` of every cell labelled, in PRN order."""
    cells, hists, label_cell, label_k, label_rank, label_error = [], [], [], [], [], []
    week_hist = np.zeros((len(WEEKS), N_GRID), dtype=np.int64)
    for w, (k, error, order) in enumerate(weeks):
        np.add.at(week_hist[w], k, 1)
        for lo, hi in BANDS:
            members = order[(k[order] >= lo) & (k[order] < hi)]  # this band, in PRN order
            hist = np.bincount(k[members], minlength=N_GRID).astype(np.int64)
            n_lab = math.ceil(share * members.size)
            h = len(cells)
            cells.append(AuditCell(WEEKS[w], f"c{w}-{lo}", f"[{lo / 200:.3f},{hi / 200:.3f})",
                                   1.0, int(members.size), f"{WEEKS[w]}/v1", 0.5))
            hists.append(hist)
            label_cell += [h] * n_lab
            label_k += k[members[:n_lab]].tolist()
            label_rank += list(range(1, n_lab + 1))
            label_error += error[members[:n_lab]].tolist()
    np.add.at(week_hist[-1], extra, 1)  # rows of the last week that arrived after its draw
    return ClosedCells(
        weeks=WEEKS, open_weeks=(), unaudited_weeks=(), week_hist=week_hist, cells=tuple(cells),
        cell_week=np.repeat(np.arange(len(WEEKS)), len(BANDS)),
        cell_hist=np.vstack(hists), label_cell=np.array(label_cell, dtype=np.int64),
        label_k=np.array(label_k, dtype=np.int64), label_rank=np.array(label_rank),
        label_error=np.array(label_error), dropped=(), n_unclear=0)


def _true_accuracy_above(weeks, k: int) -> float:
    errors = sum(float(e[kk >= k].sum()) for kk, e, _ in weeks)
    items = sum(int((kk >= k).sum()) for kk, _, _ in weeks)
    return 1.0 - errors / items


def _wrong_rate(accuracy: float, reps: int, seed: int) -> tuple[float, float]:
    """Share of runs ever certified wrongly over looks at 10%, 20%, ... 80% labelled."""
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(reps):
        weeks, extra = _world(rng, accuracy, late=int(rng.integers(0, 10)))
        for share in np.arange(0.1, 0.81, 0.1):
            cert = anytime_certificate(_closed(weeks, extra, share), BAR, delta=0.05)
            threshold = cert.thresholds.certified
            if threshold is not None:
                k = round(threshold.threshold * 200)
                if _true_accuracy_above(weeks, k) < BAR.target:
                    wrong += 1
                    break
    rate = wrong / reps
    return rate, math.sqrt(0.05 * 0.95 / reps)


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.parametrize("accuracy", [0.95, 0.94])
def test_weekly_looks_as_labels_grow_certify_wrongly_at_most_delta(accuracy: float) -> None:
    rate, mc_error = _wrong_rate(accuracy, reps=100, seed=int(accuracy * 1000))
    print(f"true accuracy {accuracy}: wrong over 8 looks {rate:.3f} (MC error {mc_error:.3f})")
    assert rate <= 0.05 + 3 * mc_error


def test_a_good_stratum_certifies_before_everything_is_labelled() -> None:
    rng = np.random.default_rng(3)
    weeks, extra = _world(rng, 0.99, late=0)
    cert = anytime_certificate(_closed(weeks, extra, 0.5), BAR, delta=0.05)
    assert cert.thresholds.certified is not None
    assert cert.thresholds.certified.threshold == pytest.approx(0.9)
    # Rows that arrived after the draw are errors above every threshold they could sit at.
    late = anytime_certificate(_closed(weeks, np.full(60, 199), 0.5), BAR, delta=0.05)
    assert late.steps[0].log_evalue < cert.steps[0].log_evalue
