"""Read a store into per-stratum arrays: population counts, audit design, labels.

The population is never loaded row by row: one SQL aggregation gives counts
per (doc_type, field, form version, week, 0.005-wide confidence step), a few
hundred thousand rows at most for ten million extractions. Labels and their
weights come from :func:`fieldtrust.store.labelled.labelled_items` only.

How a stratum's population is split for the certified bound
(:mod:`fieldtrust.calibration.design`), STATS.md sections 2, 6 and 10:

* only design-based labels enter (audit labels in their cell's labelled PRN
  prefix, with ``pi = prefix_h / N_h``, and labels of files declared a random
  sample); non-random labels are counted (``labels_by_provenance``) and kept
  apart (``other_confidence``, ``other_correct``) for recalibration only.
* a week is *covered* for a stratum when it holds design-based labels of it.
  An audited week (one with usable audit cells) is split into one block per
  confidence band of its sample (when the bands sit on the 0.005 grid and do
  not overlap; otherwise the whole week is one block), each holding the
  sample's cells that have a labelled prefix, with their population at
  drawing time as the cap. A cell without one is no cell: its extractions
  count as errors in the bound. A week covered only by a declared random
  sample is one block with one cell. Random-import labels in an audited week
  are left out of the bound (the audit describes that population) but count
  in point estimates.
* every uncovered week of the window is one more block without cells: its
  extractions count as errors in the bound, and point estimates say they do
  not cover it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.design import GRID, N_GRID, Blocks, Labels, grid_index
from fieldtrust.store.labelled import PROVENANCES, labelled_items
from fieldtrust.store.rollup import is_current, population_counts, segment_counts
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import Week

_STRATA_SQL = """
SELECT DISTINCT doc_type, field FROM {table} WHERE {where} ORDER BY doc_type, field
"""

_CELLS_SQL = """
SELECT s.week, c.sample_id, c.cell, c.doc_type, c.field, c.band, c.n_population,
       c.inclusion_prob, c.version_status
