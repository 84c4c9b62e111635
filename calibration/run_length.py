"""Run lengths of the weekly error CUSUM, and the alarm threshold for a stated false-alarm rate.

The monitoring chart (:mod:`fieldtrust.calibration.monitoring`) adds, each
week, the log likelihood ratio of the week's errors under the target's
error rate ``e1 = 1 - target`` against the approval's ``e0 = 1 - in_control``:
``x log(e1 / e0) + (n - x) log((1 - e1) / (1 - e0))`` for ``x`` errors in
``n`` labels, keeps the sum at or above 0 and alarms at the threshold ``h``
(Page 1954). This module gives the chart's run length, the weeks until its
first alarm, when every week's errors are binomial at a stated accuracy,
optionally with a weekly random effect:

* :func:`average_run_length`: the mean weeks to the first alarm from a
  statistic of 0 (ARL0 at the in-control accuracy, the mean detection delay
  at a worse one);
* :func:`alarm_probability`: the chance of an alarm by the end of a run of
  weeks of given accuracies (a step change, a slide);
* :func:`alarm_threshold`: the ``h`` whose ARL0 is the stated one (cached);
* :func:`weekly_labels_needed`: the labels a week that detect a given drop
  within so many weeks with a given probability.

Method: the Markov chain of Brook & Evans (1972) on an exact lattice. With
``n`` labels a week the chart's increment is ``per_error * x + per_label *
n``: an error moves it up by ``per_error``, a week down by a fixed amount.
Measured in steps of ``per_error / q`` an error is ``q`` steps and the week
``r`` steps, with ``q`` between :data:`LATTICE_MIN` and twice that chosen
so that ``r = round(q n |per_label| / per_error)`` misses the chart's ratio
by the least (it changes the weekly drift by a small fraction of one step).
The statistic then lives on the lattice exactly, its states are ``0 ..
H - 1`` (the alarm at ``H``), and the run lengths from every state solve
``(I - Q) L = 1``, ``Q`` the moves among the states. No rounding of the
statistic to states is needed (binning a discrete chart's values to a grid,
as for continuous data, made the run lengths swing by 3% between grids).
Checks (tests/calibration/test_run_length.py): the chain agrees with a
simulation of the real chart (exact weights, 20,000 runs) within its
Monte Carlo error, and :func:`lattice_run_lengths` on a normal CUSUM binned
to fine lattices (extrapolated to zero step) reproduces published run
lengths (Vance 1986, k = 0, h = 10: 124.66 in control, 20.37 at a
half-sigma shift, 10.75 at one sigma; Brook & Evans 1972, k = 0.5, h = 3:
117.59 in control, 3.75 at 1.5 sigma).

A weekly random effect (the weeks' true accuracies scattered around the
level: STATS.md section 15) enters as a logit-normal mixture of binomials,
integrated by Gauss-Hermite quadrature: ``between_week_sd`` is the standard
deviation of the weeks' accuracy in accuracy units (0.015 = 1.5 points),
and the weeks average the stated accuracy (:func:`week_effect`).

References
----------
Page (1954), "Continuous inspection schemes", Biometrika 41:100. Brook &
Evans (1972), "An approach to the probability distribution of CUSUM run
length", Biometrika 59:539. Lorden (1971), Annals of Mathematical Statistics
42:1897 (``ARL0 >= exp(h)``). Reynolds & Stoumbos (1999), "A CUSUM chart for
monitoring a proportion when inspecting continuously", Journal of Quality
Technology 31:87. Vance (1986), "Average run lengths of cumulative sum
control charts for controlling normal means", Journal of Quality Technology
18:189.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray
from scipy import optimize, stats
from scipy.special import expit, logit

from fieldtrust.errors import InputError

#: An error moves the lattice statistic between this many and twice this many steps.
LATTICE_MIN = 16
#: Gauss-Hermite nodes for the weekly random effect.
QUADRATURE_NODES = 41
#: Largest logit-scale spread :func:`week_effect` considers (4 spreads weeks over most of [0, 1]).
MAX_LOGIT_SPREAD = 4.0
#: Binomial outcomes less likely than this are left out of the chain's moves.
NEGLIGIBLE = 1e-13
#: Most labels a week :func:`weekly_labels_needed` tries before giving up.
MAX_WEEKLY_LABELS = 5_000


def check_levels(in_control: float, target: float) -> tuple[float, float]:
    """The in-control and target error rates, or an :class:`InputError`.

    The chart needs ``0 < target < in_control < 1``: it tells the approval's
    level from the target's, so the approval must be above the target.
    """
    for name, value in (("in_control", in_control), ("target", target)):
        if not 0.0 < value < 1.0:
            raise InputError(f"{name} {value!r} is not strictly between 0 and 1; "
                             "give an accuracy such as 0.97")
    if not in_control > target:
        raise InputError(
            f"in_control {in_control!r} must be above target {target!r}: the chart tells the"
            " approval's accuracy from the target's, and an approval below the target has"
            " nothing to monitor (it should not be automated)"
        )
    return 1.0 - float(in_control), 1.0 - float(target)


def llr_weights(in_control: float, target: float) -> tuple[float, float]:
    """``(per_error, per_label)``: a week's increment is ``per_error * x + per_label * n``.

    ``per_error = log(e1 / e0) - log((1 - e1) / (1 - e0))`` and
    ``per_label = log((1 - e1) / (1 - e0))`` (negative), with
    ``e0 = 1 - in_control`` and ``e1 = 1 - target``.
    """
    e0, e1 = check_levels(in_control, target)
    per_label = math.log((1 - e1) / (1 - e0))
    return math.log(e1 / e0) - per_label, per_label


def _gauss_hermite() -> tuple[FloatArray, FloatArray]:
    """Nodes and weights (summing to 1) for expectations over a standard normal."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
    return nodes, weights / weights.sum()


