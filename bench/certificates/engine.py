"""Weekly looks at the anytime-valid certificate, every run of a scenario at once.

Each week closes, its sample is drawn (cells: band x new-version status, a
simple random sample of each in PRN order), and reviewers label it a
quarter at a time; after every quarter the certificate is looked at, and a
run is approved at its first candidacy (the walk certifies a threshold, the
stability blocks hold, enough seeds were judged). The evidence comes from
the library itself: :func:`fieldtrust.calibration.betting.least_evidence`
on every run x candidate threshold in one batch, warm-started from the
previous look; bets from :func:`fieldtrust.calibration.bets.growth_bets`
fixed at each week's close; the allowances from
:mod:`fieldtrust.calibration.seeds` and :mod:`fieldtrust.calibration.weekly`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.allocation import allocate
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.bets import growth_bets
from fieldtrust.calibration.betting import BatchEvidence, CellLabels, LabelStack, least_evidence
from fieldtrust.calibration.certificate import walk_start
from fieldtrust.calibration.seeds import MIN_SEEDS, miss_rate_upper_bound
from fieldtrust.calibration.weekly import (
    BLOCK_CONFIDENCE,
    PRIOR_SD,
    PRIOR_WEEKS,
    WeekEvidence,
    below_target_evidence,
    enough_evidence,
    evidence_blocks,
)

from bench.certificates.world import BANDS, Scenario, Week, draw_week, seed_verdicts

N_CELLS = 2 * (len(BANDS) + 1)  # band x (established, new)


@dataclass
class Outcome:
    """Per run: when and where it was approved, and whether the approval was wrong."""

    approved: npt.NDArray[np.bool_]
    week: IntArray  # week index of the approval (-1: never)
    threshold: FloatArray
    labels: IntArray  # labels of the stratum when approved (or at the end)
    labels_above: IntArray  # of them, above the approved threshold
    accuracy_now: FloatArray  # true accuracy of the closed weeks above the threshold
    accuracy_next: FloatArray  # true accuracy of the next future_weeks weeks above it
    seeds: IntArray
    extra: dict[str, FloatArray] = field(default_factory=dict)

    def wrong(self, target: float) -> npt.NDArray[np.bool_]:
        """Approved while the closed weeks above the threshold were below target."""
        return np.asarray(self.approved & (self.accuracy_now < target))

    def wrong_next(self, target: float) -> npt.NDArray[np.bool_]:
        """Approved while the coming weeks above the threshold fell below target."""
        return np.asarray(self.approved & (self.accuracy_next < target))


@dataclass
class _WeekCells:
    """One closed week's cells above every candidate: (runs, T, H[, width])."""

    n_pop: IntArray  # (R, T, H) items above t per cell
    planned: IntArray  # (R, T, H) sampled items above t (design counts)
    errors: npt.NDArray[np.bool_]  # (R, T, H, W) sampled verdicts above t, PRN order, packed
    rank: IntArray  # (R, T, H, W) each packed label's position in its cell's sample
    bets: FloatArray  # (R, T, H)
    n_sample: IntArray  # (R, H) planned sample size per cell
    wrong_above: IntArray  # (R, T) true errors above t this week
    items_above: IntArray  # (R, T)
    labelled: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # (R, T, H)

    def counts(self, prefix: IntArray) -> IntArray:
        """Labels above t per cell when each cell's first ``prefix`` sampled items are labelled."""
        inside = self.rank < prefix[:, None, :, None]
        return np.asarray(inside.sum(axis=3), dtype=np.int64)


def _sample_sizes(scenario: Scenario, n_pop: IntArray, is_new: npt.NDArray[np.bool_]) -> IntArray:
    """Planned sample size per (run, cell)."""
    if scenario.allocation == "neyman":
        expected = np.repeat(np.asarray(scenario.band_errors), 2)
        budget = round(scenario.rate * scenario.volume)
        return np.stack([allocate(row, budget, allocation="neyman", expected_error=expected,
                                  floor=scenario.floor) for row in n_pop])
    rate = scenario.rate * np.where(is_new, scenario.boost, 1.0)
    wanted = np.maximum(scenario.floor, np.round(rate * n_pop))
    return np.minimum(n_pop, wanted).astype(np.int64)


