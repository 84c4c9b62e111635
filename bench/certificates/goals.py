"""The goals of the two certificate issues, each measured with a Monte Carlo interval.

Every function returns :class:`Row` objects: what was measured, its value,
its 95% Wilson interval (for rates) or a percentile interval (for label
ratios), the goal and whether it is met (a rate passes when it is at most
5% plus three Monte Carlo standard errors). ``python -m bench.certificates``
prints them; ``tests/calibration/test_certificate_goals.py`` asserts them at
smaller sizes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.allocation import allocate
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.bets import growth_bets, kelly_bet
from fieldtrust.calibration.betting import CellLabels, LabelStack, least_evidence
from fieldtrust.calibration.certificate import Allowances, ThresholdCells, labels_needed
from fieldtrust.calibration.design import N_GRID, Blocks, Labels, error_bounds
from fieldtrust.calibration.survey import wilson_interval
from fieldtrust.sampling.allocation import cell_sizes
from fieldtrust.sampling.design import Design as SamplingDesign
from scipy.stats import binom

from bench.certificates.engine import Outcome, simulate
from bench.certificates.today import simulate_today
from bench.certificates.world import Scenario, above, flat

TARGET = 0.95
DELTA = 0.05


@dataclass(frozen=True)
class Row:
    """One measured figure beside its goal."""

    goal: str
    measured: str
    value: float
    low: float
    high: float
    limit: float | None  # the goal's bound on the value (None: reported beside, no goal)
    runs: int

    @property
    def passed(self) -> bool | None:
        if self.limit is None:
            return None
        return bool(self.value <= self.limit)

    def text(self) -> str:
        mark = {None: "", True: "  ok", False: "  MISSED"}[self.passed]
        bound = "" if self.limit is None else f"  (goal <= {self.limit:.3f})"
        return (f"{self.goal}: {self.measured} = {self.value:.3f}"
                f" [{self.low:.3f}, {self.high:.3f}]{bound}{mark}")


def allowed_rate(runs: int, rate: float = DELTA) -> float:
    """5% plus three Monte Carlo standard errors at ``runs`` replications."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / runs)


def rate_row(goal: str, measured: str, hits: npt.ArrayLike, *, limit: bool = True) -> Row:
    """A rate with its Wilson interval; the goal is 5% plus three Monte Carlo errors."""
    flags = np.asarray(hits, dtype=bool)
    k, n = int(flags.sum()), int(flags.size)
    low, high = wilson_interval(k, n) if n else (math.nan, math.nan)
    return Row(goal, measured, k / n if n else math.nan, float(low), float(high),
               allowed_rate(n) if limit else None, n)


def quantile_row(goal: str, measured: str, values: FloatArray, reference: float,
                 limit: float | None, rng: np.random.Generator, q: float = 0.8) -> Row:
    """``quantile(values, q) / reference`` with a bootstrap percentile interval."""
    v = np.asarray(values, dtype=float)  # inf: never reached in the horizon
    point = float(np.quantile(v, q, method="inverted_cdf")) / reference
    boot = np.quantile(v[rng.integers(0, v.size, (2000, v.size))], q, axis=1,
                       method="inverted_cdf") / reference
    return Row(goal, measured, point, float(np.quantile(boot, 0.025)),
               float(np.quantile(boot, 0.975)), limit, int(v.size))


# --- "Certificates that last" -----------------------------------------------------------

#: The validity worlds: 2,000 extractions a week for the 52-week horizon, 6,000 (about
#: 330 labels a week) for the side-by-side with today's certificate, which is slow to run.
VALIDITY = {"volume": 2000, "chunks": 4, "start": "moving"}
SIDE_BY_SIDE = {"volume": 6000, "chunks": 4, "start": "moving"}


