"""The closed weeks of a stratum as the anytime certificate's cells (STATS.md sections 10, 14, 17).

A week is *closed* once a sample of it has been drawn: every week up to the
store's latest drawn week. Later weeks are *open*: outside every figure that
claims coverage and outside the certificate (their extractions are audited
when they close). Of each closed week the certificate needs, per sampling
cell of the week's current sample (the one :func:`fieldtrust.store.labelled.
labelled_items` reads):

* ``N_h(t)``, the cell's items above each grid threshold *at drawing*: the
  week's population of the cell's form versions (new or established as the
  sample's design decided) inside the cell's band. When that count is not
  the cell's recorded size (rows arrived after the draw, a band off the
  0.005 grid, a scope that filters form versions) the split is not known:
  the cell is left out and its extractions count as errors;
* its labelled prefix in PRN order with every verdict, "unclear" included
  and counted as an error: for automation an unreadable source is not a
  pass.

Anything of a closed week no usable cell accounts for (an unaudited closed
week, late rows, confidences no band covers) counts as errors.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.cells import threshold_cells
from fieldtrust.calibration.certificate import ThresholdCells
from fieldtrust.calibration.design import N_GRID, Blocks, Labels, grid_index
from fieldtrust.calibration.population import AuditCell, StratumData, band_range
from fieldtrust.calibration.weekly import WeekEvidence
from fieldtrust.store.weeks import Week

_LAST_DRAWN_SQL = "SELECT max(week) FROM audit_samples"

_PREFIX_SQL = """
WITH items AS (
    SELECT i.sample_id, i.cell, i.extraction_id,
           row_number() OVER (PARTITION BY i.sample_id, i.cell
                              ORDER BY i.prn, i.extraction_id) AS turn,
           v.extraction_id IS NOT NULL AS done, v.correct
    FROM audit_items i LEFT JOIN effective_labels v USING (extraction_id)
    WHERE i.sample_id IN (SELECT unnest(?::VARCHAR[]))
),
prefix AS (
    SELECT sample_id, cell,
           coalesce(min(turn) FILTER (WHERE NOT done) - 1, count(*)) AS prefix_n
    FROM items GROUP BY ALL
)
SELECT it.sample_id, it.cell, it.turn, it.correct::TINYINT AS correct, x.confidence
FROM items it JOIN prefix p USING (sample_id, cell)
JOIN sampled_extractions x USING (extraction_id)
WHERE it.turn <= p.prefix_n
ORDER BY it.sample_id, it.cell, it.turn
"""

_DESIGNS_SQL = """
SELECT sample_id, week, design_json FROM audit_samples
WHERE sample_id IN (SELECT unnest(?::VARCHAR[]))
"""

_FIRST_SEEN_SQL = "SELECT doc_type, form_version, first_seen_at FROM form_versions"


def last_drawn_week(con: duckdb.DuckDBPyConnection) -> str | None:
    """The newest ISO week with a drawn sample: it and every earlier week are closed."""
    # fetchall: a fetchone() would leave the result open on the caller's connection.
    rows = con.execute(_LAST_DRAWN_SQL).fetchall()
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


@dataclass(frozen=True)
class StoreFacts:
    """What the store says about drawn samples, read once for every stratum."""

    last_drawn: str | None
    prefixes: dict[tuple[str, str], tuple[IntArray, FloatArray, FloatArray]]  # rank, error, c
    unclear: dict[tuple[str, str], int]
    new_version_weeks: dict[str, int]  # per sample
    first_seen: dict[tuple[str, str], dt.datetime]

    def is_new(self, sample_id: str, week: str, doc_type: str, version: str) -> bool:
        """The version's status in the sample's design (a version never seen counts as new)."""
        weeks = self.new_version_weeks.get(sample_id, 0)
        if weeks <= 0:
            return False
        seen = self.first_seen.get((doc_type, version))
        return seen is None or seen >= Week(week).end - dt.timedelta(weeks=weeks)


def store_facts(con: duckdb.DuckDBPyConnection, strata: Sequence[StratumData]) -> StoreFacts:
    """The prefixes (every verdict), designs and first sightings behind ``strata``' cells."""
    samples = sorted({c.sample_id for s in strata for c in s.cells})
    rows = con.execute(_PREFIX_SQL, [samples]).fetchall() if samples else []
    grouped: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for sample_id, cell, turn, correct, confidence in rows:
        error = 1.0 if correct is None or int(correct) == 0 else 0.0
        grouped.setdefault((str(sample_id), str(cell)), []).append(
            (int(turn), error, float(confidence)))
    prefixes: dict[tuple[str, str], tuple[IntArray, FloatArray, FloatArray]] = {}
    unclear: dict[tuple[str, str], int] = {}
    for key, items in grouped.items():
        turns = np.array([i[0] for i in items], dtype=np.int64)
        errors = np.array([i[1] for i in items], dtype=float)
        prefixes[key] = (turns, errors, np.array([i[2] for i in items], dtype=float))
    for sample_id, cell, _, correct, _ in rows:
        if correct is None:
            key = (str(sample_id), str(cell))
            unclear[key] = unclear.get(key, 0) + 1
    designs = con.execute(_DESIGNS_SQL, [samples]).fetchall() if samples else []
    new_weeks = {str(sid): int(json.loads(text).get("new_version_weeks", 0))
                 for sid, _, text in designs}
    first_seen = {(str(d), str(v)): t for d, v, t in con.execute(_FIRST_SEEN_SQL).fetchall()}
    return StoreFacts(last_drawn_week(con), prefixes, unclear, new_weeks, first_seen)