def _close_week(scenario: Scenario, week: Week) -> _WeekCells:
    """Draw the week's sample and lay its cells out above every candidate threshold."""
    runs, volume = week.confidence.shape
    cands = np.asarray(scenario.candidates)
    n_t = cands.size
    cell = week.band * 2 + week.new.astype(np.int64)
    n_pop = np.stack([np.bincount(row, minlength=N_CELLS) for row in cell])
    sizes = _sample_sizes(scenario, n_pop, np.tile(np.arange(N_CELLS) % 2 == 1, (runs, 1)))
    order = np.argsort(cell * 2.0 + week.prn, axis=1, kind="stable")
    starts = np.cumsum(n_pop, axis=1) - n_pop
    # Highest candidate each item clears: it is above candidates[j] for j >= level.
    conf = np.take_along_axis(week.confidence, order, axis=1)
    level = np.searchsorted(-cands, -conf - 1e-9, side="left")
    width = max(int(sizes.max()), 1)
    idx = starts[:, :, None] + np.arange(width)[None, None, :]
    valid = np.arange(width)[None, None, :] < sizes[:, :, None]
    idx = np.where(valid, idx, 0)
    lvl = np.where(valid, np.take_along_axis(level[:, None, :].repeat(N_CELLS, 1).reshape(
        runs, N_CELLS, volume), idx, axis=2), n_t + 1)
    obs = np.take_along_axis(np.take_along_axis(week.observed_error, order, axis=1)[:, None, :]
                             .repeat(N_CELLS, 1), idx, axis=2) & valid
    above = lvl[:, None, :, :] <= np.arange(n_t)[None, :, None, None]  # (R, T, H, W)
    pack = np.argsort(~above, axis=3, kind="stable")
    packed_above = np.take_along_axis(above, pack, axis=3)
    errors = np.take_along_axis(np.broadcast_to(obs[:, None], above.shape), pack, axis=3)
    pos = np.broadcast_to(np.arange(width)[None, None, None, :], above.shape)
    rank_packed = np.where(packed_above, np.take_along_axis(pos, pack, axis=3), width + 1)
    level_all = np.searchsorted(-cands, -week.confidence - 1e-9, side="left")
    above_item = level_all[:, None, :] <= np.arange(n_t)[None, :, None]  # (R, T, volume)
    keys = (np.arange(runs * n_t).reshape(runs, n_t)[:, :, None] * N_CELLS + cell[:, None, :])
    n_pop_t = np.bincount(keys[above_item], minlength=runs * n_t * N_CELLS).reshape(
        runs, n_t, N_CELLS)
    planned = packed_above.sum(axis=3)
    prior = np.repeat(np.asarray(scenario.band_errors), 2) if scenario.allocation == "neyman" \
        else scenario.prior_error
    pi = np.where(n_pop > 0, sizes / np.maximum(n_pop, 1), 0.0)
    bets = growth_bets(n_pop_t.reshape(runs * n_t, N_CELLS),
                       np.repeat(pi, n_t, axis=0), prior,
                       max_error=1.0 - scenario.target).reshape(runs, n_t, N_CELLS)
    return _WeekCells(
        n_pop=n_pop_t.astype(np.int64), planned=planned.astype(np.int64),
        errors=errors & packed_above, rank=rank_packed.astype(np.int64), bets=bets,
        n_sample=sizes.astype(np.int64),
        wrong_above=(week.wrong[:, None, :] & above_item).sum(axis=2),
        items_above=above_item.sum(axis=2))


def _stacks(cells: _WeekCells, counts: IntArray) -> list[LabelStack]:
    """One stack per candidate threshold, one group per run: the week's cells above it."""
    runs, n_t, n_h, width = cells.errors.shape
    group = np.repeat(np.arange(runs), n_h)
    return [LabelStack.from_padded(
        cells.n_pop[:, t].reshape(-1), cells.errors[:, t].reshape(runs * n_h, width).astype(float),
        counts[:, t].reshape(-1), cells.bets[:, t].reshape(-1), group, n_groups=runs)
        for t in range(n_t)]