def anytime_validity(runs: int = 400, weeks: int = 52, accuracies: tuple[float, ...] = (
        0.949, 0.94, 0.93), today_weeks: int = 12) -> list[Row]:
    """Wrong approvals over weekly looks, approval at first candidacy, reviewers stopping on it.

    Every extraction is right with the same probability, so every threshold
    is below target: any approval is wrong (judged on the closed weeks'
    extractions above the approved threshold). Reviewers label each week's
    sample a quarter at a time and stop the moment the stratum is a
    candidate. Then both certificates on the busier world for
    ``today_weeks`` weeks, where today's fails (its stability check as the
    field tests run it, one week).
    """
    rows = []
    for accuracy in accuracies:
        scenario = Scenario(f"flat {accuracy}", flat(accuracy), runs=runs, weeks=weeks,
                            **VALIDITY)  # type: ignore[arg-type]
        out = simulate(scenario)
        rows.append(rate_row("anytime validity", f"wrong approvals at {accuracy}, {weeks} weekly"
                             " looks, reviewers stopping at candidacy", out.wrong(TARGET)))
        rows.append(rate_row("young stratum", f"approvals in the first 3 closed weeks"
                             f" (at {accuracy})", out.approved & (out.week < 3), limit=False))
    if today_weeks:
        busy = Scenario("flat 0.949", flat(0.949), runs=runs, weeks=today_weeks,
                        **SIDE_BY_SIDE)  # type: ignore[arg-type]
        rows.append(rate_row("anytime validity", f"wrong approvals at 0.949, {today_weeks} weeks"
                             " of 6,000, reviewers stopping at candidacy",
                             simulate(busy).wrong(TARGET)))
        for chunks, how in ((1, "weekly looks"), (4, "reviewers stopping at candidacy")):
            today = simulate_today(dataclasses.replace(busy, chunks=chunks, stability_weeks=1))
            rows.append(rate_row("anytime validity", f"today's bound: wrong approvals at 0.949,"
                                 f" {today_weeks} weeks of 6,000, {how}", today.wrong,
                                 limit=False))
            rows.append(rate_row("young stratum", f"today's bound: approvals in the first"
                                 f" audited week ({how})", today.approved & (today.week == 0),
                                 limit=False))
    return rows


def fixed_look_labels(true_error: float, power: float = 0.8, max_error: float = 1 - TARGET,
                      delta: float = DELTA, *, every_larger: bool = False) -> int:
    """Labels one exact (Clopper-Pearson) look needs for ``power`` at ``true_error``.

    The exact test's power saw-tooths in ``n``; ``every_larger`` gives the
    fewest labels from which every larger look has the power too.
    """
    n = np.arange(10, 20_000)
    k = binom.ppf(delta, n, max_error)
    k = np.where(binom.cdf(k, n, max_error) <= delta, k, k - 1)
    reached = np.where(k >= 0, binom.cdf(k, n, true_error), 0.0) >= power
    if every_larger:
        return int(n[np.flatnonzero(~reached)[-1] + 1])
    return int(n[np.flatnonzero(reached)[0]])


def sprt_labels(true_error: float, prior_error: float = 0.03, power: float = 0.8,
                reps: int = 4000, seed: int = 0) -> float:
    """Labels the best test valid at every look needs, looking after every label.

    Kelly's bet at the prior is the sequential probability ratio test of the
    prior rate against ``1 - target`` (with replacement): its 80% crossing
    point is what no anytime-valid evidence beats at that rate.
    """
    rng = np.random.default_rng(seed)
    bet = (1 - TARGET - prior_error) / ((1 - TARGET) * (1 - prior_error))
    x = rng.random((reps, 4000)) < true_error
    path = np.cumsum(np.where(x, math.log1p(-bet), 0.0) - math.log1p(-bet * (1 - TARGET)),
                     axis=1)
    crossed = path >= math.log(1 / DELTA)
    first = np.where(crossed.any(axis=1), np.argmax(crossed, axis=1) + 1, np.inf)
    return float(np.quantile(first, power))


def _labels_to_certify(out: Outcome) -> FloatArray:
    return np.where(out.approved, out.labels_above, np.inf).astype(float)


