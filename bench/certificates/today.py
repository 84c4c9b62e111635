"""Today's certificate on the same simulated weeks: the baseline the goals compare with.

Each look builds the stratum's :class:`~fieldtrust.calibration.population.StratumData`
over the window (the last ``window`` closed weeks, as the store would) and
runs today's library path: :func:`~fieldtrust.calibration.thresholds.select_thresholds`
(thinning to the lowest inclusion probability, exact Clopper-Pearson, never
below Korn-Graubard, the walk from :func:`walk_start`) and
:func:`~fieldtrust.calibration.candidates.assess` (the last
``stability_weeks`` weeks each with ``min_week_labels`` labels and not
significantly below target). "Unclear" verdicts are left out of the labels,
as ``store.labelled`` leaves them out, but close their cell's prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.candidates import assess
from fieldtrust.calibration.design import N_GRID, grid_index
from fieldtrust.calibration.population import AuditCell, StratumData
from fieldtrust.calibration.thresholds import select_thresholds
from fieldtrust.store.bar import Bar

from bench.certificates.engine import N_CELLS, _sample_sizes
from bench.certificates.world import BANDS, Scenario, draw_week

_EDGES = (0.0, *BANDS, 1.0)


def _band_label(b: int) -> str:
    lo, hi = _EDGES[b], _EDGES[b + 1]
    return f"[{lo:.2f},{hi:.2f}{']' if hi >= 1 else ')'}"


@dataclass
class _Sampled:
    """One week of one run as today's store sees it."""

    name: str
    hist: npt.NDArray[np.int64]
    cells: list[AuditCell]
    confidence: FloatArray
    correct: FloatArray
    weight: FloatArray
    pi: FloatArray
    cell: npt.NDArray[np.object_]
    wrong_by_k: npt.NDArray[np.int64]  # true errors per grid index (for judging)


def _sampled_weeks(scenario: Scenario, week: int, rng: np.random.Generator,
                   share: float) -> tuple[list[_Sampled], object]:
    data = draw_week(scenario, rng, week)
    runs = data.confidence.shape[0]
    cell = data.band * 2 + data.new.astype(np.int64)
    n_pop = np.stack([np.bincount(row, minlength=N_CELLS) for row in cell])
    sizes = _sample_sizes(scenario, n_pop, np.tile(np.arange(N_CELLS) % 2 == 1, (runs, 1)))
    name = f"2026-W{week + 1:02d}"
    out = []
    for r in range(runs):
        k = grid_index(data.confidence[r])
        cells, rows, cell_of, pi_of = [], [], [], []
        for h in range(N_CELLS):
            members = np.flatnonzero(cell[r] == h)
            if members.size == 0:
                continue
            order = members[np.argsort(data.prn[r, members])][: sizes[r, h]]
            prefix = order[: int(np.ceil(share * order.size))]
            if prefix.size == 0:
                continue
            pi = prefix.size / members.size
            cell_id = f"{h // 2}|{'new' if h % 2 else 'established'}"
            cells.append(AuditCell(name, cell_id, _band_label(h // 2), pi, int(members.size)))
            readable = prefix[~data.unclear[r, prefix]]
            rows.append(readable)
            cell_of += [cell_id] * readable.size
            pi_of += [pi] * readable.size
        picked = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        pis = np.asarray(pi_of, dtype=float)
        out.append(_Sampled(
            name, np.bincount(k, minlength=N_GRID), cells, data.confidence[r, picked],
            (~data.observed_error[r, picked]).astype(float), 1 / pis, pis,
            np.asarray(cell_of, dtype=object),
            np.bincount(k, weights=data.wrong[r], minlength=N_GRID).astype(np.int64)))
    return out, data


def _stratum(weeks: list[_Sampled]) -> StratumData:
    week_hist = {w.name: w.hist for w in weeks}
    total = sum(int(w.hist.sum()) for w in weeks)
    n = sum(w.correct.size for w in weeks)
    confidence = np.concatenate([w.confidence for w in weeks])
    return StratumData(
        doc_type="invoice", field="total", n_population=total,
        mean_confidence=float(confidence.mean()) if n else 0.9,
        week_hist=week_hist, version_hist={"v1": sum(w.hist for w in weeks)},
        cells=tuple(c for w in weeks for c in w.cells), confidence=confidence,
        correct=np.concatenate([w.correct for w in weeks]),
        weight=np.concatenate([w.weight for w in weeks]),
        inclusion_prob=np.concatenate([w.pi for w in weeks]),
        from_audit=np.ones(n, dtype=bool),
        week=np.concatenate([np.full(w.correct.size, w.name, dtype=object) for w in weeks]),
        form_version=np.full(n, "v1", dtype=object), u=np.random.default_rng(n).random(n),
        cell=np.concatenate([w.cell for w in weeks]),
        week_version_hist={(w.name, "v1"): w.hist for w in weeks},
        labels_by_provenance={"audit": n, "random_import": 0, "non_random": 0},
    )


@dataclass
class TodayOutcome:
    approved: npt.NDArray[np.bool_]
    week: npt.NDArray[np.int64]
    wrong: npt.NDArray[np.bool_]
    labels: npt.NDArray[np.int64]


def simulate_today(scenario: Scenario, *, window: int = 8) -> TodayOutcome:
    """Today's certificate looked at every quarter-week, approval at first candidacy."""
    rng = np.random.default_rng([scenario.seed, 20260])
    runs = scenario.runs
    bar = Bar(target=scenario.target, confidence=1 - scenario.delta, n_min=100,
              stability_weeks=scenario.stability_weeks, version_share=0.05,
              min_week_labels=scenario.min_week_labels, prior_error=scenario.prior_error)
    history: list[list[_Sampled]] = [[] for _ in range(runs)]
    approved = np.zeros(runs, dtype=bool)
    week_of = np.full(runs, -1, dtype=np.int64)
    wrong = np.zeros(runs, dtype=bool)
    labels = np.zeros(runs, dtype=np.int64)
    for w in range(scenario.weeks):
        for chunk in range(scenario.chunks):
            share = scenario.labelled * (chunk + 1) / scenario.chunks
            state = rng.bit_generator.state
            sampled, _ = _sampled_weeks(scenario, w, rng, share)
            if chunk < scenario.chunks - 1:
                rng.bit_generator.state = state  # the same week, labelled further
            for r in np.flatnonzero(~approved):
                weeks = [*history[r][-(window - 1):], sampled[r]]
                data = _stratum(weeks)
                thresholds = select_thresholds(data.design, data.labels, bar)
                result = assess(data, thresholds, bar)
                if not result.candidate or result.threshold is None:
                    continue
                k = round(result.threshold * 200)
                n_above = sum(int(x.hist[k:].sum()) for x in weeks)
                wrong_above = sum(int(x.wrong_by_k[k:].sum()) for x in weeks)
                approved[r] = True
                week_of[r] = w
                wrong[r] = 1 - wrong_above / max(n_above, 1) < scenario.target
                labels[r] = sum(x.correct.size for x in weeks)
        for r in range(runs):
            history[r].append(sampled[r])
    return TodayOutcome(approved, week_of, wrong, labels)
