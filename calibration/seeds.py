"""Reviewer misses measured with seeded known-answer items, and carried into the certificate.

A miss is a wrong value a reviewer judges correct. With a miss rate ``m``
the observed error rate is at least ``(1 - m)`` times the true one, whatever
the false-flag rate (false flags only add observed errors), so a stratum
whose true error rate is at least ``a`` shows an observed rate of at least
``a (1 - m)``. The certificate therefore tests the observed errors against
``a (1 - m_ucb)`` at ``delta - delta_seeds`` with ``m_ucb`` an upper
confidence sequence for the miss rate at ``delta_seeds``: the two chances of
error add to at most ``delta`` at every look (STATS.md section 13).

The miss rate is measured on *seeds*: plausible wrong values of the kinds
that occur (a total copied into tax, a digit swap, a neighbouring date),
put into the sample unseen as such and never counted as labels. The bound
is valid for real errors only if seeds are missed at least as often as real
errors are: make them look like the silent errors that occur, in the mix
that occurs. Each seed's verdict is an independent Bernoulli draw with the
reviewers' miss probability (seeds are shown one at a time, at random
places in the queue), so the seeds are sampled with replacement from that
behaviour and the bound below is a confidence sequence over the seeds.

References
----------
Robbins (1970), "Statistical methods related to the law of the iterated
logarithm", Ann. Math. Statist. 41:1397 (mixture martingales). Howard,
Ramdas, McAuliffe & Sekhon (2021), "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49:1055, section 3
(beta-binomial mixture). Wolfe, Horowitz & Kenner (2005), Nature 435:439
(misses at low prevalence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import numpy as np
from fieldtrust.calibration.survey import check_fraction
from scipy.special import betainc, betaln

from fieldtrust.errors import InputError

#: Parameters of the beta mixing distribution over miss rates: mean 1/4.
PRIOR = (1.0, 3.0)

#: Fewest judged seeds before a certificate that allows for misses may be issued.
MIN_SEEDS = 30


def _log_mixture_evalue(misses: float, seeds: float, rate: float,
                        prior: tuple[float, float]) -> float:
    """Log evidence against "miss rate >= rate": the beta mixture of likelihood ratios below it.

    ``integral over p < rate of (p / rate)^k ((1 - p) / (1 - rate))^(n - k)``
    against the mixing distribution restricted to ``[0, rate)``. Each ratio
    with ``p < rate`` is a supermartingale whenever the true rate is at least
    ``rate``, so their mixture is one too (a test of the composite null).
    """
    a, b = prior
    k, n = misses, seeds
    mass_below = betainc(a, b, rate)
    posterior_below = betainc(a + k, b + n - k, rate)
    if mass_below <= 0 or posterior_below <= 0:
        return -math.inf
    return float(betaln(a + k, b + n - k) - betaln(a, b) + math.log(posterior_below)
                 - math.log(mass_below) - k * math.log(rate) - (n - k) * math.log1p(-rate))


def miss_rate_upper_bound(
    misses: int,
    seeds: int,
    *,
    delta: float,
    prior: tuple[float, float] = PRIOR,
) -> float:
    """An anytime-valid upper ``1 - delta`` bound on the reviewers' miss rate.

    The smallest rate whose null "the miss rate is at least this" the seeds
    reject at ``delta`` (a one-sided beta-binomial mixture confidence
    sequence): with probability ``1 - delta`` the bound is above the true
    rate at every number of seeds judged, so it may be read after every
    verdict. 1 without seeds.

    Parameters
    ----------
    misses
        Seeds judged correct (the seeded wrong value was missed).
    seeds
        Seeds judged so far (misses included; "unclear" counts as caught,
        since the certificate counts unclear as an error too).
    delta
        The share of the certificate's ``delta`` spent on the miss rate.

    References
    ----------
    Robbins (1970); Howard et al. (2021), Ann. Statist. 49:1055, section 3.
    """
    check_fraction("delta", delta)
    if seeds < 0 or not 0 <= misses <= seeds:
        raise InputError(f"need 0 <= misses <= seeds, got misses={misses}, seeds={seeds}")
    if seeds == 0:
        return 1.0
    threshold = math.log(1.0 / delta)
    lo, hi = misses / seeds, 1.0
    if _log_mixture_evalue(misses, seeds, 1.0 - 1e-12, prior) < threshold:
        return 1.0
    for _ in range(100):  # the evidence grows with the rate tested: bisect
        mid = 0.5 * (lo + hi)
        if _log_mixture_evalue(misses, seeds, mid, prior) >= threshold:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-9:
            break
    return hi


@dataclass(frozen=True)
class SeedJudgements:
    """How reviewers judged one stratum's seeds: the certificate path's input.

    ``judged`` seeds reached a verdict ("unclear" counts as caught);
    ``missed`` of them were judged correct although their value was wrong.
    Produced from the store's seed verdicts
    (:func:`fieldtrust.labels.seed_verdicts.seed_judgements`); the certificate
    turns it into a :class:`MissAllowance` with :func:`miss_allowance`.
    """

    judged: int
    missed: int

    def __post_init__(self) -> None:
        if self.judged < 0 or not 0 <= self.missed <= self.judged:
            raise InputError(
                f"seed judgements need 0 <= missed <= judged, got judged={self.judged},"
                f" missed={self.missed}")


def stored_judgements(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], SeedJudgements]:
    """Every seeded stratum's judged and missed seeds, as the store holds them.

    Every sample's seeds of a stratum count: the miss-rate bound
    (:func:`miss_rate_upper_bound`) is a confidence sequence, valid at every
    number of seeds judged. A stratum never seeded is not in the mapping.
    """
    rows = con.execute(
        "SELECT s.doc_type, s.field, count(*), count(*) FILTER (WHERE v.verdict = 'correct')"
        " FROM seed_verdicts v JOIN seed_items s USING (seed_id) GROUP BY ALL"
    ).fetchall()
    return {(str(d), str(f)): SeedJudgements(judged=int(n), missed=int(m))
            for d, f, n, m in rows}


@dataclass(frozen=True)
class MissAllowance:
    """What the seeds allow: the miss-rate bound and the error rate the labels are tested at."""

    seeds: int
    misses: int
    miss_upper: float  # anytime-valid upper bound on the miss rate
    max_error: float  # the observed error rate the certificate tests against
    delta_labels: float  # the share of delta left for the labels' evidence
    refused: bool  # too few seeds judged: no certificate yet

    @property
    def reason(self) -> str | None:
        if self.refused:
            return (f"only {self.seeds} seeds judged; at least {MIN_SEEDS} are needed"
                    " before reviewer misses can be allowed for")
        return None


def miss_allowance(
    max_error: float,
    *,
    seeds: int,
    misses: int,
    delta: float,
    seed_share: float = 0.2,
    min_seeds: int = MIN_SEEDS,
) -> MissAllowance:
    """The error rate observed labels are tested at once reviewer misses are allowed for.

    ``max_error * (1 - m_ucb)`` with ``m_ucb`` the miss-rate bound at
    ``seed_share * delta``; the labels' evidence gets the rest of ``delta``.
    A fifth of ``delta`` for the seeds: the bound grows only with
    ``log(1 / delta)``, while the labels' evidence needs ``log(1 / delta)``
    in full, so an even split costs the labels more than it saves.

    References
    ----------
    STATS.md section 13: ``err_true <= err_obs / (1 - m)``.
    """
    check_fraction("seed_share", seed_share)
    delta_seeds = seed_share * delta
    upper = miss_rate_upper_bound(misses, seeds, delta=delta_seeds)
    return MissAllowance(
        seeds=seeds,
        misses=misses,
        miss_upper=upper,
        max_error=max_error * (1.0 - upper),
        delta_labels=delta - delta_seeds,
        refused=seeds < min_seeds,
    )


def seeds_for_rate(rate: float, sample_size: int) -> int:
    """Seeds to put into a sample of ``sample_size`` at the policy's seed ``rate`` (at least 1)."""
    check_fraction("rate", rate)
    return max(1, int(np.ceil(rate * sample_size)))