def power_ratio(runs: int = 400, weeks: int = 52, seed: int = 1) -> list[Row]:
    """Labels above ``t`` to certify in 80% of runs at a true 0.97, over one fixed look's."""
    rng = np.random.default_rng(seed)
    first, every = fixed_look_labels(0.03), fixed_look_labels(0.03, every_larger=True)
    sprt = sprt_labels(0.03)
    rows = [Row("power", f"context: the sequential probability ratio test, a look after every"
                f" label, over one fixed look's ({first})", sprt / first, math.nan, math.nan,
                None, 4000)]
    for name, extra in (("the evidence alone", {"between_week": False, "stability_weeks": 1,
                                                "min_week_labels": 1}),
                        ("the full certificate", {})):
        scenario = Scenario("0.97 above 0.90", above(0.90, 0.97), runs=runs, weeks=weeks,
                            candidates=(0.90,), chunks=4, start="moving", seed=seed,
                            **extra)  # type: ignore[arg-type]
        labels = _labels_to_certify(simulate(scenario))
        for reference, how in ((first, "the first n with 80% power"),
                               (every, "80% power at every larger n")):
            rows.append(quantile_row(
                "power", f"labels above t for 80% approvals / one fixed look's ({reference}:"
                f" {how}), {name}", labels, reference,
                1.3 if name == "the evidence alone" else None, rng))
    return rows


def reviewer_misses(runs: int = 400, weeks: int = 52, seed: int = 2) -> list[Row]:
    """Misses measured by seeds: validity at 30%/80% misses, cost at 10%."""
    rows = []
    bad = Scenario("0.936, misses", flat(0.936), runs=runs, weeks=weeks, systematic=0.4,
                   miss_ordinary=0.3, miss_systematic=0.8, false_flag=0.005, seed_rate=0.2,
                   start="moving", chunks=1, seed=seed)
    rows.append(rate_row("reviewer misses", "wrong approvals at 0.936, misses 30% ordinary /"
                         " 80% systematic, seeds at 20% of the sample",
                         simulate(bad).wrong(TARGET)))
    unseeded = dataclasses.replace(bad, seed_rate=0.0)
    rows.append(rate_row("reviewer misses", "... without seeds (misses not allowed for)",
                         simulate(unseeded).wrong(TARGET), limit=False))
    rng = np.random.default_rng(seed)
    # The cost of the allowance on the evidence itself: one threshold, no stability or
    # between-week allowance, labels above t when first certified.
    perfect = Scenario("0.97, perfect reviewers", above(0.90, 0.97), runs=runs, weeks=weeks,
                       candidates=(0.90,), between_week=False, stability_weeks=1,
                       min_week_labels=1, start="moving", chunks=1, seed=seed)
    base = float(np.quantile(_labels_to_certify(simulate(perfect)), 0.8, method="inverted_cdf"))
    for share in (0.2, 0.5):
        missing = dataclasses.replace(perfect, miss_ordinary=0.1, miss_systematic=0.1,
                                      seed_rate=share)
        rows.append(quantile_row(
            "reviewer misses", f"labels above t for 80% approvals at misses 10%, seeds at"
            f" {share:.0%} of the sample / perfect reviewers ({base:.0f})",
            _labels_to_certify(simulate(missing)), base, 1.5, rng))
    return rows


def unclear_not_a_pass(runs: int = 400, weeks: int = 52, today_weeks: int = 12,
                       seed: int = 3) -> list[Row]:
    """A 0.94 stratum whose wrong items are 'unclear' 40% of the time."""
    scenario = Scenario("0.94, unclear", flat(0.94), runs=runs, weeks=weeks, unclear_wrong=0.4,
                        start="moving", chunks=1, seed=seed)
    rows = [rate_row("unclear", "wrong approvals at 0.94, unclear on 40% of wrong items"
                     " (counted as errors)", simulate(scenario).wrong(TARGET))]
    if today_weeks:
        today = simulate_today(dataclasses.replace(scenario, weeks=today_weeks, chunks=1,
                                                   stability_weeks=1, volume=6000))
        rows.append(rate_row("unclear", f"today's bound (unclear left out), {today_weeks} weeks",
                             today.wrong, limit=False))
    return rows