def check_spread(between_week_sd: float) -> float:
    """``between_week_sd`` as a float, or an :class:`InputError` outside [0, 0.2)."""
    if not 0.0 <= between_week_sd < 0.2:
        raise InputError(f"between_week_sd {between_week_sd!r} must be in [0, 0.2), in accuracy"
                         " units (0.015 is 1.5 points)")
    return float(between_week_sd)


@functools.lru_cache(maxsize=1024)
def week_effect(accuracy: float, between_week_sd: float) -> tuple[float, float]:
    """``(center, spread)`` of logit-normal weeks of mean ``accuracy``, sd ``between_week_sd``.

    A week's accuracy is ``expit(center + spread * u)``, ``u`` standard
    normal, with its mean and standard deviation (by Gauss-Hermite
    quadrature) equal to the two given: "a weekly random effect of 1.5
    points around 0.97" keeps 0.97 the average week.
    """
    if not 0.0 < accuracy < 1.0:
        raise InputError(f"accuracy {accuracy!r} is not strictly between 0 and 1")
    if between_week_sd == 0.0:
        return float(logit(accuracy)), 0.0
    nodes, weights = _gauss_hermite()

    def center(spread: float) -> float:
        return float(optimize.brentq(
            lambda c: float(expit(c + spread * nodes) @ weights) - accuracy,
            float(logit(accuracy)) - 10 - 10 * spread, float(logit(accuracy)) + 10 + 10 * spread,
            xtol=1e-12))

    def sd_gap(spread: float) -> float:
        weeks = expit(center(spread) + spread * nodes)
        return math.sqrt(max(float(weeks**2 @ weights) - accuracy**2, 0.0)) - between_week_sd

    if sd_gap(MAX_LOGIT_SPREAD) < 0:
        raise InputError(f"weeks averaging {accuracy!r} cannot spread by {between_week_sd!r}"
                         " in a logit-normal model; give a smaller between_week_sd")
    spread = float(optimize.brentq(sd_gap, 1e-9, MAX_LOGIT_SPREAD, xtol=1e-10))
    return center(spread), spread


def weekly_error_pmf(labels: int, accuracy: float, *, between_week_sd: float = 0.0) -> FloatArray:
    """Probabilities of 0 .. ``labels`` errors in a week at ``accuracy``.

    Binomial; with ``between_week_sd`` > 0, a mixture of binomials over the
    logit-normal weeks of :func:`week_effect` (mean ``accuracy``, standard
    deviation ``between_week_sd``).
    """
    if labels < 1:
        raise InputError(f"labels per week must be at least 1, got {labels}")
    if not 0.0 < accuracy < 1.0:
        raise InputError(f"accuracy {accuracy!r} is not strictly between 0 and 1")
    errors = np.arange(labels + 1)
    center, spread = week_effect(float(accuracy), check_spread(between_week_sd))
    if spread == 0.0:
        return np.asarray(stats.binom.pmf(errors, labels, 1 - accuracy), dtype=np.float64)
    nodes, weights = _gauss_hermite()
    week_error = 1 - expit(center + spread * nodes)
    pmf = stats.binom.pmf(errors[:, None], labels, week_error[None, :]) @ weights
    return np.asarray(pmf / pmf.sum(), dtype=np.float64)


