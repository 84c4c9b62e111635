"""The certificate's walk, allowances and labels needed (STATS.md sections 6, 13-17)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration.bets import growth_bets, kelly_bet
from fieldtrust.calibration.betting import CellLabels
from fieldtrust.calibration.certificate import (
    Allowances,
    ThresholdCells,
    evidence_growth,
    expected_wrong,
    familywise_delta,
    labels_needed,
    threshold_walk,
    walk_start,
)
from fieldtrust.calibration.seeds import miss_allowance

from fieldtrust.errors import InputError


def _candidate(threshold: float, size: int, labels: int, errors: int, bet: float = 0.41,
               unaccounted: float = 0.0) -> ThresholdCells:
    x = np.zeros(labels)
    x[np.linspace(0, labels - 1, errors).astype(int)] = 1  # errors spread over the prefix
    return ThresholdCells(threshold, (CellLabels(size, x, bet),), unaccounted)


def test_the_walk_stops_at_the_first_failure_and_starts_where_told() -> None:
    candidates = [_candidate(0.99, 5000, 1500, 20), _candidate(0.98, 6000, 1800, 30),
                  _candidate(0.97, 7000, 2000, 150), _candidate(0.96, 8000, 2300, 30)]
    allowances = Allowances(0.95, 0.05)
    result = threshold_walk(candidates, allowances=allowances)
    assert result.certified == 0.98 and result.first_failure == 0.97
    assert [s.certified for s in result.steps] == [True, True, False]
    # Started below the failure, the walk goes on to the lowest candidate.
    assert threshold_walk(candidates, allowances=allowances, start=3).certified == 0.96


def test_allowances_lower_the_level_and_can_refuse() -> None:
    plain = Allowances(0.95, 0.05)
    assert plain.max_error == pytest.approx(0.05) and plain.log_threshold == pytest.approx(
        math.log(20))
    weekly = Allowances(0.95, 0.05, between_week=0.01)
    assert weekly.max_error == pytest.approx(0.04)
    miss = miss_allowance(0.05, seeds=300, misses=30, delta=0.05, seed_share=0.2)
    both = Allowances(0.95, 0.05, between_week=0.01, miss=miss)
    assert both.max_error == pytest.approx(0.04 * (1 - miss.miss_upper))
    assert both.delta_labels == pytest.approx(0.04)
    unseeded = Allowances(0.95, 0.05, miss=miss_allowance(0.05, seeds=3, misses=0, delta=0.05))
    assert unseeded.refused is not None
    assert threshold_walk([_candidate(0.9, 5000, 4000, 0)], allowances=unseeded).certified is None
    assert Allowances(0.95, 0.05, between_week=0.06).refused is not None


def test_walk_start_counts_planned_labels_only() -> None:
    growth = evidence_growth(0.05, 0.03)
    needed = math.log(20) / growth  # about 613 labels at a 3% prior
    assert 600 < needed < 630
    assert walk_start([100, 400, 620, 900], prior_error=0.03) == 2
    assert walk_start([10, 20], prior_error=0.03) == 1  # none enough: the lowest


def test_labels_needed_certifies_when_supplied_and_never_exceeds_the_unlabelled() -> None:
    rng = np.random.default_rng(3)
    size, rate = np.array([3000, 2000, 500]), 0.02
    pi = np.array([0.05, 0.05, 0.2])
    bets = growth_bets(size, pi, 0.03, max_error=0.05)
    population = [(rng.random(n) < rate).astype(float) for n in size]
    labelled = [20, 20, 20]
    cells = tuple(CellLabels(int(n), pop[:k], c) for n, pop, k, c in
                  zip(size, population, labelled, bets, strict=True))
    allowances = Allowances(0.95, 0.05)
    need = labels_needed(ThresholdCells(0.9, cells), allowances=allowances, prior_error=0.03,
                         planned=pi * size)
    assert need.total is not None and need.total == sum(need.per_cell)
    assert all(k <= n - m for k, n, m in zip(need.per_cell, size, labelled, strict=True))
    # Label the next PRN items as asked: the evidence is then near the bar (a planning figure).
    more = tuple(CellLabels(int(n), pop[: m + k], c) for n, pop, m, k, c in
                 zip(size, population, labelled, need.per_cell, bets, strict=True))
    reached = ThresholdCells(0.9, more).evidence(0.05).log_evalue
    assert reached > math.log(20) - 2.5


def test_labels_needed_says_when_no_volume_would_do() -> None:
    allowances = Allowances(0.95, 0.05)
    too_bad = labels_needed(_candidate(0.9, 1000, 200, 14), allowances=allowances,
                            prior_error=0.03)
    assert too_bad.total is None and "cannot certify at this volume" in (too_bad.reason or "")
    uncovered = labels_needed(_candidate(0.9, 1000, 200, 0, unaccounted=100),
                              allowances=allowances, prior_error=0.03)
    assert uncovered.total is None and "no audit accounts for" in (uncovered.reason or "")
    weekly = labels_needed(_candidate(0.9, 1000, 200, 6), prior_error=0.03,
                           allowances=Allowances(0.95, 0.05, between_week=0.025))
    assert weekly.total is None and "week-to-week" in (weekly.reason or "")
    # A small population whose every item can be labelled: the census certifies.
    small = labels_needed(_candidate(0.9, 120, 10, 0, bet=kelly_bet(0.05, 0.03)),
                          allowances=allowances, prior_error=0.03)
    assert small.total is not None and small.total <= 110


def test_across_strata() -> None:
    assert familywise_delta(0.05, 10) == pytest.approx(0.005)
    assert expected_wrong([0.05] * 12) == pytest.approx(0.6)
    with pytest.raises(InputError, match="n_strata"):
        familywise_delta(0.05, 0)