def future_weeks(runs: int = 400, weeks: int = 52, seed: int = 4) -> list[Row]:
    """Week-to-week variation of 1.5 points: the four weeks after an approval."""
    rows = []
    worlds = (("0.96, weekly sd 1.5 points", flat(0.96), 0.0),
              ("0.965 +- 1 point by run, weekly sd 1.5 points", flat(0.965), 0.01))
    for name, accuracy, spread in worlds:
        for allowance in (True, False):
            scenario = Scenario(name, accuracy, runs=runs, weeks=weeks, week_effect_sd=0.015,
                                run_effect_sd=spread, between_week=allowance, start="moving",
                                chunks=1, seed=seed)
            out = simulate(scenario)
            label = "with" if allowance else "without"
            approved = out.approved
            rows.append(rate_row(
                "future weeks", f"{name}, {label} the between-week allowance: next 4 weeks below"
                " target among approved runs", out.wrong_next(TARGET)[approved],
                limit=allowance))
            rows.append(rate_row("future weeks", "... approved and next 4 weeks below target"
                                 " (all runs)", out.wrong_next(TARGET), limit=allowance))
    return rows


# --- "Certificates a team can afford" ------------------------------------------------

#: One audited week of a stratum: three confidence bands, population shares 0.6/0.3/0.1.
BANDS_N = np.array([12000, 6000, 2000])
BANDS_ERROR = np.array([0.01, 0.04, 0.12])  # 97% accurate overall
DESIGNS: dict[str, Callable[[int], npt.NDArray[np.int64]]] = {
    "proportional": lambda n: allocate(BANDS_N, n),
    "boosted": lambda n: np.round(np.array([0.4, 0.3, 0.3]) * n).astype(np.int64),
    "neyman": lambda n: allocate(BANDS_N, n, allocation="neyman", expected_error=BANDS_ERROR,
                                 floor=20),
}


def _populations(rng: np.random.Generator, reps: int, errors: npt.NDArray[np.int64],
                 sizes: npt.NDArray[np.int64] = BANDS_N) -> list[npt.NDArray[np.bool_]]:
    """Per cell, ``reps`` random orders of a population with exactly ``errors`` wrong."""
    out = []
    for size, wrong in zip(sizes, errors, strict=True):
        keys = rng.random((reps, size))
        ranks = np.argsort(keys, axis=1)
        out.append(ranks < wrong)  # the first `wrong` items of a random order are the errors
    return out


def _one_look(populations: list[npt.NDArray[np.bool_]], sizes: npt.NDArray[np.int64],
              *, looks: int = 1, cells: npt.NDArray[np.int64] = BANDS_N,
              prior: FloatArray = BANDS_ERROR
              ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whether the new evidence (at any of ``looks`` prefixes) and today's bound certify."""
    reps = populations[0].shape[0]
    n_cells = cells.size
    pi = sizes / cells
    bets = growth_bets(cells, pi, prior, max_error=1 - TARGET)
    ours = np.zeros(reps, dtype=bool)
    for look in range(1, looks + 1):
        prefix = np.ceil(sizes * look / looks).astype(np.int64)
        width = int(prefix.max())
        errors = np.zeros((reps * n_cells, width))
        for h, pop in enumerate(populations):
            errors[h::n_cells, : prefix[h]] = pop[:, : prefix[h]]
        stack = LabelStack.from_padded(np.tile(cells, reps), errors, np.tile(prefix, reps),
                                       np.tile(bets, reps), np.repeat(np.arange(reps), n_cells),
                                       n_groups=reps)
        budget = np.full(reps, (1 - TARGET) * cells.sum())
        ours |= least_evidence(stack, budget).log_evalue >= math.log(1 / DELTA)
    hist = np.zeros((n_cells, N_GRID), dtype=np.int64)
    hist[:, 190] = cells
    design = Blocks(hist, np.arange(n_cells), pi.astype(float), cells.astype(float))
    today = np.zeros(reps, dtype=bool)
    u = np.random.default_rng(0).random(int(sizes.sum()))
    cell = np.repeat(np.arange(n_cells), sizes)
    weight = np.repeat(1 / pi, sizes)
    for r in range(reps):
        correct = np.concatenate([~pop[r, :n] for pop, n in zip(populations, sizes,
                                                                 strict=True)]).astype(float)
        labels = Labels(np.full(cell.size, 190), correct, weight, cell, u)
        bound = error_bounds(design, labels, [190], delta=DELTA).value[0]
        accuracy = np.sum(weight * correct) / weight.sum()
        today[r] = bound <= 1 - TARGET and accuracy >= TARGET
    return ours, today


def _labels_at_power(grid: npt.NDArray[np.int64], power: FloatArray, reps: int,
                     level: float = 0.8) -> tuple[float, float, float]:
    """Labels where the power curve reaches ``level``, and where its Wilson bounds do."""
    low, high = wilson_interval(np.round(power * reps).astype(int), np.full(power.size, reps))

    def crossing(curve: FloatArray) -> float:
        above_level = np.flatnonzero(np.asarray(curve) >= level)
        if above_level.size == 0:
            return math.inf
        i = int(above_level[0])
        if i == 0:
            return float(grid[0])
        x0, x1, y0, y1 = grid[i - 1], grid[i], curve[i - 1], curve[i]
        return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0))

    return crossing(power), crossing(np.asarray(high)), crossing(np.asarray(low))