FROM audit_cells c JOIN audit_samples s USING (sample_id)
WHERE s.week IN (SELECT unnest(?::VARCHAR[]))
ORDER BY s.week, c.doc_type, c.field, c.band, c.cell
"""

_BAND = re.compile(r"^\s*\[\s*([0-9.eE+-]+)\s*,\s*([0-9.eE+-]+)\s*([\]\)])\s*$")


@dataclass(frozen=True)
class AuditCell:
    """One cell of an audited week with a labelled prefix: ``pi = prefix / N_h``.

    ``planned_prob`` is the design's ``n_h / N_h`` at drawing (what the
    anytime certificate's bets are fixed from), ``sample_id`` and
    ``version_status`` locate the cell's items and population.
    """

    week: str
    cell: str
    band: str
    inclusion_prob: float
    n_population: int
    sample_id: str = ""
    planned_prob: float = 1.0
    version_status: str = "established"


@dataclass(frozen=True)
class StratumData:
    """Everything the calibration engine needs about one (doc_type, field) in a scope."""

    doc_type: str
    field: str
    n_population: int
    mean_confidence: float
    week_hist: dict[str, IntArray]  # population per grid index, by ISO week
    version_hist: dict[str, IntArray]  # population per grid index, by form version
    cells: tuple[AuditCell, ...]
    confidence: FloatArray  # per label, exact stated confidence
    correct: FloatArray
    weight: FloatArray
    inclusion_prob: FloatArray
    from_audit: npt.NDArray[np.bool_]
    week: npt.NDArray[np.object_]
    form_version: npt.NDArray[np.object_]
    u: FloatArray  # permanent uniform number per label, for thinning
    cell: npt.NDArray[np.object_] = dataclass_field(
        default_factory=lambda: np.zeros(0, dtype=object))  # audit cell id, '' for imports
    week_version_hist: dict[tuple[str, str], IntArray] = dataclass_field(default_factory=dict)
    labels_by_provenance: dict[str, int] = dataclass_field(default_factory=dict)
    other_confidence: FloatArray = dataclass_field(default_factory=lambda: np.zeros(0))
    other_correct: FloatArray = dataclass_field(default_factory=lambda: np.zeros(0))
    design: Blocks = dataclass_field(init=False, repr=False)
    labels: Labels = dataclass_field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.cell.size != self.correct.size:
            object.__setattr__(self, "cell", np.full(self.correct.size, "", dtype=object))
        design, labels = build_design(self, tuple(self.week_hist))
        object.__setattr__(self, "design", design)
        object.__setattr__(self, "labels", labels)

    def label_arrays(self, mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
        """The per-label arrays restricted to ``mask``, by field name (for ``replace``)."""
        return {name: getattr(self, name)[mask] for name in LABEL_ARRAYS}

    @functools.cached_property
    def label_rows_by_week(self) -> dict[str, IntArray]:
        """Positions of the labels of each week (computed once: designs are built per week)."""
        names, codes = np.unique(self.week.astype(str), return_inverse=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(names.size + 1))
        return {str(w): order[bounds[i]:bounds[i + 1]] for i, w in enumerate(names)}

    @property
    def n_labeled(self) -> int:
        return int(self.correct.size)

    @property
    def population_hist(self) -> IntArray:
        return self.design.population_hist

    @functools.cached_property
    def coverage(self) -> Coverage:
        """Which weeks of the window the design-based labels cover, and how many extractions."""
        return coverage_of(self)


#: The fields of :class:`StratumData` that hold one entry per design-based label.
LABEL_ARRAYS = ("confidence", "correct", "weight", "inclusion_prob", "from_audit", "week",
                "form_version", "u", "cell")


def empty_stratum(doc_type: str, field_name: str) -> StratumData:
    """A stratum with no extractions in the scope (listed, never a candidate)."""
    none = np.zeros(0)
    return StratumData(
        doc_type=doc_type,
        field=field_name,
        n_population=0,
        mean_confidence=float("nan"),
        week_hist={},
        version_hist={},
        cells=(),
        confidence=none,
        correct=none,
        weight=none,
        inclusion_prob=none,
        from_audit=np.zeros(0, dtype=bool),
        week=np.zeros(0, dtype=object),
        form_version=np.zeros(0, dtype=object),
        u=none,
    )


def permanent_uniform(ids: pa.Array | pa.ChunkedArray) -> FloatArray:
    """A number in [0, 1) per id, fixed forever: FNV-1a over the UTF-8 bytes, then splitmix64.

    Thinning needs numbers that cannot depend on a label's verdict and never
    change between runs or versions; this reads Arrow's buffers directly and
    is about ten times faster than md5 on 100,000 ids.

    References
    ----------
    Fowler, Noll & Vo, FNV-1a hash; Steele, Lea & Flood (2014), splitmix64.
    """
    chunked = pa.chunked_array([ids]) if isinstance(ids, pa.Array) else ids
    if len(chunked) == 0:
        return np.zeros(0)
    array = chunked.combine_chunks().cast(pa.large_string())
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[
        array.offset : array.offset + len(array) + 1
    ]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.zeros(1, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    h = np.full(len(array), np.uint64(0xCBF29CE484222325))
    prime = np.uint64(0x100000001B3)
    last = max(data.size - 1, 0)
    with np.errstate(over="ignore"):
        for j in range(int(lengths.max(initial=0))):
            byte = data[np.minimum(starts + j, last)].astype(np.uint64)
            h = np.where(lengths > j, (h ^ byte) * prime, h)
        # splitmix64 finaliser: spreads FNV's weak low bits over the whole word.
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@functools.lru_cache(maxsize=4096)  # a handful of band texts, parsed per week and stratum
def band_range(band: str) -> tuple[int, int] | None:
    """Grid indices ``[lo, hi)`` a band covers, or None when it is off the grid or unreadable."""
    match = _BAND.match(band)
    if not match:
        return None
    lo, hi = float(match.group(1)), float(match.group(2))
    lo_k, hi_k = lo * GRID, hi * GRID
    if abs(lo_k - round(lo_k)) > 1e-6 or abs(hi_k - round(hi_k)) > 1e-6 or not 0 <= lo < hi <= 1:
        return None
    closed = match.group(3) == "]"
    end = round(hi_k) + (1 if closed and round(hi_k) == GRID else 0)
    if closed and round(hi_k) != GRID:
        return None  # a closed upper end inside the grid shares a step with the next band
    return round(lo_k), end


def _week_blocks(cells: Sequence[AuditCell]) -> list[tuple[str, tuple[int, int]]] | None:
    """The bands of one audited week as disjoint grid ranges, or None to use one block."""
    ranges: dict[str, tuple[int, int]] = {}
    for cell in cells:
        span = band_range(cell.band)
        if span is None:
            return None
        ranges[cell.band] = span
    ordered = sorted(ranges.items(), key=lambda item: item[1])
    for (_, a), (_, b) in itertools.pairwise(ordered):
        if b[0] < a[1]:
            return None
    return ordered


def _audited_week(
    week_cells: Sequence[AuditCell],
    week_hist: IntArray,
    label_cell_id: npt.NDArray[np.object_],
    label_index: IntArray,
    label_k: IntArray,
    parts: _Parts,
    label_cell: IntArray,
) -> None:
    """Blocks (one per band) and cells of one audited week; assigns its audit labels."""
    blocks = _week_blocks(week_cells)
    spans = blocks if blocks else [("*", (0, N_GRID))]
    covered = np.zeros(N_GRID, dtype=bool)
    ids = label_cell_id[label_index]
    for band, (lo, hi) in spans:
        hist = np.zeros(N_GRID, dtype=np.int64)
        hist[lo:hi] = week_hist[lo:hi]
        block = parts.add_block(hist)
        covered[lo:hi] = True
        for c in week_cells:
            if blocks is not None and c.band != band:
                continue
            cell = parts.add_cell(block, c.inclusion_prob, float(c.n_population))
            label_cell[label_index[ids == c.cell]] = cell
    del label_k
    if not covered.all():
        # Confidences no band of the sample covers: population without a design.
        parts.add_block(np.where(covered, 0, week_hist))


@dataclass
class _Parts:
    """Blocks and cells of a design as they are collected."""

    hists: list[IntArray] = dataclass_field(default_factory=list)
    cell_block: list[int] = dataclass_field(default_factory=list)
    cell_pi: list[float] = dataclass_field(default_factory=list)
    cell_cap: list[float] = dataclass_field(default_factory=list)

    def add_block(self, hist: npt.ArrayLike) -> int:
        self.hists.append(np.asarray(hist, dtype=np.int64))
        return len(self.hists) - 1

    def add_cell(self, block: int, pi: float, cap: float) -> int:
        self.cell_block.append(block)
        self.cell_pi.append(pi)
        self.cell_cap.append(cap)
        return len(self.cell_pi) - 1

    def design(self) -> Blocks:
        return Blocks(
            block_hist=np.vstack(self.hists or [np.zeros(N_GRID, dtype=np.int64)]),
            cell_block=np.asarray(self.cell_block, dtype=np.int64),
            cell_pi=np.asarray(self.cell_pi, dtype=float),
            cell_cap=np.asarray(self.cell_cap, dtype=float),
        )


def _split_weeks(data: StratumData, weeks: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Weeks (of ``weeks``) with usable audit cells, and weeks covered by a random import only."""
    audited_weeks = {c.week for c in data.cells}
    audited = [w for w in weeks if w in audited_weeks]
    rows = data.label_rows_by_week
    random = [
        w for w in weeks if w not in audited_weeks and w in rows
        and bool(np.any(~data.from_audit[rows[w]]))
    ]
    return audited, random