@dataclass
class _Evidence:
    """Per candidate threshold: the closed weeks' stacks and the last solve of each run."""

    blocks: list[list[LabelStack]]
    multiplier: FloatArray  # (T, runs)
    masses: list[FloatArray]  # per t: null count per cell of the history (all runs)

    def log_evalues(self, t: int, current: LabelStack, runs: IntArray,
                    budget: FloatArray) -> FloatArray:
        """Log evidence at threshold ``t`` for the ``runs`` given (budget per run)."""
        full = LabelStack.concat([*self.blocks[t], current])
        known = self.masses[t]
        if known.size < full.n_cells:
            known = np.r_[known, full.high[known.size:]]
        wanted = np.zeros(full.n_groups, dtype=bool)
        wanted[runs] = True
        sub, cells = full.subset(wanted)
        warm = BatchEvidence(np.zeros(runs.size), self.multiplier[t, runs], known[cells])
        result = least_evidence(sub, budget, warm=warm)
        known = known.copy()
        known[cells] = result.null_errors
        self.masses[t] = known
        self.multiplier[t, runs] = result.multiplier
        return result.log_evalue


def _week_rates(n_pop: IntArray, counts: IntArray, errors: IntArray) -> tuple[FloatArray,
                                                                              FloatArray]:
    """Design-based error rate and design factor per (run, t), as ``weekly.week_rate``."""
    size = n_pop.astype(float)
    n = counts.astype(float)
    s = errors.astype(float)
    labelled = n > 0
    total = np.where(labelled, size, 0.0).sum(axis=2)
    weight = np.where(labelled, size, 0.0) / np.maximum(total[..., None], 1.0)
    rate = np.where(labelled, s / np.maximum(n, 1.0), 0.0)
    factor = np.where(labelled, weight**2 * (1 - n / np.maximum(size, 1.0))
                      / np.maximum(n - 1, 1.0), 0.0)
    est = np.where(total > 0, np.sum(weight * rate, axis=2), np.nan)
    return est, np.where(total > 0, factor.sum(axis=2), np.nan)


def _allowance(est: FloatArray, factor: FloatArray, block: int) -> FloatArray:
    """Between-week allowance per (run, t) from weekly rates (runs, T, weeks): as weekly.py."""
    from scipy.stats import t as student

    ok = np.isfinite(est) & (np.nan_to_num(factor) > 0)
    w = ok.sum(axis=2)
    inv = np.where(ok, 1.0 / np.where(ok, factor, 1.0), 0.0)
    e = np.where(ok, est, 0.0)
    pooled = np.sum(inv * e, axis=2) / np.maximum(inv.sum(axis=2), 1e-300)
    var = np.maximum(pooled * (1 - pooled), 1e-6)[..., None] * np.where(ok, factor, 1.0)
    weight = np.where(ok, 1.0 / np.maximum(var, 1e-12), 0.0)
    mean = np.sum(weight * e, axis=2) / np.maximum(weight.sum(axis=2), 1e-300)
    q = np.sum(weight * (e - mean[..., None]) ** 2, axis=2)
    scale = weight.sum(axis=2) - np.sum(weight**2, axis=2) / np.maximum(weight.sum(axis=2),
                                                                        1e-300)
    tau2 = np.maximum(0.0, (q - (w - 1)) / np.maximum(scale, 1e-300))
    tau2 = ((w - 1) * tau2 + PRIOR_WEEKS * PRIOR_SD**2) / np.maximum(w - 1 + PRIOR_WEEKS, 1e-300)
    with np.errstate(invalid="ignore", divide="ignore"):
        quantile = student.ppf(BLOCK_CONFIDENCE, np.maximum(w - 1, 1))
        allowance = quantile * np.sqrt(tau2) * np.sqrt(1.0 / block + 1.0 / np.maximum(w, 1))
    return np.asarray(np.where(w >= 2, allowance, np.inf), dtype=np.float64)


