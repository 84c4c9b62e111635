"""Week-to-week variation and the evidence of each week (STATS.md sections 15 and 17).

An approval acts on weeks to come, and a window's average hides how much a
week can differ from it. Two pieces:

* the *between-week allowance*: from each closed week's design-based error
  rate above the threshold and its sampling variance, the random-effects
  variance ``tau^2`` of the weekly rates (DerSimonian & Laird 1986) and the
  amount ``Delta`` by which a coming block of ``K`` weeks may exceed the
  horizon's rate, ``t_{W-1, 0.9} tau sqrt(1/K + 1/W)``; the certificate
  then tests the horizon's error rate against ``1 - target - Delta``;
* the *evidence blocks*: walking back from the latest closed week, a week
  whose stratum holds fewer items above the threshold than
  ``min_week_labels``, all of them labelled, is evidence on its own (a
  census); other weeks pool with their neighbours until the block holds
  ``min_week_labels`` labels. Stability needs blocks covering
  ``stability_weeks`` closed weeks with extractions above the threshold,
  never fewer because the store is young, and no block significantly below
  the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from fieldtrust.calibration.bets import growth_bets
from fieldtrust.calibration.betting import CellLabels, StratifiedEvalue, stratified_evalue
from fieldtrust.calibration.survey import check_fraction
from scipy.stats import chi2, t

from fieldtrust.errors import InputError


@dataclass(frozen=True)
class WeekRate:
    """One closed week's design-based error rate above the threshold.

    ``variance`` is its estimated sampling variance. ``design_factor`` is
    ``sum_h W_h^2 (1 - f_h) / (n_h - 1)``: the variance at a common error
    rate ``p`` is ``p (1 - p) design_factor``, which is how the between-week
    allowance weighs weeks (0: use ``variance`` as given).
    """

    estimate: float
    variance: float
    n_population: int
    n_labels: int
    design_factor: float = 0.0


def week_rate(cells: Sequence[CellLabels]) -> WeekRate:
    """The stratified error rate of one week's cells and its variance (Cochran, ch. 5).

    ``sum_h W_h p_h`` with ``W_h = N_h / N`` over the cells with labels, and
    the unbiased variance ``sum_h W_h^2 (1 - f_h) p_h (1 - p_h) / (n_h - 1)``
    (a cell of one label counts as ``n_h - 1 = 1``). Cells without labels are
    left out of both (the week is then described by its labelled cells only).

    References
    ----------
    Cochran (1977), Sampling Techniques, 3rd ed., sections 5.3-5.4.
    """
    labelled = [c for c in cells if c.n_labels > 0]
    size = np.array([c.n_population for c in labelled], dtype=float)
    n = np.array([c.n_labels for c in labelled], dtype=float)
    errors = np.array([c.n_errors for c in labelled], dtype=float)
    total = float(size.sum())
    if total <= 0:
        return WeekRate(math.nan, math.nan, 0, 0)
    weight = size / total
    rate = errors / n
    factor = weight**2 * (1 - n / size) / np.maximum(n - 1, 1)
    return WeekRate(float(np.sum(weight * rate)), float(np.sum(factor * rate * (1 - rate))),
                    int(total), int(n.sum()), float(factor.sum()))


@dataclass(frozen=True)
class BetweenWeek:
    """The random-effects variance of weekly error rates and what it allows for a coming block."""

    weeks: int
    tau2: float  # DerSimonian-Laird estimate of the between-week variance
    tau2_used: float  # shrunk towards the prior: what the allowance uses
    q_statistic: float  # Cochran's Q
    heterogeneity_p: float  # P(chi2_{W-1} >= Q): small when weeks differ beyond sampling noise
    allowance: float  # Delta: lower the certificate's error allowance by this much


#: Weekly variation assumed before the weeks say otherwise: one accuracy point...
PRIOR_SD = 0.01
#: ... worth this many weeks of evidence.
PRIOR_WEEKS = 2.0
#: One-sided level of the coming block's prediction bound. The evidence already holds
#: at delta; this margin is for a block that drifts from the horizon's rate.
BLOCK_CONFIDENCE = 0.9


def between_week_allowance(
    rates: Sequence[WeekRate],
    *,
    block_weeks: int = 4,
    confidence: float = BLOCK_CONFIDENCE,
    prior_sd: float = PRIOR_SD,
    prior_weeks: float = PRIOR_WEEKS,
) -> BetweenWeek:
    """How far a coming block of ``block_weeks`` weeks may exceed the horizon's error rate.

    ``Delta = t_{W-1, confidence} * tau * sqrt(1/K + 1/W)`` (``confidence`` 0.9): the prediction
    interval of a new block's mean rate around the horizon's mean under the
    random-effects model ``e_w = mu + u_w``, ``u_w ~ (0, tau^2)`` (Higgins,
    Thompson & Spiegelhalter 2009 give the same interval for a new study),
    with ``tau^2`` estimated by DerSimonian-Laird, each week's sampling
    variance taken at the weeks' pooled rate (``design_factor``). A few
    weeks' estimate is often 0 by chance, and a first candidacy would catch
    exactly those runs, so the allowance uses ``tau^2`` shrunk towards
    ``prior_sd^2`` with the weight of ``prior_weeks`` weeks,
    ``((W - 1) tau^2 + w0 prior_sd^2) / (W - 1 + w0)``; ``prior_weeks = 0``
    uses the estimate alone. Fewer than two weeks give no estimate and an
    infinite allowance: nothing can be said about a coming week from one.

    References
    ----------
    DerSimonian & Laird (1986), Controlled Clinical Trials 7:177. Higgins,
    Thompson & Spiegelhalter (2009), JRSS-A 172:137, section 4 (prediction
    intervals). Cochran (1954), Biometrics 10:101 (the Q statistic).
    """
    check_fraction("confidence", confidence)
    if block_weeks < 1:
        raise InputError(f"block_weeks must be at least 1, got {block_weeks}")
    usable = [r for r in rates if r.n_labels > 0 and np.isfinite(r.estimate)]
    w = len(usable)
    if w < 2:
        return BetweenWeek(w, math.nan, math.nan, math.nan, math.nan, math.inf)
    e = np.array([r.estimate for r in usable])
    factor = np.array([r.design_factor for r in usable])
    # Weeks are weighed by their variance at the weeks' common rate: a week
    # without errors has no sampling variance of its own, and weighing it
    # infinitely would make every other week look different.
    pooled = float(np.sum(e / np.maximum(factor, 1e-300)) / np.sum(1 / np.maximum(
        factor, 1e-300))) if np.all(factor > 0) else 0.0
    v = np.where(factor > 0, max(pooled * (1 - pooled), 1e-6) * factor,
                 np.array([r.variance for r in usable]))
    weight = 1.0 / np.maximum(v, 1e-12)
    mean = float(np.sum(weight * e) / weight.sum())
    q = float(np.sum(weight * (e - mean) ** 2))
    scale = float(weight.sum() - np.sum(weight**2) / weight.sum())
    tau2 = max(0.0, (q - (w - 1)) / scale) if scale > 0 else 0.0
    used = ((w - 1) * tau2 + prior_weeks * prior_sd**2) / (w - 1 + prior_weeks)
    allowance = float(t.ppf(confidence, w - 1)) * math.sqrt(used) * math.sqrt(
        1.0 / block_weeks + 1.0 / w)
    return BetweenWeek(w, tau2, used, q, float(chi2.sf(q, w - 1)), allowance)


@dataclass(frozen=True)
class WeekEvidence:
    """What one closed week holds above the threshold."""

    week: str
    cells: tuple[CellLabels, ...]

    @property
    def n_population(self) -> int:
        return sum(c.n_population for c in self.cells)

    @property
    def n_labels(self) -> int:
        return sum(c.n_labels for c in self.cells)

    @property
    def census(self) -> bool:
        """Every item above the threshold is labelled."""
        return self.n_population > 0 and self.n_labels == self.n_population


@dataclass(frozen=True)
class Block:
    """Consecutive closed weeks tested together, latest first."""

    weeks: tuple[str, ...]
    cells: tuple[CellLabels, ...]
    complete: bool  # enough labels (or every item labelled): evidence

    @property
    def n_labels(self) -> int:
        return sum(c.n_labels for c in self.cells)


def evidence_blocks(
    weeks: Sequence[WeekEvidence],
    *,
    min_week_labels: int,
    stability_weeks: int,
) -> list[Block]:
    """Blocks of the latest closed weeks, walking back until ``stability_weeks`` are covered.

    ``weeks`` are in time order. Weeks without extractions above the
    threshold have nothing to automate and are skipped. A week that is a
    census of fewer than ``min_week_labels`` items is a block of its own;
    otherwise weeks pool, latest first, until the block holds
    ``min_week_labels`` labels. The last block may be incomplete when the
    history runs out: the stratum then lacks evidence.

    References
    ----------
    STATS.md section 17.
    """
    if min_week_labels < 1 or stability_weeks < 1:
        raise InputError("min_week_labels and stability_weeks must be at least 1")
    blocks: list[Block] = []
    names: list[str] = []
    cells: list[CellLabels] = []
    covered = 0
    for week in reversed([w for w in weeks if w.n_population > 0]):
        if covered >= stability_weeks and not names:
            break
        if not names and week.census and week.n_population < min_week_labels:
            blocks.append(Block((week.week,), week.cells, complete=True))
            covered += 1
            continue
        names.append(week.week)
        cells.extend(week.cells)
        covered += 1
        if sum(c.n_labels for c in cells) >= min_week_labels:
            blocks.append(Block(tuple(names), tuple(cells), complete=True))
            names, cells = [], []
    if names:
        blocks.append(Block(tuple(names), tuple(cells), complete=False))
    return blocks


def enough_evidence(blocks: Sequence[Block], *, stability_weeks: int) -> bool:
    """Complete blocks cover at least ``stability_weeks`` closed weeks."""
    return sum(len(b.weeks) for b in blocks if b.complete) >= stability_weeks


#: Error rate the stability test is tuned to detect (a week at 85% accuracy).
BAD_WEEK_ERROR = 0.15


def below_target_evidence(block: Block, *, target: float,
                          bad_error: float = BAD_WEEK_ERROR) -> StratifiedEvalue:
    """Evidence that a block's accuracy above the threshold is below ``target``.

    The stratified evidence of :mod:`fieldtrust.calibration.betting` with
    right and wrong swapped: it tests "the share of correct values is at
    least ``target``" and rejects it when the block is worse. Bets are tuned
    to a block at ``bad_error``. Read once, at level ``delta``: it can only
    remove an approval, never grant one.
    """
    check_fraction("target", target)
    correct = [CellLabels(c.n_population, 1.0 - c.errors, 0.0) for c in block.cells]
    if not correct:
        return StratifiedEvalue(-math.inf, np.zeros(0), 0.0)
    size = np.array([c.n_population for c in correct], dtype=float)
    pi = np.array([c.n_labels for c in correct], dtype=float) / np.maximum(size, 1.0)
    bets = growth_bets(size, pi, 1.0 - bad_error, max_error=target)
    flipped = [CellLabels(c.n_population, c.errors, b) for c, b in zip(correct, bets,
                                                                        strict=True)]
    return stratified_evalue(flipped, max_error=target)