def affordable_power(reps: int = 400, grid: tuple[int, ...] = (
        300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1700, 2000), seed: int = 5
        ) -> list[Row]:
    """Labels for 80% power at 0.97: the new evidence beside today's bound, by design."""
    rng = np.random.default_rng(seed)
    errors = np.round(BANDS_N * BANDS_ERROR).astype(np.int64)
    populations = _populations(rng, reps, errors)
    n_grid = np.asarray(grid)
    curves: dict[tuple[str, str], FloatArray] = {}
    for design, sizes_for in DESIGNS.items():
        ours, today = [], []
        for n in n_grid:
            o, t = _one_look(populations, sizes_for(int(n)))
            ours.append(o.mean())
            today.append(t.mean())
        curves[(design, "new")] = np.array(ours)
        curves[(design, "today")] = np.array(today)
    at = {key: _labels_at_power(n_grid, curve, reps) for key, curve in curves.items()}
    rows = []
    pooled = at[("proportional", "today")][0]
    for design in DESIGNS:
        for bound in ("today", "new"):
            value, low, high = at[(design, bound)]
            rows.append(Row("affordable", f"labels for 80% power, {design} design, {bound}'s"
                            " bound", value, low, high, None, reps))
    rows.extend(_new_version_rows(reps, n_grid, rng))
    for design in ("boosted", "neyman"):
        new, today = at[(design, "new")][0], at[(design, "today")][0]
        rows.append(Row("affordable", f"{design}: new / today's labels", new / today,
                        at[(design, "new")][1] / today, at[(design, "new")][2] / today, 0.6,
                        reps))
        rows.append(Row("affordable", f"{design}: new / proportional with the exact pooled bound",
                        new / pooled, at[(design, "new")][1] / pooled,
                        at[(design, "new")][2] / pooled, 1.0, reps))
    return rows


def _sampling_neyman(n: int) -> npt.NDArray[np.int64]:
    """What the sampling design with ``allocation = "neyman"`` draws for ``n`` labels."""
    design = SamplingDesign(budget=n, allocation="neyman", minimum=20)
    return cell_sizes(BANDS_N, np.zeros(BANDS_N.size, dtype=bool), design, BANDS_ERROR)


#: The designs the allocation goal sets against proportional allocation, on one bound.
ALLOCATED: dict[str, Callable[[int], npt.NDArray[np.int64]]] = {
    "proportional": DESIGNS["proportional"],
    "neyman (sampling design)": _sampling_neyman,
    "boosted": DESIGNS["boosted"],
}