def build_design(data: StratumData, weeks: tuple[str, ...]) -> tuple[Blocks, Labels]:
    """Blocks, cells and label-to-cell assignment of one stratum restricted to ``weeks``."""
    label_k = grid_index(data.confidence)
    label_cell = np.full(data.correct.size, -1, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    by_week = {w: data.label_rows_by_week.get(w, none) for w in weeks}
    keep = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *by_week.values()]))
    cells_by_week: dict[str, list[AuditCell]] = {}
    for cell in data.cells:
        cells_by_week.setdefault(cell.week, []).append(cell)

    parts = _Parts()
    audited, random = _split_weeks(data, weeks)
    for week in audited:
        audit_rows = by_week[week][data.from_audit[by_week[week]]]
        _audited_week(cells_by_week[week], data.week_hist.get(week, np.zeros(N_GRID, np.int64)),
                      data.cell, audit_rows, label_k, parts, label_cell)
    for week in random:
        hist = data.week_hist.get(week)
        if hist is None:
            continue
        block = parts.add_block(hist)
        imported = by_week[week][~data.from_audit[by_week[week]]]
        pi = float(np.min(data.inclusion_prob[imported]))
        label_cell[imported] = parts.add_cell(block, min(1.0, pi), float(hist.sum()))
    others = [w for w in weeks if w not in audited and w not in random and w in data.week_hist]
    if others:
        parts.add_block(np.sum([data.week_hist[w] for w in others], axis=0))

    labels = Labels(
        k=label_k[keep],
        correct=data.correct[keep],
        weight=data.weight[keep],
        cell=label_cell[keep],
        u=data.u[keep],
    )
    return parts.design(), labels


