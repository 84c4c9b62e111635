"""Run lengths of the monitoring CUSUM: the Markov chain against tables and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration import run_length as rl
from fieldtrust.calibration.monitoring import cusum_path, first_alarm
from scipy import stats
from scipy.special import expit

from fieldtrust.errors import InputError

IN_CONTROL = 0.97
TARGET = 0.95


def normal_cusum_arl(k: float, h: float, shift: float, states: int) -> float:
    """One-sided normal CUSUM, N(shift, 1) data, increment binned to a lattice of step h/states."""
    step = h / states
    offsets = np.arange(-math.ceil(12 / step), math.ceil(12 / step) + 1)
    probs = (stats.norm.cdf((offsets + 0.5) * step, shift - k)
             - stats.norm.cdf((offsets - 0.5) * step, shift - k))
    keep = probs > 1e-15
    return float(rl.lattice_run_lengths(states, offsets[keep], probs[keep])[0])


@pytest.mark.parametrize(
    ("k", "h", "shift", "published"),
    [
        # Vance (1986), table 1 (Nystrom method): k = 0, h = 10.
        (0.0, 10.0, 0.0, 124.66),
        (0.0, 10.0, 0.5, 20.37),
        (0.0, 10.0, 1.0, 10.75),
        # Brook & Evans (1972), section 4.3: k = 0.5, h = 3.
        (0.5, 3.0, 0.0, 117.59),
        (0.5, 3.0, 1.5, 3.75),
    ],
)
def test_the_chain_reproduces_published_normal_cusum_run_lengths(
    k: float, h: float, shift: float, published: float
) -> None:
    # Binning puts the alarm half a step early, an O(step) bias: extrapolate.
    coarse, fine = (normal_cusum_arl(k, h, shift, m) for m in (500, 1000))
    assert 2 * fine - coarse == pytest.approx(published, rel=1e-3)


def simulated_run_lengths(
    threshold: float, labels: int, accuracy: float, runs: int, seed: int,
    between_week_sd: float = 0.0, horizon: int = 6000,
) -> np.ndarray:
    """Weeks to the first alarm of the real chart (exact weights), ``runs`` charts at once."""
    rng = np.random.default_rng(seed)
    center, spread = rl.week_effect(accuracy, between_week_sd)
    per_error, per_label = rl.llr_weights(IN_CONTROL, TARGET)
    level, length = np.zeros(runs), np.full(runs, horizon)
    alive = np.ones(runs, dtype=bool)
    for week in range(1, horizon + 1):
        week_accuracy = expit(center + spread * rng.standard_normal(runs))
        errors = rng.binomial(labels, 1 - week_accuracy)
        level = np.maximum(0.0, level + per_error * errors + per_label * labels)
        hit = alive & (level >= threshold)
        length[hit] = week
        alive &= ~hit
        if not alive.any():
            break
    return length


@pytest.mark.slow
@pytest.mark.parametrize(
    ("labels", "accuracy", "between_week_sd"),
    [(60, 0.97, 0.0), (120, 0.97, 0.0), (120, 0.95, 0.0), (120, 0.97, 0.015)],
)
def test_average_run_length_matches_a_simulation_of_the_chart(
    labels: int, accuracy: float, between_week_sd: float
) -> None:
    h = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET, labels_per_week=labels,
                           between_week_sd=between_week_sd)
    chain = rl.average_run_length(h, in_control=IN_CONTROL, target=TARGET,
                                  labels_per_week=labels, accuracy=accuracy,
                                  between_week_sd=between_week_sd)
    lengths = simulated_run_lengths(h, labels, accuracy, 20_000, seed=labels,
                                    between_week_sd=between_week_sd)
    error = lengths.std() / math.sqrt(lengths.size)
    assert abs(lengths.mean() - chain) < 4 * error, (lengths.mean(), chain, error)


@pytest.mark.parametrize("labels", [30, 60, 120, 240])
def test_the_threshold_is_the_lowest_lattice_level_with_the_stated_arl0(labels: int) -> None:
    h = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET, labels_per_week=labels)
    step = rl._lattice(labels, IN_CONTROL, IN_CONTROL, TARGET, 0.0)[0]
    at = rl.average_run_length(h, in_control=IN_CONTROL, target=TARGET, labels_per_week=labels)
    below = rl.average_run_length(h - step, in_control=IN_CONTROL, target=TARGET,
                                  labels_per_week=labels)
    assert below < 200 <= at
    # Lorden: ARL0 >= exp(h), so the exact threshold is below log(ARL0).
    assert math.exp(h) < 200


def test_a_random_effect_needs_a_higher_threshold() -> None:
    plain = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET, labels_per_week=120)
    spread = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET, labels_per_week=120,
                                between_week_sd=0.015)
    assert spread > math.log(200) > plain
    # Without allowing for it, the 1.5-point weekly effect brings false alarms five times sooner.
    assert rl.average_run_length(plain, in_control=IN_CONTROL, target=TARGET,
                                 labels_per_week=120, between_week_sd=0.015) < 40


def test_alarm_probability_matches_a_simulation_of_a_slide() -> None:
    labels, runs = 90, 20_000
    h = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET, labels_per_week=labels)
    accuracies = IN_CONTROL - 0.006 * np.arange(8)
    chain = rl.alarm_probability(h, in_control=IN_CONTROL, target=TARGET,
                                 labels_per_week=labels, accuracies=list(accuracies))
    rng = np.random.default_rng(11)
    errors = rng.binomial(labels, 1 - np.broadcast_to(accuracies, (runs, 8)))
    path = cusum_path(errors, labels, in_control=IN_CONTROL, target=TARGET)
    simulated = float(np.mean(first_alarm(path, h) >= 0))
    assert abs(simulated - chain) < 4 * math.sqrt(chain * (1 - chain) / runs)


def test_weekly_labels_needed_is_the_smallest_count_that_detects_in_time() -> None:
    needed = rl.weekly_labels_needed(in_control=IN_CONTROL, target=TARGET, drop_to=0.93,
                                     within_weeks=4, power=0.9, arl0=200)
    assert needed is not None

    def power(labels: int) -> float:
        h = rl.alarm_threshold(200, in_control=IN_CONTROL, target=TARGET,
                               labels_per_week=labels)
        return rl.alarm_probability(h, in_control=IN_CONTROL, target=TARGET,
                                    labels_per_week=labels, accuracies=[0.93] * 4)

    assert power(needed) >= 0.9 > power(needed - 1)
    assert 60 < needed < 120  # the two weekly sizes the simulations use straddle it


def test_the_random_effect_keeps_the_mean_week_and_spreads_it_as_stated() -> None:
    center, spread = rl.week_effect(0.97, 0.015)
    weeks = expit(center + spread * np.random.default_rng(0).standard_normal(400_000))
    assert weeks.mean() == pytest.approx(0.97, abs=1e-4)
    assert weeks.std() == pytest.approx(0.015, abs=1e-4)
    # The error count's variance: binomial plus n^2 times the weeks' variance (total variance).
    x = np.arange(121)
    pmf = rl.weekly_error_pmf(120, 0.97, between_week_sd=0.015)
    assert pmf.sum() == pytest.approx(1)
    assert x @ pmf == pytest.approx(3.6, abs=1e-6)
    binomial = 120 * (0.97 * 0.03 - 0.015**2)
    assert x**2 @ pmf - 3.6**2 == pytest.approx(binomial + 120**2 * 0.015**2, rel=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"in_control": 0.95, "target": 0.95}, "in_control 0.95 must be above target"),
        ({"in_control": 1.0, "target": 0.95}, "in_control 1.0 is not strictly between"),
        ({"in_control": 0.97, "target": 0.95, "labels_per_week": 0}, "labels_per_week must"),
        ({"in_control": 0.97, "target": 0.95, "between_week_sd": 0.6}, "between_week_sd 0.6"),
        ({"in_control": 0.99, "target": 0.95, "between_week_sd": 0.15}, "cannot spread by 0.15"),
    ],
)
def test_bad_designs_are_refused_with_what_to_do(kwargs: dict[str, float], message: str) -> None:
    design = {"labels_per_week": 60, **kwargs}
    with pytest.raises(InputError, match=message):
        rl.alarm_threshold(200, **design)  # type: ignore[arg-type]


def test_arl0_below_two_weeks_is_refused() -> None:
    with pytest.raises(InputError, match="arl0 must be at least 2 weeks, got 1"):
        rl.alarm_threshold(1, in_control=0.97, target=0.95, labels_per_week=60)
