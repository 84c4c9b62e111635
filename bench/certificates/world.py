"""The field conditions the certificate simulations create, one week at a time.

A scenario is one stratum (document type x field) observed for ``weeks``
weeks, in ``runs`` independent replications generated together (arrays of
shape ``(runs, volume)``). Each week:

* confidences from a beta mixture bunched on 0.90, 0.95 and 0.99 (what
  extraction models report), floored to two decimals;
* a new form version may appear (``new_share`` of the week's items from
  ``new_from``), flagged *new* for its first two weeks (boosted in the design);
* the truth: ``accuracy(confidence, version)`` per item, shifted each week by
  a random effect (``week_effect_sd`` accuracy points, the same for every
  item of the week); a share of the errors are *systematic* (plausible
  values at high confidence: a total copied into tax);
* the reviewers' verdicts: a wrong value is missed (judged correct) with
  probability ``miss_ordinary`` or ``miss_systematic``; a correct one is
  flagged wrong with ``false_flag``; a share ``unclear_wrong`` of the wrong
  items get "unclear" (the source cannot be read); the certificate counts
  unclear as an error, today's code leaves those items out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import BoolArray, FloatArray

#: Design bands (the audit's cells by confidence): [0, .90), [.90, .95), [.95, .99), [.99, 1].
BANDS = (0.90, 0.95, 0.99)

#: Candidate thresholds of the simulated walk, high to low (a subset of the 0.005 grid).
CANDIDATES = (0.99, 0.98, 0.97, 0.96, 0.95, 0.93, 0.90, 0.85)

#: Beta mixture of confidences: (mean, concentration, weight).
MIXTURE = ((0.90, 80.0, 0.3), (0.95, 150.0, 0.4), (0.99, 800.0, 0.3))

Accuracy = Callable[[FloatArray, BoolArray], FloatArray]


def flat(accuracy: float) -> Accuracy:
    """Every extraction right with the same probability: every threshold is a null when < target."""
    def p(confidence: FloatArray, new: BoolArray) -> FloatArray:
        return np.full(confidence.shape, accuracy)
    return p


def above(threshold: float, accuracy: float, below: float = 0.85) -> Accuracy:
    """``accuracy`` at and above ``threshold``, ``below`` under it."""
    def p(confidence: FloatArray, new: BoolArray) -> FloatArray:
        return np.where(confidence >= threshold - 1e-9, accuracy, below)
    return p


def banded(rates: dict[float, float], new_factor: float = 1.0) -> Accuracy:
    """Error rate by confidence band (``{lower edge: error rate}``), the new version's x factor."""
    edges = np.array(sorted(rates))
    errors = np.array([rates[e] for e in edges])

    def p(confidence: FloatArray, new: BoolArray) -> FloatArray:
        band = np.clip(np.searchsorted(edges, confidence + 1e-9, side="right") - 1, 0, None)
        e = errors[band] * np.where(new, new_factor, 1.0)
        return np.clip(1.0 - e, 0.0, 1.0)
    return p


