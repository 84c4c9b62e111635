"""How much each label bets: growth-optimal bets for a week's cells, fixed before labelling.

The evidence of :mod:`fieldtrust.calibration.betting` is valid for any bets
chosen before their labels are seen; the bets decide only its power. A
week's cells get their bets when the week closes, from what is known then:
each cell's size ``N_h`` above the threshold, its planned inclusion
probability ``pi_h`` (sample size over cell size at drawing, never the
labelled prefix, which depends on how far reviewers went) and a prior error
rate ``p_h`` (the policy's ``prior_error``, or a band's rate from earlier
weeks). Nothing here may depend on a verdict of the week being bet on.

The rule maximises the expected growth of the stratified statistic under
the prior, in the with-replacement approximation. With bets ``c_h`` the
least favourable null puts ``eta_h = p_h / (1 - c_h (1 - p_h))`` errors per
item in cell ``h`` and balances the cells where the marginal cost
``pi_h c_h / (1 - c_h eta_h)`` is the same multiplier ``nu``; the
growth-optimal bets satisfy both, which makes ``c_h`` the smaller root of

    pi_h (1 - p_h) c^2 - (pi_h + nu) c + nu = 0,

with ``nu`` chosen so that ``sum_h N_h eta_h = max_error * sum_h N_h``. For a
single cell this is Kelly's bet against the null, ``c = (a - p) / (a (1 - p))``
(the likelihood ratio of the prior rate ``p`` against ``a``); across cells
the bets scale roughly like ``1 / pi_h``, so an error costs the evidence in
proportion to its design weight and the statistic behaves like a test on
the stratified (Horvitz-Thompson) estimate instead of on the cell with the
lowest inclusion probability.

References
----------
Kelly (1956), Bell System Technical Journal 35:917. Waudby-Smith & Ramdas
(2024), JRSS-B 86:1, section 5 (growth-rate bets). Horvitz & Thompson (1952),
JASA 47:663.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.betting import MAX_BET

from fieldtrust.errors import InputError

#: Largest bet the rules hand out: one error then keeps 10% of the evidence.
DEFAULT_MAX_BET = 0.9

#: Prior errors are scaled to this share of the allowance when the prior itself is a null.
_PRIOR_SHARE_WHEN_NULL = 0.6


def kelly_bet(max_error: float, prior_error: float) -> float:
    """Kelly's bet of one cell: ``(a - p) / (a (1 - p))``, 0 when ``p >= a``.

    With this bet the factor of a label is the likelihood ratio of an error
    rate ``p`` against ``a``: the sequential probability ratio test.
    """
    if not 0 < max_error < 1 or not 0 <= prior_error < 1:
        raise InputError(f"max_error {max_error!r} and prior_error {prior_error!r} must be rates")
    return max(0.0, (max_error - prior_error) / (max_error * (1.0 - prior_error)))


def _bets_at(nu: float | FloatArray, pi: FloatArray, q: FloatArray) -> FloatArray:
    """The smaller root of ``pi q c^2 - (pi + nu) c + nu = 0``, in a stable form."""
    b = pi + nu
    disc = np.maximum(b * b - 4.0 * pi * q * nu, 0.0)
    return np.asarray(2.0 * nu / (b + np.sqrt(disc)), dtype=np.float64)


def growth_bets(
    n_population: npt.ArrayLike,
    inclusion_prob: npt.ArrayLike,
    prior_error: npt.ArrayLike,
    *,
    max_error: float,
    max_bet: float = DEFAULT_MAX_BET,
) -> FloatArray:
    """Bets ``c_h`` of one week's cells that maximise the expected growth under the prior.

    Parameters
    ----------
    n_population
        ``N_h`` per cell (items above the threshold). A 2-d array holds one
        week's cells per row (many runs or thresholds at once).
    inclusion_prob
        The design's planned ``pi_h`` per cell (sample size / cell size at
        drawing), in ``[0, 1]``; cells planned without labels get bet 0.
    prior_error
        ``p_h`` per cell, or one rate for all (the policy's ``prior_error``).
    max_error
        The reference null ``a``: the policy's ``1 - target``. Never the
        level adjusted for reviewer misses or weekly variation, which moves
        with later evidence, so the bets stay fixed once the week closes.
    max_bet
        Cap on every bet (at most :data:`~fieldtrust.calibration.betting.MAX_BET`).

    References
    ----------
    Kelly (1956); Waudby-Smith & Ramdas (2024), JRSS-B 86:1.
    """
    size = np.asarray(n_population, dtype=float)
    flat = size.ndim < 2
    size = np.atleast_2d(size)
    pi = np.broadcast_to(np.asarray(inclusion_prob, dtype=float), size.shape)
    p = np.broadcast_to(np.asarray(prior_error, dtype=float), size.shape)
    if not 0 < max_error < 1:
        raise InputError(f"max_error {max_error!r} is not strictly between 0 and 1")
    if not 0 < max_bet <= MAX_BET:
        raise InputError(f"max_bet {max_bet!r} must lie in (0, {MAX_BET}]")
    if np.any(pi < 0) or np.any(pi > 1) or np.any((p < 0) | (p >= 1)):
        raise InputError("inclusion probabilities must lie in [0, 1] and prior errors in [0, 1)")
    active = (pi > 0) & (size > 0)
    weight = np.where(active, size, 0.0)
    p = np.maximum(p, 1e-6)
    allowed = max_error * weight.sum(axis=1, keepdims=True)
    expected = np.sum(weight * p, axis=1, keepdims=True)
    # A prior that itself says the stratum is below target: bet as if it were
    # comfortably above, so evidence can still build if the prior is wrong.
    scale = np.where(expected >= allowed,
                     _PRIOR_SHARE_WHEN_NULL * allowed / np.maximum(expected, 1e-300), 1.0)
    p = p * scale
    q = 1.0 - p
    safe_pi = np.where(active, pi, 1.0)
    lo = np.full((size.shape[0], 1), -40.0)
    hi = np.full((size.shape[0], 1), 40.0)
    for _ in range(100):  # the null mass grows with nu: bisect on log nu, every row at once
        mid = 0.5 * (lo + hi)
        c = _bets_at(np.exp(mid), safe_pi, q)
        excess = np.sum(weight * p / (1.0 - c * q), axis=1, keepdims=True) - allowed
        hi = np.where(excess > 0, mid, hi)
        lo = np.where(excess > 0, lo, mid)
        if float(np.max(hi - lo)) < 1e-10:
            break
    bets = np.where(active, np.minimum(_bets_at(np.exp(0.5 * (lo + hi)), safe_pi, q), max_bet),
                    0.0)
    return np.asarray(bets[0] if flat else bets, dtype=np.float64)


def scaled_bets(
    inclusion_prob: npt.ArrayLike,
    *,
    max_error: float,
    prior_error: float,
    max_bet: float = DEFAULT_MAX_BET,
) -> FloatArray:
    """Kelly's bet scaled by ``pi_ref / pi_h`` (``pi_ref`` the lowest planned probability).

    The simpler rule the growth-optimal one refines: the marginal cost of an
    error is the same in every cell. Kept for comparison in the benchmarks.
    """
    pi = np.asarray(inclusion_prob, dtype=float).reshape(-1)
    active = pi > 0
    out = np.zeros(pi.size)
    if active.any():
        scale = pi[active].min() / pi[active]
        out[active] = np.minimum(kelly_bet(max_error, prior_error) * scale, max_bet)
    return out