@functools.lru_cache(maxsize=200_000)
def _miss_upper(misses: int, seeds: int, delta: float) -> float:
    return miss_rate_upper_bound(misses, seeds, delta=delta)


def _stable(scenario: Scenario, history: list[_WeekCells], finals: list[IntArray],
            run: int, t: int) -> bool:
    """The stability blocks of one run at candidate ``t``: enough evidence, none below target."""
    weeks = []
    for w, (cells, counts) in enumerate(zip(history, finals, strict=True)):
        week_cells = tuple(
            CellLabels(int(cells.n_pop[run, t, h]),
                       cells.errors[run, t, h, : counts[run, t, h]].astype(float),
                       float(cells.bets[run, t, h]))
            for h in range(N_CELLS) if cells.n_pop[run, t, h] > 0)
        weeks.append(WeekEvidence(str(w), week_cells))
    blocks = evidence_blocks(weeks, min_week_labels=scenario.min_week_labels,
                             stability_weeks=scenario.stability_weeks)
    if not enough_evidence(blocks, stability_weeks=scenario.stability_weeks):
        return False
    threshold = math.log(1.0 / scenario.delta)
    return not any(below_target_evidence(b, target=scenario.target).log_evalue >= threshold
                   for b in blocks if b.complete)


def simulate(scenario: Scenario) -> Outcome:
    """Run every replication of ``scenario`` week by week; approve at first candidacy."""
    rng = np.random.default_rng([scenario.seed, 20260])
    runs, n_t = scenario.runs, len(scenario.candidates)
    target, delta = scenario.target, scenario.delta
    uses_seeds = scenario.seed_rate > 0
    delta_labels = delta * (1 - scenario.seed_share) if uses_seeds else delta
    log_threshold = math.log(1.0 / delta_labels)
    history: list[_WeekCells] = []
    finals: list[IntArray] = []
    evidence = _Evidence([[] for _ in range(n_t)], np.ones((n_t, runs)),
                         [np.zeros(0) for _ in range(n_t)])
    est_hist: list[FloatArray] = []
    var_hist: list[FloatArray] = []
    n_cum = np.zeros((runs, n_t))
    wrong_cum = np.zeros((runs, n_t))
    seeds = np.zeros(runs, dtype=np.int64)
    misses = np.zeros(runs, dtype=np.int64)
    labels_total = np.zeros(runs, dtype=np.int64)
    out = Outcome(
        approved=np.zeros(runs, dtype=bool), week=np.full(runs, -1, dtype=np.int64),
        threshold=np.full(runs, np.nan), labels=np.zeros(runs, dtype=np.int64),
        labels_above=np.zeros(runs, dtype=np.int64), accuracy_now=np.full(runs, np.nan),
        accuracy_next=np.full(runs, np.nan), seeds=np.zeros(runs, dtype=np.int64))
    future_n = np.zeros(runs)
    future_wrong = np.zeros(runs)
    start = np.zeros(runs, dtype=np.int64)
    cands = np.asarray(scenario.candidates)
    for w in range(scenario.weeks + scenario.future_weeks):
        week = draw_week(scenario, rng, w)
        cells = _close_week(scenario, week)
        # The coming weeks of approved runs: their accuracy above the threshold.
        tracking = out.approved & (out.week < w) & (w <= out.week + scenario.future_weeks)
        if tracking.any():
            t_index = np.searchsorted(-cands, -out.threshold - 1e-9)
            rows = np.flatnonzero(tracking)
            future_n[rows] += cells.items_above[rows, t_index[rows]]
            future_wrong[rows] += cells.wrong_above[rows, t_index[rows]]
        if w >= scenario.weeks:
            if np.all(~out.approved | (w >= out.week + scenario.future_weeks)):
                break
            continue
        n_cum += cells.items_above
        wrong_cum += cells.wrong_above
        if w == 0 or scenario.start == "moving":
            planned = sum(c.planned.sum(axis=2) for c in [*history, cells])
            scale = scenario.horizon / (w + 1) if scenario.start == "horizon" else 1.0
            start = np.array([walk_start(row * scale, prior_error=scenario.prior_error,
                                         target=target, delta=delta_labels) for row in planned])
        if uses_seeds:
            new_seeds = np.ceil(scenario.seed_rate * cells.n_sample.sum(axis=1)).astype(np.int64)
        for chunk in range(scenario.chunks):
            share = scenario.labelled * (chunk + 1) / scenario.chunks
            prefix = np.ceil(cells.n_sample * share).astype(np.int64)
            counts = cells.counts(prefix)
            active = ~out.approved
            if uses_seeds:
                judged = np.ceil(new_seeds * (chunk + 1) / scenario.chunks).astype(np.int64)
                extra = judged - (np.ceil(new_seeds * chunk / scenario.chunks).astype(np.int64))
                seeds += np.where(active, extra, 0)
                misses += np.where(active, seed_verdicts(scenario, rng, extra), 0)
            current = _stacks(cells, counts)
            est, var = _week_rates(cells.n_pop, counts, _errors_in_prefix(cells, counts))
            if scenario.between_week:
                allowance = _allowance(np.stack([*est_hist, est], axis=2),
                                       np.stack([*var_hist, var], axis=2),
                                       scenario.block_weeks)
            else:
                allowance = np.zeros((runs, n_t))
            miss_up = np.zeros(runs)
            if uses_seeds:
                miss_up = np.array([_miss_upper(int(k), int(n), delta * scenario.seed_share)
                                    for k, n in zip(misses, seeds, strict=True)])
            level = np.clip(1 - target - allowance, 0.0, None) * (1 - miss_up)[:, None]
            budget = level * n_cum
            # The walk, one threshold at a time for the runs still walking.
            position = np.where(active, start, n_t)
            certified = np.full(runs, -1, dtype=np.int64)
            while True:
                walking = np.flatnonzero(position < n_t)
                if walking.size == 0:
                    break
                for t in np.unique(position[walking]):
                    here = walking[position[walking] == t]
                    log_e = evidence.log_evalues(int(t), current[t], here, budget[here, t])
                    passed = log_e >= log_threshold
                    certified[here[passed]] = t
                    position[here[passed]] += 1
                    position[here[~passed]] = n_t
            labelled_now = labels_total + prefix.sum(axis=1)
            for r in np.flatnonzero(active & (certified >= 0)):
                if uses_seeds and seeds[r] < MIN_SEEDS:
                    continue
                t = int(certified[r])
                if not _stable(scenario, [*history, cells], [*finals, counts], r, t):
                    continue
                out.approved[r] = True
                out.week[r] = w
                out.threshold[r] = scenario.candidates[t]
                out.labels[r] = labelled_now[r]
                out.labels_above[r] = int(sum(f[r, t].sum() for f in finals) + counts[r, t].sum())
                out.accuracy_now[r] = 1 - wrong_cum[r, t] / max(n_cum[r, t], 1)
                out.seeds[r] = seeds[r]
        history.append(cells)
        finals.append(counts)
        for t in range(n_t):
            evidence.blocks[t].append(current[t])
        est_hist.append(est)
        var_hist.append(var)
        labels_total += prefix.sum(axis=1)
    never = ~out.approved
    out.labels[never] = labels_total[never]
    out.seeds[never] = seeds[never]
    with np.errstate(invalid="ignore", divide="ignore"):
        out.accuracy_next = np.where(out.approved & (future_n > 0),
                                     1 - future_wrong / np.maximum(future_n, 1), np.nan)
    return out


def _errors_in_prefix(cells: _WeekCells, counts: IntArray) -> IntArray:
    """Observed errors per (run, t, cell) among the labels counted."""
    width = cells.errors.shape[3]
    inside = np.arange(width)[None, None, None, :] < counts[..., None]
    return np.asarray((cells.errors & inside).sum(axis=3), dtype=np.int64)