def allocation_power(reps: int = 400, grid: tuple[int, ...] = (
        300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1700, 2000), seed: int = 8,
        boot: int = 1000) -> list[Row]:
    """Labels for 80% power at 0.97 by design, every design on the bound that keeps each label.

    The new evidence (one look) on the same populations for every design, so
    the ratio to proportional is paired; its interval is a bootstrap over the
    runs (the power curves resampled together). Neyman's sizes come from
    :func:`fieldtrust.sampling.allocation.cell_sizes`, what ``fieldtrust sample``
    draws with ``allocation = "neyman"``. Goal (issue 24): no more labels than
    proportional allocation.
    """
    rng = np.random.default_rng(seed)
    errors = np.round(BANDS_N * BANDS_ERROR).astype(np.int64)
    populations = _populations(rng, reps, errors)
    n_grid = np.asarray(grid)
    hits = {name: np.array([_one_look(populations, sizes_for(int(n)))[0] for n in n_grid])
            for name, sizes_for in ALLOCATED.items()}  # (grid, reps) per design
    draws = rng.integers(0, reps, (boot, reps))

    def crossing(curve: FloatArray) -> float:
        return _labels_at_power(n_grid, curve, reps)[0]

    rows = []
    for name, hit in hits.items():
        rows.append(Row("allocation", f"labels for 80% power, {name}",
                        *_labels_at_power(n_grid, hit.mean(axis=1), reps), None, reps))
    base = hits["proportional"]
    for name in list(ALLOCATED)[1:]:
        ratio = crossing(hits[name].mean(axis=1)) / crossing(base.mean(axis=1))
        boots = np.array([crossing(hits[name][:, d].mean(axis=1))
                          / crossing(base[:, d].mean(axis=1)) for d in draws])
        rows.append(Row("allocation", f"{name} / proportional labels, same bound", ratio,
                        float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975)),
                        1.0, reps))
    return rows


#: A week with a new form version: 15% of the items, twice the errors, boosted 5x.
VERSION_N = np.array([17000, 3000])
VERSION_ERROR = np.array([0.024, 0.048])


def _new_version_rows(reps: int, n_grid: npt.NDArray[np.int64], rng: np.random.Generator
                      ) -> list[Row]:
    """Today's thinning against the new bound where a worse new version is boosted 5x."""
    errors = np.round(VERSION_N * VERSION_ERROR).astype(np.int64)
    populations = _populations(rng, reps, errors, VERSION_N)
    share = VERSION_N * np.array([1.0, 5.0])
    ours, today = [], []
    for n in n_grid:
        sizes = np.round(share / share.sum() * n).astype(np.int64)
        o, t = _one_look(populations, sizes, cells=VERSION_N, prior=VERSION_ERROR)
        ours.append(o.mean())
        today.append(t.mean())
    new = _labels_at_power(n_grid, np.array(ours), reps)
    old = _labels_at_power(n_grid, np.array(today), reps)
    return [Row("affordable", "labels for 80% power, new version boosted 5x, today's bound",
                *old, None, reps),
            Row("affordable", "labels for 80% power, new version boosted 5x, new bound",
                *new, None, reps),
            Row("affordable", "new version boosted 5x: new / today's labels", new[0] / old[0],
                new[1] / old[0], new[2] / old[0], 0.6, reps)]


def null_points(reps: int = 400, labels: int = 1500, looks: int = 10, seed: int = 6
                ) -> list[Row]:
    """Wrong certificates at the null boundary's corners, boosted design (0.4/0.3/0.3)."""
    rng = np.random.default_rng(seed)
    sizes = DESIGNS["boosted"](labels)
    allowance = round((1 - TARGET) * BANDS_N.sum())
    points = {"errors spread evenly": np.round(BANDS_N * (1 - TARGET)).astype(np.int64),
              "all in the smallest cell": np.array([0, 0, allowance]),
              "all in the largest cell": np.array([allowance, 0, 0])}
    rows = []
    for name, errors in points.items():
        ours, today = _one_look(_populations(rng, reps, errors), sizes, looks=looks)
        rows.append(rate_row("null points", f"{name}: new evidence, {looks} looks", ours))
        rows.append(rate_row("null points", f"{name}: today's bound, one look", today,
                             limit=False))
    return rows