def _lattice(labels: int, accuracy: float, in_control: float, target: float,
             between_week_sd: float) -> tuple[float, IntArray, FloatArray]:
    """The chart on a lattice: its step, the week's moves in steps and their probabilities.

    An error moves the statistic ``q`` steps up and a week ``r`` steps down,
    ``q`` in ``[LATTICE_MIN, 2 LATTICE_MIN)`` chosen so that ``r / q`` is
    closest to the chart's ratio ``-n per_label / per_error``.
    """
    per_error, per_label = llr_weights(in_control, target)
    ratio = -per_label * labels / per_error
    steps = np.arange(LATTICE_MIN, 2 * LATTICE_MIN)
    q = int(steps[np.argmin(np.abs(ratio * steps - np.round(ratio * steps)))])
    r = round(ratio * q)
    pmf = weekly_error_pmf(labels, accuracy, between_week_sd=between_week_sd)
    keep = pmf > NEGLIGIBLE
    return per_error / q, q * np.arange(labels + 1)[keep] - r, pmf[keep]


def _moves(states: int, offsets: IntArray, probs: FloatArray) -> FloatArray:
    """``Q``: the moves among states ``0 .. states - 1`` (the statistic floored at 0)."""
    column = np.maximum(np.arange(states)[:, None] + offsets[None, :], 0)
    inside = column < states
    moves = np.zeros((states, states))
    rows = np.broadcast_to(np.arange(states)[:, None], column.shape)
    np.add.at(moves, (rows[inside], column[inside]),
              np.broadcast_to(probs[None, :], column.shape)[inside])
    return moves


def lattice_run_lengths(states: int, offsets: npt.ArrayLike, probs: npt.ArrayLike) -> FloatArray:
    """Mean run lengths of a CUSUM on a lattice, from each of its ``states`` states.

    The statistic lives on ``0, 1, ..., states - 1``; each step it moves by
    ``offsets[k]`` with probability ``probs[k]`` (floored at 0) and alarms
    at ``states`` or above. The run lengths ``L`` solve ``(I - Q) L = 1``
    (Brook & Evans 1972). A chart with continuous increments enters with
    its increment's distribution binned to the lattice (their method).
    """
    if states < 1:
        raise InputError(f"states must be at least 1, got {states}")
    moves = _moves(states, np.asarray(offsets, dtype=np.int64),
                   np.asarray(probs, dtype=np.float64))
    return np.asarray(np.linalg.solve(np.eye(states) - moves, np.ones(states)))


def _states(threshold: float, step: float) -> int:
    """Lattice states below ``threshold`` (the alarm comes at the first step at or above it)."""
    return max(1, math.ceil(threshold / step - 1e-9))


def _checked(threshold: float, labels_per_week: int) -> None:
    if not threshold > 0:
        raise InputError(f"threshold {threshold!r} must be above 0")
    if labels_per_week < 1:
        raise InputError(f"labels_per_week must be at least 1, got {labels_per_week}")


def average_run_length(
    threshold: float,
    *,
    in_control: float,
    target: float,
    labels_per_week: int,
    accuracy: float | None = None,
    between_week_sd: float = 0.0,
) -> float:
    """Mean weeks until the chart's first alarm, from a statistic of 0.

    Parameters
    ----------
    threshold
        The alarm threshold ``h`` on the log likelihood ratio.
    in_control, target
        The approval's accuracy and the target accuracy (the chart's two levels).
    labels_per_week
        Labels above the threshold each week (the chart assumes the same every week).
    accuracy
        The true accuracy of every week (default ``in_control``: ARL0).
        At a worse accuracy the result is the mean detection delay of a step
        change at a week where the statistic is 0, the slowest start.
    between_week_sd
        Spread of the weeks' true accuracy around ``accuracy`` (accuracy
        units, e.g. 0.015), as a logit-normal random effect.

    Returns
    -------
    float
        Expected run length in weeks, counting the alarm week.

    References
    ----------
    Brook & Evans (1972), Biometrika 59:539.
    """
    _checked(threshold, labels_per_week)
    level = in_control if accuracy is None else accuracy
    return _arl(float(threshold), float(in_control), float(target), int(labels_per_week),
                float(level), float(between_week_sd))


@functools.lru_cache(maxsize=1024)
def _arl(threshold: float, in_control: float, target: float, labels_per_week: int,
         accuracy: float, between_week_sd: float) -> float:
    step, offsets, probs = _lattice(labels_per_week, accuracy, in_control, target,
                                    between_week_sd)
    return float(lattice_run_lengths(_states(threshold, step), offsets, probs)[0])