@dataclass(frozen=True)
class Coverage:
    """What the design-based labels of a stratum speak for (STATS.md section 2).

    ``covered_weeks`` hold an audit with a labelled prefix or a declared random
    sample; ``uncovered_weeks`` are the other weeks of the window with
    extractions. ``n_population_covered`` counts the extractions of the cells
    (and random-sample weeks) the labels represent.
    """

    covered_weeks: tuple[str, ...]
    uncovered_weeks: tuple[str, ...]
    n_population: int
    n_population_covered: int

    def text(self) -> str:
        """"covers W48: 4,000 of 32,000 extractions" (or "covers no week ...").

        Runs of consecutive weeks read as one: "covers W41..W48, W50".
        """
        if not self.covered_weeks:
            return f"covers no week: 0 of {self.n_population:,} extractions have an audit"
        weeks = ", ".join(_week_runs(self.covered_weeks))
        return f"covers {weeks}: {self.n_population_covered:,} of {self.n_population:,} extractions"


def _week_runs(weeks: tuple[str, ...]) -> list[str]:
    """ISO weeks as runs, without the year unless they span two: ("W41..W44", "W46")."""
    runs: list[list[str]] = []
    for week in sorted(weeks):
        if runs and Week(runs[-1][-1]).shift(1) == week:
            runs[-1].append(week)
        else:
            runs.append([week])
    short = {w: w.split("-", 1)[-1] for run in runs for w in run}
    if len({w.split("-", 1)[0] for w in weeks}) > 1:  # across a new year: keep the year
        short = {w: w for w in short}
    return [short[r[0]] if len(r) == 1 else f"{short[r[0]]}..{short[r[-1]]}" for r in runs]


def coverage_of(data: StratumData) -> Coverage:
    """The :class:`Coverage` of one stratum over its window (the weeks with extractions)."""
    weeks = tuple(sorted(data.week_hist))
    audited, random = _split_weeks(data, weeks)
    covered = sorted(set(audited) | set(random))
    n_covered = sum(c.n_population for c in data.cells if c.week in audited)
    n_covered += sum(int(data.week_hist[w].sum()) for w in random)
    return Coverage(
        covered_weeks=tuple(covered),
        uncovered_weeks=tuple(w for w in weeks if w not in covered),
        n_population=data.n_population,
        n_population_covered=min(int(n_covered), data.n_population),
    )


