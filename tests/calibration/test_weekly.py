"""Week-to-week variation and evidence blocks (STATS.md sections 15 and 17)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration.betting import CellLabels
from fieldtrust.calibration.survey import stratified_proportion
from fieldtrust.calibration.weekly import (
    Block,
    WeekEvidence,
    WeekRate,
    below_target_evidence,
    between_week_allowance,
    enough_evidence,
    evidence_blocks,
    week_rate,
)

# metafor's dat.bcg (Colditz et al. 1994): BCG vaccine trials, counts tpos, tneg, cpos, cneg.
BCG = np.array([
    [4, 119, 11, 128], [6, 300, 29, 274], [3, 228, 11, 209], [62, 13536, 248, 12619],
    [33, 5036, 47, 5761], [180, 1361, 372, 1079], [8, 2537, 10, 619], [505, 87886, 499, 87892],
    [29, 7470, 45, 7232], [17, 1699, 65, 1600], [186, 50448, 141, 27197], [5, 2493, 3, 2338],
    [27, 16886, 29, 17825]], dtype=float)


def test_dersimonian_laird_matches_metafors_published_bcg_example() -> None:
    """Viechtbauer (2010), J. Stat. Software 36(3): rma(method="DL"): tau^2 0.3088, Q 152.23."""
    a, b, c, d = BCG.T
    log_rr = np.log((a / (a + b)) / (c / (c + d)))
    variance = 1 / a - 1 / (a + b) + 1 / c - 1 / (c + d)
    result = between_week_allowance([WeekRate(y, v, 1, 1) for y, v in zip(log_rr, variance,
                                                                          strict=True)],
                                    prior_weeks=0)
    assert result.tau2 == pytest.approx(0.3088, abs=5e-5)
    assert result.q_statistic == pytest.approx(152.2330, abs=5e-4)


def test_the_allowance_is_the_prediction_half_width_of_a_coming_block() -> None:
    rates = [WeekRate(e, 0.0001, 1000, 100) for e in (0.02, 0.05, 0.03, 0.06, 0.04, 0.01)]
    result = between_week_allowance(rates, block_weeks=4, confidence=0.95)
    from scipy.stats import t
    assert result.tau2_used == pytest.approx((5 * result.tau2 + 2 * 0.01**2) / 7)
    assert result.allowance == pytest.approx(
        t.ppf(0.95, 5) * math.sqrt(result.tau2_used) * math.sqrt(1 / 4 + 1 / 6))
    # Weeks that differ only by their sampling noise allow only the prior's share.
    same = between_week_allowance([WeekRate(0.03, 0.01, 1000, 100)] * 5, prior_weeks=0)
    assert same.tau2 == 0 and same.allowance == 0
    many = between_week_allowance([WeekRate(0.03, 0.01, 1000, 100)] * 50)
    few = between_week_allowance([WeekRate(0.03, 0.01, 1000, 100)] * 5)
    assert many.allowance < few.allowance / 3
    # One week says nothing about the next: no certificate can lean on it.
    assert between_week_allowance(rates[:1]).allowance == math.inf


def test_week_rate_is_the_stratified_estimate() -> None:
    rng = np.random.default_rng(2)
    sizes, labels = [3000, 1200, 400], [60, 40, 40]
    cells = [CellLabels(n, (rng.random(k) < 0.05).astype(float), 0.5)
             for n, k in zip(sizes, labels, strict=True)]
    rate = week_rate(cells)
    reference = stratified_proportion(sizes, labels, [k - c.n_errors for k, c in
                                                      zip(labels, cells, strict=True)])
    assert rate.estimate == pytest.approx(1 - reference.estimate, abs=1e-12)
    assert rate.variance > 0 and rate.n_labels == 140


def _week(name: str, size: int, labels: int, errors: int = 0) -> WeekEvidence:
    x = np.r_[np.ones(errors), np.zeros(labels - errors)]
    return WeekEvidence(name, (CellLabels(size, x, 0.5),))


def test_small_weeks_pool_and_a_small_census_stands_alone() -> None:
    weeks = [_week("W1", 400, 30), _week("W2", 40, 40), _week("W3", 400, 25),
             _week("W4", 400, 30)]
    blocks = evidence_blocks(weeks, min_week_labels=50, stability_weeks=4)
    assert [b.weeks for b in blocks] == [("W4", "W3"), ("W2",), ("W1",)]
    assert [b.complete for b in blocks] == [True, True, False]
    assert not enough_evidence(blocks, stability_weeks=4)
    assert enough_evidence(blocks, stability_weeks=3)


def test_a_young_store_lacks_evidence_however_good_its_weeks() -> None:
    weeks = [_week("W1", 4000, 200), _week("W2", 4000, 200)]
    blocks = evidence_blocks(weeks, min_week_labels=50, stability_weeks=4)
    assert len(blocks) == 2 and all(b.complete for b in blocks)
    assert not enough_evidence(blocks, stability_weeks=4)


def test_a_bad_block_is_flagged_and_a_good_one_is_not() -> None:
    rng = np.random.default_rng(9)
    flagged_bad = flagged_good = 0
    for _ in range(200):
        bad = Block(("W",), (CellLabels(2000, (rng.random(80) < 0.15).astype(float), 0.0),), True)
        good = Block(("W",), (CellLabels(2000, (rng.random(80) < 0.03).astype(float), 0.0),),
                     True)
        flagged_bad += below_target_evidence(bad, target=0.95).log_evalue >= math.log(20)
        flagged_good += below_target_evidence(good, target=0.95).log_evalue >= math.log(20)
    print(f"\nblock test: a block at 85% flagged in {flagged_bad / 200:.2f}, one at 97% in"
          f" {flagged_good / 200:.3f} (80 labels)")
    assert flagged_bad / 200 >= 0.6
    assert flagged_good / 200 <= 0.02
