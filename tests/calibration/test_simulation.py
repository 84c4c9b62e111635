"""Does the certified threshold keep its promise? Simulation (STATS.md section 6).

Population: c ~ Beta(8, 1), P(correct | c) = 1 - 1.6 (1 - c); 3,000 labels.
The certified threshold may fall short of 0.95 true accuracy above it in at
most 5% of runs (plus Monte Carlo slack); the point threshold fails far more
often. The same holds when labels come from an unequal-probability design
with a boosted new form version that makes more errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.design import N_GRID, Blocks, Labels, grid_index
from fieldtrust.calibration.thresholds import select_thresholds
from fieldtrust.store.bar import Bar

RUNS = 240
TARGET = 0.95
#: The bar of STATS.md's reference runs: the walk starts at n_min (no prior error).
WALK = Bar(target=TARGET, confidence=0.95, n_min=100, prior_error=0.0)
POPULATION = 40_000
LABELS = 3_000
BANDS = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 1.0001])
# Allowed failure rate: 5% plus three Monte Carlo standard errors at 5%.
ALLOWED = 0.05 + 3 * np.sqrt(0.05 * 0.95 / RUNS)


Run = tuple[float | None, float | None, np.ndarray, np.ndarray]


def true_accuracy_above(k: np.ndarray, truth: np.ndarray, threshold: float | None) -> float:
    if threshold is None:
        return 1.0  # nothing automated: nothing can be wrong
    above = k >= round(threshold * 200)
    return float(truth[above].mean())


def srs_run(rng: np.random.Generator) -> Run:
    c = rng.beta(8, 1, POPULATION)
    truth = rng.random(POPULATION) < np.clip(1 - 1.6 * (1 - c), 0, 1)
    k = grid_index(c)
    chosen = rng.choice(POPULATION, LABELS, replace=False)
    design = Blocks.simple_random_sample(np.bincount(k, minlength=N_GRID), LABELS)
    labels = Labels(k[chosen], truth[chosen].astype(float),
                    np.full(LABELS, POPULATION / LABELS), np.zeros(LABELS, dtype=np.int64),
                    rng.random(LABELS))
    result = select_thresholds(design, labels, WALK)
    certified = result.certified.threshold if result.certified else None
    point = result.point.threshold if result.point else None
    return certified, point, k, truth


def design_run(rng: np.random.Generator) -> Run:
    """Bands x version status; the new version (15%) errs twice as often and is boosted 5x."""
    c = rng.beta(8, 1, POPULATION)
    new = rng.random(POPULATION) < 0.15
    error = np.clip(1.6 * (1 - c) * np.where(new, 2.0, 1.0), 0, 1)
    truth = rng.random(POPULATION) < 1 - error
    k = grid_index(c)
    band = np.searchsorted(BANDS, c, side="right") - 1
    cell_of = band * 2 + new
    rate = LABELS / (POPULATION * (0.85 + 0.15 * 5))
    block_hist = np.zeros((len(BANDS) - 1, N_GRID), dtype=np.int64)
    np.add.at(block_hist, (band, k), 1)
    cell_pi, cell_cap, chosen, label_cell = [], [], [], []
    for cell in range(2 * (len(BANDS) - 1)):
        members = np.flatnonzero(cell_of == cell)
        size = members.size
        n = min(size, max(10, round(rate * (5 if cell % 2 else 1) * size)))
        cell_pi.append(n / size if size else 1.0)
        cell_cap.append(float(size))
        picked = rng.choice(members, n, replace=False) if n else members[:0]
        chosen.append(picked)
        label_cell.append(np.full(picked.size, cell))
    design = Blocks(block_hist, np.arange(2 * (len(BANDS) - 1)) // 2,
                    np.array(cell_pi), np.array(cell_cap))
    idx = np.concatenate(chosen)
    cells = np.concatenate(label_cell).astype(np.int64)
    labels = Labels(k[idx], truth[idx].astype(float), 1 / design.cell_pi[cells], cells,
                    rng.random(idx.size))
    result = select_thresholds(design, labels, WALK)
    certified = result.certified.threshold if result.certified else None
    point = result.point.threshold if result.point else None
    return certified, point, k, truth


def simulate(run, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    certified_fail = point_fail = certified_any = 0
    coverage = []
    for _ in range(RUNS):
        certified, point, k, truth = run(rng)
        certified_fail += true_accuracy_above(k, truth, certified) < TARGET
        point_fail += true_accuracy_above(k, truth, point) < TARGET
        if certified is not None:
            certified_any += 1
            coverage.append(float(np.mean(k >= round(certified * 200))))
    return {
        "certified_fail": certified_fail / RUNS,
        "point_fail": point_fail / RUNS,
        "certified_share": certified_any / RUNS,
        "coverage": float(np.mean(coverage)) if coverage else 0.0,
    }


@pytest.mark.slow
@pytest.mark.parametrize(("run", "seed"), [(srs_run, 20261130), (design_run, 20261201)],
                         ids=["simple-random-sample", "boosted-new-version"])
def test_certified_threshold_keeps_its_promise_where_the_point_threshold_does_not(run, seed):
    stats = simulate(run, seed)
    print(stats)  # shown with -s: the figures the docs quote
    assert stats["certified_fail"] <= ALLOWED
    assert stats["point_fail"] >= 0.25
    assert stats["point_fail"] >= 3 * max(stats["certified_fail"], 0.02)
    # Valid because it certifies something, not because it never does.
    assert stats["certified_share"] >= 0.8
    assert stats["coverage"] >= 0.2