def strata_names(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> list[tuple[str, str]]:
    """Every (doc_type, field) in the store matching ``scope``'s filters other than weeks."""
    unweeked = Scope(
        doc_types=scope.doc_types, form_versions=scope.form_versions, fields=scope.fields
    )
    table = "extraction_counts r" if is_current(con) else "extractions r"
    where, params = unweeked.where("r")
    rows = con.sql(_STRATA_SQL.format(table=table, where=where), params=params).fetchall()
    return [(str(d), str(f)) for d, f in rows]


#: Joins a form version and an extractor version into a segment's name (SEGMENT_SEP free text).
SEGMENT_SEP = "\x1e"


def segment_name(form_version: str, extractor_version: str) -> str:
    """The key of one segment (form version x extractor version) in segment-keyed data."""
    return f"{form_version}{SEGMENT_SEP}{extractor_version}"


def segment_parts(name: str) -> tuple[str, str]:
    """(form_version, extractor_version) of :func:`segment_name`'s key."""
    form_version, _, extractor_version = name.partition(SEGMENT_SEP)
    return form_version, extractor_version


def _population(con: duckdb.DuckDBPyConnection, scope: Scope, segments: bool) -> pa.Table:
    """Counts per (doc_type, field, form_version, week, k), sorted by stratum.

    ``segments``: the form_version column names the segment instead
    (:func:`segment_name`), counted from the stored rows.
    """
    counts = segment_counts(con, scope) if segments else population_counts(con, scope)
    return counts.sort_by([("doc_type", "ascending"), ("field", "ascending")])


def _stratum_starts(population: pa.Table) -> IntArray:
    """Row where each stratum starts in the sorted population counts."""
    rows = population.num_rows
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    changed = np.zeros(rows, dtype=bool)
    changed[0] = True
    for name in ("doc_type", "field"):
        column = population.column(name)
        differs = pc.not_equal(column.slice(1), column.slice(0, rows - 1))
        changed[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    return np.flatnonzero(changed).astype(np.int64)


def _codes(column: pa.ChunkedArray) -> tuple[IntArray, list[str]]:
    """Integer codes of a string column and the strings they stand for."""
    encoded = column.combine_chunks().dictionary_encode()
    return (
        np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
        [str(v) for v in encoded.dictionary.to_pylist()],
    )


def _hists(codes: IntArray, names: list[str], k: IntArray, n: IntArray) -> dict[str, IntArray]:
    """Population per grid index for each code present in ``codes``."""
    flat = np.bincount(codes * N_GRID + k, weights=n, minlength=len(names) * N_GRID)
    table = flat.reshape(len(names), N_GRID).astype(np.int64)
    return {names[c]: table[c] for c in np.unique(codes)}


def _cells_by_stratum(
    con: duckdb.DuckDBPyConnection, weeks: list[str], prefix_prob: dict[tuple[str, str], float]
) -> dict[tuple[str, str], tuple[AuditCell, ...]]:
    """Cells of each week's current sample that hold a labelled prefix, by stratum.

    ``prefix_prob`` maps (sample_id, cell) of the design-based audit labels to
    their probability; only those cells are kept.
    """
    out: dict[tuple[str, str], list[AuditCell]] = {}
    rows = con.sql(_CELLS_SQL, params=[weeks]).fetchall()
    for week, sample_id, cell, doc_type, field_name, band, n_pop, planned, status in rows:
        pi = prefix_prob.get((str(sample_id), str(cell)))
        if pi is None or int(n_pop) <= 0:
            continue  # no design-based label yet: the cell's extractions stay unaccounted
        out.setdefault((doc_type, field_name), []).append(
            AuditCell(str(week), str(cell), str(band), float(pi), int(n_pop), str(sample_id),
                      float(planned), str(status)))
    return {stratum: tuple(cells) for stratum, cells in out.items()}


def load_strata(
    con: duckdb.DuckDBPyConnection, scope: Scope = Scope(), *, segments: bool = False
) -> list[StratumData]:
    """Per-stratum arrays for every (doc_type, field) with extractions in ``scope``.

    Sorted by (doc_type, field). One aggregation over the extractions, one
    read of the labelled items, one read of the audit cells; the rest is
    numpy on a few thousand rows per stratum. ``segments``: the data's
    form-version axis (``version_hist``, ``week_version_hist``,
    ``form_version``) holds segments instead, form version x extractor
    version (:func:`segment_name`), so the form-version checks of
    :mod:`fieldtrust.calibration.stability` certify each segment on its own.
    """
    population = _population(con, scope, segments)
    k = population.column("k").to_numpy().astype(np.int64)
    n = population.column("n").to_numpy().astype(np.int64)
    sum_c = population.column("sum_confidence").to_numpy().astype(float)
    week_code, week_names = _codes(population.column("week"))
    version_code, version_names = _codes(population.column("form_version"))
    starts = _stratum_starts(population)
    ends = np.r_[starts[1:], population.num_rows].astype(np.int64)
    names = list(zip(
        population.column("doc_type").take(pa.array(starts)).to_pylist(),
        population.column("field").take(pa.array(starts)).to_pylist(),
        strict=True,
    ))
    everything = labelled_items(con, scope)
    design_based = np.asarray(everything.column("design_based").to_numpy(zero_copy_only=False),
                              dtype=bool)
    items = everything.filter(pa.array(design_based))
    # Non-random labels, kept apart for recalibration (audit labels waiting
    # behind a gap in their cell are neither: they wait).
    others = everything.filter(pc.equal(everything.column("provenance"), "non_random"))
    audit_rows = items.filter(items.column("from_audit"))
    prefix_prob = {
        (str(w), str(c)): float(p) for w, c, p in zip(
            audit_rows.column("sample_id").to_pylist(), audit_rows.column("cell").to_pylist(),
            audit_rows.column("inclusion_prob").to_pylist(), strict=True)
    }
    cells = _cells_by_stratum(con, sorted(week_names), prefix_prob)

    index_of = {f"{d}\x1f{f}": i for i, (d, f) in enumerate(names)}
    order, bounds = _by_stratum(items, index_of, len(names))
    other_order, other_bounds = _by_stratum(others, index_of, len(names))
    label_week_code, label_weeks = _codes(items.column("week"))
    label_version_code, label_versions = _codes(
        pc.binary_join_element_wise(items.column("form_version"),
                                    items.column("extractor_version"), SEGMENT_SEP)
        if segments else items.column("form_version"))
    columns = {
        "confidence": items.column("confidence").to_numpy().astype(float),
        "correct": items.column("correct").to_numpy().astype(float),
        "weight": items.column("weight").to_numpy().astype(float),
        "inclusion_prob": items.column("inclusion_prob").to_numpy().astype(float),
        "from_audit": items.column("from_audit").to_numpy().astype(bool),
        "week": np.asarray(label_weeks, dtype=object)[label_week_code]
        if items.num_rows else np.zeros(0, dtype=object),
        "form_version": np.asarray(label_versions, dtype=object)[label_version_code]
        if items.num_rows else np.zeros(0, dtype=object),
        "u": permanent_uniform(items.column("extraction_id")),
        "cell": np.asarray(pc.fill_null(items.column("cell"), "").to_pylist(), dtype=object)
        if items.num_rows else np.zeros(0, dtype=object),
    }
    other_confidence = others.column("confidence").to_numpy().astype(float)
    other_correct = others.column("correct").to_numpy().astype(float)
    provenance = np.asarray(everything.column("provenance").to_pylist(), dtype=object)
    all_order, all_bounds = _by_stratum(everything, index_of, len(names))
    combined = week_code * max(len(version_names), 1) + version_code

    strata = []
    for s, (doc_type, field_name) in enumerate(names):
        rows = slice(starts[s], ends[s])
        mine = order[bounds[s] : bounds[s + 1]]
        theirs = other_order[other_bounds[s] : other_bounds[s + 1]]
        kinds = provenance[all_order[all_bounds[s] : all_bounds[s + 1]]]
        total = int(n[rows].sum())
        pairs = _hists(combined[rows], [
            f"{w}\x1f{v}" for w in week_names for v in version_names
        ], k[rows], n[rows]) if version_names else {}
        strata.append(
            StratumData(
                doc_type=str(doc_type),
                field=str(field_name),
                n_population=total,
                mean_confidence=float(sum_c[rows].sum() / total),
                week_hist=_hists(week_code[rows], week_names, k[rows], n[rows]),
                version_hist=_hists(version_code[rows], version_names, k[rows], n[rows]),
                cells=cells.get((str(doc_type), str(field_name)), ()),
                week_version_hist={tuple(key.split("\x1f", 1)): h  # type: ignore[misc]
                                   for key, h in pairs.items()},
                labels_by_provenance={p: int(np.sum(kinds == p)) for p in PROVENANCES},
                other_confidence=other_confidence[theirs],
                other_correct=other_correct[theirs],
                **{name: values[mine] for name, values in columns.items()},
            )
        )
    return strata


def _by_stratum(
    items: pa.Table, index_of: dict[str, int], n_strata: int
) -> tuple[IntArray, IntArray]:
    """Label positions sorted by stratum, and where each stratum's run starts."""
    if items.num_rows == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(n_strata + 1, dtype=np.int64)
    label_key = pc.binary_join_element_wise(items.column("doc_type"), items.column("field"), "\x1f")
    key_code, key_names = _codes(label_key)
    label_stratum = np.array([index_of.get(name, -1) for name in key_names],
                             dtype=np.int64)[key_code]
    order = np.argsort(label_stratum, kind="stable")
    bounds = np.searchsorted(label_stratum[order], np.arange(n_strata + 1))
    return order.astype(np.int64), bounds.astype(np.int64)