def alarm_probability(
    threshold: float,
    *,
    in_control: float,
    target: float,
    labels_per_week: int,
    accuracies: Sequence[float],
    between_week_sd: float = 0.0,
) -> float:
    """Chance the chart alarms by the end of ``accuracies``, week ``i`` at ``accuracies[i]``.

    From a statistic of 0: ``1 - e_0' Q_1 ... Q_W 1`` on the chart's
    lattice, ``Q_i`` the moves at week ``i``'s accuracy. A step change to
    ``a`` caught within four weeks is ``accuracies=[a] * 4``; started at 0,
    the slowest start, it is a lower bound on the detection rate.
    """
    _checked(threshold, labels_per_week)
    if len(accuracies) < 1:
        raise InputError("accuracies must hold at least one week")
    alive = np.zeros(1)
    for week, accuracy in enumerate(accuracies):
        step, offsets, probs = _lattice(labels_per_week, accuracy, in_control, target,
                                        between_week_sd)
        states = _states(threshold, step)
        if week == 0:
            alive = np.zeros(states)
            alive[0] = 1.0
        alive = alive @ _moves(states, offsets, probs)
    return float(np.clip(1.0 - alive.sum(), 0.0, 1.0))


@functools.lru_cache(maxsize=256)
def _threshold(arl0: float, in_control: float, target: float, labels_per_week: int,
               between_week_sd: float) -> float:
    step, offsets, probs = _lattice(labels_per_week, in_control, in_control, target,
                                    between_week_sd)

    def long_enough(states: int) -> bool:
        return bool(lattice_run_lengths(states, offsets, probs)[0] >= arl0)

    # The run length grows with the states: bisect on them. Lorden's bound
    # (ARL0 >= exp(h)) puts the answer at or below log(arl0) without a random
    # effect; with one it can lie above, so the top doubles until it is enough.
    low, high = 0, _states(math.log(arl0), step)
    while not long_enough(high):
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if long_enough(middle) else (middle, high)
    # Half a step below the lattice level: the chart's real statistic sits
    # within a hair of lattice values, and a threshold on one of them would
    # turn those hairs into missed or extra alarms.
    return (high - 0.5) * step


def alarm_threshold(
    arl0: float,
    *,
    in_control: float,
    target: float,
    labels_per_week: int,
    between_week_sd: float = 0.0,
) -> float:
    """The threshold ``h`` whose in-control average run length is ``arl0`` weeks.

    The lowest lattice level whose run length at ``in_control`` is at least
    ``arl0`` (:func:`average_run_length`); cached, since the integration asks
    for the same few designs every week.

    Parameters
    ----------
    arl0
        Weeks between false alarms at the in-control accuracy (at least 2).
    in_control, target, labels_per_week, between_week_sd
        As :func:`average_run_length`.

    Returns
    -------
    float
        The threshold on the log likelihood ratio. At most about
        ``log(arl0)`` without a random effect: Lorden's bound ``ARL0 >=
        exp(h)`` holds for any weekly sizes and any accuracy at or above
        ``in_control``, so ``exp(h)`` is the false-alarm spacing guaranteed
        whatever the weeks hold. Higher with a random effect.

    References
    ----------
    Brook & Evans (1972); Lorden (1971).
    """
    if not arl0 >= 2:
        raise InputError(f"arl0 must be at least 2 weeks, got {arl0!r}; use e.g. 200")
    check_levels(in_control, target)
    if labels_per_week < 1:
        raise InputError(f"labels_per_week must be at least 1, got {labels_per_week}")
    check_spread(between_week_sd)
    return _threshold(float(arl0), float(in_control), float(target), int(labels_per_week),
                      float(between_week_sd))


def weekly_labels_needed(
    *,
    in_control: float,
    target: float,
    drop_to: float,
    within_weeks: int,
    power: float = 0.9,
    arl0: float = 200.0,
    between_week_sd: float = 0.0,
) -> int | None:
    """Labels a week above the threshold that catch a step drop in time.

    The smallest weekly label count whose chart, set for ``arl0`` weeks
    between false alarms, alarms within ``within_weeks`` weeks of a step to
    ``drop_to`` accuracy with probability at least ``power``
    (:func:`alarm_probability`, from a statistic of 0). ``None`` above
    :data:`MAX_WEEKLY_LABELS`. The planner's answer to a team with fewer
    labels: audit more of this segment, or accept a longer delay.
    """
    if not 0.0 < power < 1.0:
        raise InputError(f"power {power!r} is not strictly between 0 and 1")

    def caught(labels: int) -> bool:
        h = alarm_threshold(arl0, in_control=in_control, target=target,
                            labels_per_week=labels, between_week_sd=between_week_sd)
        return alarm_probability(h, in_control=in_control, target=target,
                                 labels_per_week=labels, accuracies=[drop_to] * within_weeks,
                                 between_week_sd=between_week_sd) >= power

    low, high = 1, 8
    while not caught(high):
        low, high = high, high * 2
        if high > MAX_WEEKLY_LABELS:
            return None
    while high - low > 1:  # the detection rate grows with the labels (not strictly: search to 1)
        middle = (low + high) // 2
        low, high = (low, middle) if caught(middle) else (middle, high)
    return high