@dataclass(frozen=True)
class ClosedCells:
    """A stratum's closed weeks, their usable cells and every prefix verdict, as arrays.

    ``cell_hist[h]`` is cell ``h``'s population per grid index at drawing;
    labels are the cells' prefixes (``label_error`` 1 for wrong or unclear).
    ``dropped`` names the cells whose population at drawing could not be
    rebuilt (their extractions count as errors).
    """

    weeks: tuple[str, ...]  # closed weeks with extractions of the stratum, oldest first
    open_weeks: tuple[str, ...]
    unaudited_weeks: tuple[str, ...]  # closed weeks without a usable cell
    week_hist: IntArray  # (weeks, 201): population of each closed week now
    cells: tuple[AuditCell, ...]
    cell_week: IntArray
    cell_hist: IntArray  # (cells, 201)
    label_cell: IntArray
    label_k: IntArray
    label_rank: IntArray
    label_error: FloatArray
    dropped: tuple[str, ...]
    n_unclear: int

    @property
    def n_population(self) -> int:
        return int(self.week_hist.sum())

    @property
    def n_labels(self) -> int:
        return int(self.label_cell.size)

    @property
    def planned_prob(self) -> FloatArray:
        return np.array([c.planned_prob for c in self.cells], dtype=float)

    def population_above(self) -> IntArray:
        """Closed extractions at or above each grid index."""
        total = self.week_hist.sum(axis=0)
        return np.cumsum(total[::-1])[::-1].astype(np.int64)

    def cell_above(self, k: int) -> IntArray:
        """``N_h(t)`` of every cell at grid index ``k``."""
        return self.cell_hist[:, k:].sum(axis=1).astype(np.int64)  # type: ignore[no-any-return]

    def planned_above(self) -> FloatArray:
        """Planned labels (``pi_h N_h(t)``, the design's, never the verdicts) above each index."""
        suffix = np.cumsum(self.cell_hist[:, ::-1], axis=1)[:, ::-1]
        return (self.planned_prob[:, None] * suffix).sum(axis=0)  # type: ignore[no-any-return]

    def accuracy_above(self) -> FloatArray:
        """Stratified accuracy of the labelled cells above each grid index (NaN without labels).

        ``1 - sum_h W_h p_h`` over the cells with labels above the index, as
        :func:`fieldtrust.calibration.weekly.week_rate` computes it for one set of cells.
        """
        n_cells = len(self.cells)
        size = np.cumsum(self.cell_hist[:, ::-1], axis=1)[:, ::-1].astype(float)
        flat = self.label_cell * N_GRID + self.label_k
        counts = np.bincount(flat, minlength=n_cells * N_GRID).reshape(n_cells, N_GRID)
        errors = np.bincount(flat, weights=self.label_error,
                             minlength=n_cells * N_GRID).reshape(n_cells, N_GRID)
        n = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1].astype(float)
        s = np.cumsum(errors[:, ::-1], axis=1)[:, ::-1]
        labelled = n > 0
        weight = np.where(labelled, size, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(labelled, s / np.maximum(n, 1), 0.0)
            out: FloatArray = 1.0 - (weight * rate).sum(axis=0) / weight.sum(axis=0)
        return out

    def _blocks(self) -> tuple[Blocks, Labels]:
        design = Blocks(
            block_hist=self.week_hist if self.weeks else np.zeros((1, N_GRID), dtype=np.int64),
            cell_block=self.cell_week,
            cell_pi=np.maximum(self.planned_prob, 1e-12),
            cell_cap=self.cell_hist.sum(axis=1).astype(float),
        )
        labels = Labels(k=self.label_k, correct=1.0 - self.label_error,
                        weight=np.ones(self.label_k.size), cell=self.label_cell,
                        u=np.zeros(self.label_k.size))
        return design, labels

    def threshold_cells(self, ks: Sequence[int], *, prior_error: float,
                        target: float) -> list[ThresholdCells]:
        """The cells above each grid index (high to low), with their bets and unaccounted mass."""
        design, labels = self._blocks()
        with np.errstate(invalid="ignore", divide="ignore"):  # cells empty above t bet 0
            return threshold_cells(
                design, labels, ks, cell_hist=self.cell_hist, prn_rank=self.label_rank,
                planned_pi=self.planned_prob, cell_week=self.cell_week,
                prior_error=prior_error, target=target)

    def week_evidence(self, candidate: ThresholdCells) -> list[WeekEvidence]:
        """Each closed week's cells above the candidate, oldest first (for stability)."""
        out = []
        for w, week in enumerate(self.weeks):
            mine = tuple(c for c, h in zip(candidate.cells, self.cell_week, strict=True)
                         if h == w)
            out.append(WeekEvidence(week, mine))
        return out


def _cell_hist(data: StratumData, facts: StoreFacts, cell: AuditCell) -> IntArray | None:
    """The cell's population per grid index at drawing, or None when it cannot be rebuilt."""
    span = band_range(cell.band)
    if span is None:
        return None
    lo, hi = span
    hist = np.zeros(N_GRID, dtype=np.int64)
    for (week, version), counts in data.week_version_hist.items():
        if week != cell.week:
            continue
        new = facts.is_new(cell.sample_id, week, data.doc_type, version)
        if (cell.version_status == "new") == new:
            hist[lo:hi] += counts[lo:hi]
    return hist if int(hist.sum()) == cell.n_population else None


def closed_cells(data: StratumData, facts: StoreFacts) -> ClosedCells:
    """The stratum's closed weeks as :class:`ClosedCells` (see the module's description)."""
    last = facts.last_drawn
    present = sorted(data.week_hist)
    weeks = tuple(w for w in present if last is not None and w <= last)
    open_weeks = tuple(w for w in present if last is None or w > last)
    index = {w: i for i, w in enumerate(weeks)}
    cells: list[AuditCell] = []
    hists: list[IntArray] = []
    dropped: list[str] = []
    label_parts: list[tuple[int, IntArray, FloatArray, FloatArray]] = []
    n_unclear = 0
    for cell in data.cells:
        if cell.week not in index:
            continue
        hist = _cell_hist(data, facts, cell)
        prefix = facts.prefixes.get((cell.sample_id, cell.cell))
        if hist is None or prefix is None:
            dropped.append(f"{cell.week} {cell.cell}")
            continue
        label_parts.append((len(cells), *prefix))
        n_unclear += facts.unclear.get((cell.sample_id, cell.cell), 0)
        cells.append(cell)
        hists.append(hist)
    week_hist = np.vstack([data.week_hist[w] for w in weeks]) if weeks else np.zeros(
        (0, N_GRID), dtype=np.int64)
    audited = {c.week for c in cells}
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    return ClosedCells(
        weeks=weeks,
        open_weeks=open_weeks,
        unaudited_weeks=tuple(w for w in weeks if w not in audited),
        week_hist=week_hist.astype(np.int64),
        cells=tuple(cells),
        cell_week=np.array([index[c.week] for c in cells], dtype=np.int64),
        cell_hist=np.vstack(hists) if hists else np.zeros((0, N_GRID), dtype=np.int64),
        label_cell=np.concatenate([np.full(p[1].size, p[0], dtype=np.int64)
                                   for p in label_parts] or [empty_i]),
        label_k=np.concatenate([grid_index(p[3]) for p in label_parts] or [empty_i]),
        label_rank=np.concatenate([p[1] for p in label_parts] or [empty_i]),
        label_error=np.concatenate([p[2] for p in label_parts] or [empty_f]),
        dropped=tuple(dropped),
        n_unclear=n_unclear,
    )


def closed_part(data: StratumData, weeks: tuple[str, ...]) -> StratumData:
    """The stratum restricted to ``weeks`` (its closed ones): population, cells and labels."""
    keep = set(weeks)
    mine = np.array([str(w) in keep for w in data.week], dtype=bool)
    week_version = {key: h for key, h in data.week_version_hist.items() if key[0] in keep}
    versions: dict[str, IntArray] = {}
    for (_, version), hist in week_version.items():
        versions[version] = versions.get(version, np.zeros(N_GRID, dtype=np.int64)) + hist
    week_hist = {w: h for w, h in data.week_hist.items() if w in keep}
    return dataclasses.replace(
        data,
        n_population=int(sum(int(h.sum()) for h in week_hist.values())),
        week_hist=week_hist,
        version_hist=versions,
        week_version_hist=week_version,
        cells=tuple(c for c in data.cells if c.week in keep),
        **data.label_arrays(mine),
    )