def small_team(reps: int = 400, seed: int = 7, step: int = 30) -> list[Row]:
    """5,000 extractions, 4 fields, 3 closed weeks and an open one; one stratum 98% above 0.9.

    The stratum's 3 closed weeks hold about 940 extractions, 570 above 0.9
    (9 cells: week x band). The planner first asks
    :func:`~fieldtrust.calibration.certificate.labels_needed` from no labels
    at the policy's prior (3%); reviewers then label in rounds of ``step``
    items, spread over the cells as the planner names them (the next PRN
    items of each), each round betting Kelly's bet at the error rate seen so
    far (fixed before the round's verdicts), until the evidence reaches 20.
    The open week is outside the evidence; counted as unaccounted it would
    leave nothing to certify.
    """
    rng = np.random.default_rng(seed)
    weekly, closed = 5000 // 4 // 4, 3  # extractions per week of one stratum
    allowances = Allowances(TARGET, DELTA)
    within, shares, planned, open_kept = [], [], [], []
    for _ in range(reps):
        confidence = rng.beta(9, 1, (closed + 1, weekly))
        above_t = confidence >= 0.9
        wrong = rng.random((closed + 1, weekly)) < np.where(above_t, 0.02, 0.10)
        band = np.digitize(confidence, [0.95, 0.99])  # 0: [.90,.95), 1: [.95,.99), 2: [.99,1]
        sizes_l, pops = [], []
        for w in range(closed):
            for b in range(3):
                members = np.flatnonzero(above_t[w] & (band[w] == b))
                sizes_l.append(members.size)
                pops.append(wrong[w, rng.permutation(members)].astype(float))
        sizes = np.array(sizes_l)
        empty = ThresholdCells(0.9, tuple(CellLabels(int(n), np.zeros(0), 0.0) for n in sizes))
        plan = labels_needed(empty, allowances=allowances, prior_error=0.03)
        planned.append((plan.total or 0) / (closed * weekly))
        n = np.zeros(sizes.size, dtype=np.int64)
        bets = [np.zeros(0) for _ in sizes]
        while True:
            seen = sum(pops[h][: n[h]].sum() for h in range(sizes.size))
            rate = (seen + 20 * 0.03) / (n.sum() + 20)
            bet = kelly_bet(1 - TARGET, min(rate, 0.04))
            goal = np.minimum(np.ceil((n.sum() + step) * sizes / sizes.sum()), sizes).astype(int)
            bets = [np.r_[bets[h], np.full(goal[h] - n[h], bet)] for h in range(sizes.size)]
            n = goal
            final = ThresholdCells(0.9, tuple(CellLabels(int(size), pops[h][: n[h]], bets[h])
                                              for h, size in enumerate(sizes)))
            done = final.evidence(allowances.max_error).log_evalue >= allowances.log_threshold
            if done or np.all(n == sizes):
                break
        share = final.n_labels / (closed * weekly)
        shares.append(share)
        within.append(done and share <= 0.25)
        open_items = float(above_t[closed].sum())
        open_kept.append(ThresholdCells(0.9, final.cells, open_items).evidence(
            allowances.max_error).log_evalue >= allowances.log_threshold)
    shares_a = np.asarray(shares)
    return [
        Row("small team", "planner's first estimate (3% prior): share of the stratum to label",
            float(np.median(planned)), float(np.quantile(planned, 0.1)),
            float(np.quantile(planned, 0.9)), None, reps),
        Row("small team", "share labelled when certified (median; 10%-90% of runs)",
            float(np.median(shares_a)), float(np.quantile(shares_a, 0.1)),
            float(np.quantile(shares_a, 0.9)), 0.25, reps),
        rate_row("small team", "runs certified with at most 25% of the stratum labelled",
                 np.asarray(within), limit=False),
        rate_row("small team", "certified if the open week's items counted as errors",
                 np.asarray(open_kept), limit=False),
    ]


GOALS: dict[str, Callable[..., list[Row]]] = {
    "validity": anytime_validity,
    "power": power_ratio,
    "misses": reviewer_misses,
    "unclear": unclear_not_a_pass,
    "future": future_weeks,
    "affordable": affordable_power,
    "allocation": allocation_power,
    "null-points": null_points,
    "small-team": small_team,
}