@dataclass(frozen=True)
class Scenario:
    """One field condition: the stratum, the design, the reviewers, the policy."""

    name: str
    accuracy: Accuracy
    runs: int = 400
    weeks: int = 52
    volume: int = 2000  # extractions of the stratum per week
    new_share: float = 0.0
    new_from: int = 0
    systematic: float = 0.0  # share of errors that are plausible systematic ones
    week_effect_sd: float = 0.0  # accuracy points, one draw per run and week
    run_effect_sd: float = 0.0  # accuracy points, one draw per run for all its weeks
    miss_ordinary: float = 0.0
    miss_systematic: float = 0.0
    false_flag: float = 0.0
    unclear_wrong: float = 0.0
    # design
    allocation: str = "proportional"  # or "neyman"
    rate: float = 0.05
    floor: int = 20
    boost: float = 1.0  # new-version cells sampled at rate * boost
    band_errors: tuple[float, ...] = (0.10, 0.05, 0.03, 0.01)  # Neyman's expectation per band
    seed_rate: float = 0.0  # seeded known answers per planned label
    # reviewers
    chunks: int = 4  # looks per week: after each quarter of the week's sample
    labelled: float = 1.0  # share of each cell's sample reviewers reach
    # policy
    target: float = 0.95
    delta: float = 0.05
    prior_error: float = 0.03
    stability_weeks: int = 4
    min_week_labels: int = 50
    block_weeks: int = 4  # the coming block the between-week allowance covers
    between_week: bool = True
    seed_share: float = 0.2  # share of delta spent on the miss-rate bound
    start: str = "horizon"  # "horizon" (fixed for the run) or "moving"
    candidates: tuple[float, ...] = CANDIDATES
    horizon: int = 52
    stop_at_approval: bool = True
    future_weeks: int = 4  # weeks after an approval whose accuracy is recorded
    seed: int = 0
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class Week:
    """One week of every run: items (runs, volume) and their truth and verdicts."""

    confidence: FloatArray  # floored to two decimals
    band: npt.NDArray[np.int64]
    new: BoolArray
    wrong: BoolArray
    observed_error: BoolArray  # the verdict: wrong, or unclear, as the certificate counts it
    unclear: BoolArray
    prn: FloatArray  # permanent random number per item (the draw's order)


def _confidences(rng: np.random.Generator, shape: tuple[int, int]) -> FloatArray:
    means = np.array([m for m, _, _ in MIXTURE])
    conc = np.array([c for _, c, _ in MIXTURE])
    weights = np.array([w for _, _, w in MIXTURE])
    component = rng.choice(len(MIXTURE), size=shape, p=weights / weights.sum())
    c = rng.beta(means[component] * conc[component], (1 - means[component]) * conc[component])
    return np.floor(c * 100 + 1e-9) / 100


def draw_week(scenario: Scenario, rng: np.random.Generator, week: int) -> Week:
    """The items of one week in every run, with their truth and the reviewers' verdicts."""
    shape = (scenario.runs, scenario.volume)
    confidence = _confidences(rng, shape)
    band = np.searchsorted(np.array(BANDS), confidence + 1e-9, side="right")
    is_new_version = (week >= scenario.new_from) & (rng.random(shape) < scenario.new_share)
    new = is_new_version & (week < scenario.new_from + 2)
    p_correct = scenario.accuracy(confidence, is_new_version)
    if scenario.run_effect_sd > 0:
        # The same draw every week: a generator seeded by the scenario alone.
        offsets = np.random.default_rng([scenario.seed, 7]).normal(
            0.0, scenario.run_effect_sd, size=(scenario.runs, 1))
        p_correct = np.clip(p_correct + offsets, 0.0, 1.0)
    if scenario.week_effect_sd > 0:
        effect = rng.normal(0.0, scenario.week_effect_sd, size=(scenario.runs, 1))
        p_correct = np.clip(p_correct + effect, 0.0, 1.0)
    wrong = rng.random(shape) >= p_correct
    systematic = wrong & (rng.random(shape) < scenario.systematic)
    miss = np.where(systematic, scenario.miss_systematic, scenario.miss_ordinary)
    missed = wrong & (rng.random(shape) < miss)
    unclear = wrong & (rng.random(shape) < scenario.unclear_wrong)
    flagged = ~wrong & (rng.random(shape) < scenario.false_flag)
    observed = (wrong & ~missed) | unclear | flagged
    return Week(confidence, band.astype(np.int64), new, wrong, observed, unclear,
                rng.random(shape))


def seed_verdicts(scenario: Scenario, rng: np.random.Generator,
                  seeds: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Misses among each run's seeds: seeds are systematic in the share real errors are."""
    p = scenario.systematic * scenario.miss_systematic + (
        1 - scenario.systematic) * scenario.miss_ordinary
    return rng.binomial(seeds, p).astype(np.int64)
