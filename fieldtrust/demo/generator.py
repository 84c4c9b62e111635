"""Draw the demo population and its hidden truth, vectorised with numpy.

The result depends on ``(seed, rows, end_week, weeks)`` only: never on today's
date, the machine or the order of anything. Numbers come from independent
streams spawned from one ``np.random.default_rng(seed)``, so changing how one
part is drawn does not reshuffle the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from fieldtrust.demo import profiles
from fieldtrust.demo.readings import read_rows
from fieldtrust.demo.values import Documents, make_documents
from fieldtrust.errors import InputError
from fieldtrust.store.weeks import Week

DEFAULT_END_WEEK = "2026-W48"

#: Mon..Sun weights: offices scan on weekdays.
DAY_WEIGHTS = (1.0, 1.0, 1.0, 1.0, 0.95, 0.35, 0.15)
#: Weekly volume grows a little, as it does when a pipeline is rolled out.
WEEKLY_GROWTH = 0.03
#: Fields a second source (an ERP record, another OCR pass) can disagree on.
CONFLICT_FIELDS = frozenset(
    {"invoice_number", "po_number", "date", "vendor", "merchant", "buyer", "total"}
)


@dataclass(frozen=True)
class DemoData:
    """The demo rows (ingest columns) and the truth the reviewers will find."""

    extractions: pa.Table
    truth: pa.Table
    weeks: tuple[Week, ...]


@dataclass(frozen=True)
class _Rows:
    """Per row: its document, the document's type, and its (doc_type, field) stratum."""

    doc: npt.NDArray[np.int64]
    doc_type: npt.NDArray[np.int64]
    stratum: npt.NDArray[np.int64]


def demo_weeks(end_week: Week | str | None, weeks: int) -> tuple[Week, ...]:
    """The ISO weeks the demo spans, oldest first."""
    if weeks < 1:
        raise InputError(f"weeks must be at least 1, got {weeks}")
    end = Week(end_week or DEFAULT_END_WEEK)
    return tuple(end.shift(-k) for k in range(weeks - 1, -1, -1))


def _strata() -> list[tuple[int, str]]:
    return [(t, f) for t, spec in enumerate(profiles.DOC_TYPES) for f in spec.fields]


def _documents_for(rng: np.random.Generator, rows: int) -> npt.NDArray[np.int64]:
    """Document types, as many documents as it takes to fill ``rows`` rows."""
    shares = np.array([d.share for d in profiles.DOC_TYPES])
    n_fields = np.array([len(d.fields) for d in profiles.DOC_TYPES])
    guess = int(rows / float(shares @ n_fields) * 1.05) + 20
    doc_type = rng.choice(len(shares), size=guess, p=shares / shares.sum())
    filled = np.cumsum(n_fields[doc_type])
    return doc_type[: int(np.searchsorted(filled, rows)) + 1].astype(np.int64)


def _timestamps(
    rng: np.random.Generator, n: int, weeks: tuple[Week, ...]
) -> npt.NDArray[np.datetime64]:
    """Extraction times: growing weekly volume, weekdays, office hours (UTC)."""
    growth = 1.0 + WEEKLY_GROWTH * np.arange(len(weeks))
    week = rng.choice(len(weeks), size=n, p=growth / growth.sum())
    day = rng.choice(7, size=n, p=np.array(DAY_WEIGHTS) / sum(DAY_WEIGHTS))
    second = np.clip(rng.normal(13 * 3600, 3 * 3600, n), 0, 86_399).astype(np.int64)
    starts = np.array([w.start for w in weeks], dtype="datetime64[s]")
    offset = (day * 86_400 + second).astype("timedelta64[s]")
    return np.sort(starts[week] + offset)


def _week_index(
    times: npt.NDArray[np.datetime64], weeks: tuple[Week, ...]
) -> npt.NDArray[np.int64]:
    starts = np.array([w.start for w in weeks], dtype="datetime64[s]")
    return (np.searchsorted(starts, times, side="right") - 1).astype(np.int64)


def _form_versions(
    rng: np.random.Generator,
    doc_type: npt.NDArray[np.int64],
    week: npt.NDArray[np.int64],
    n_weeks: int,
) -> npt.NDArray[np.int64]:
    """Each document's layout, by its type's layout shares in its week."""
    most = max(len(d.versions) for d in profiles.DOC_TYPES)
    cum = np.ones((len(profiles.DOC_TYPES), n_weeks, most))
    for t, spec in enumerate(profiles.DOC_TYPES):
        for w in range(n_weeks):
            shares = np.cumsum(profiles.version_shares(spec, w, n_weeks))
            cum[t, w, : len(shares)] = shares
    u = rng.random(len(doc_type))
    picked = (u[:, None] >= cum[doc_type, week]).sum(axis=1)
    n_versions = np.array([len(d.versions) for d in profiles.DOC_TYPES])
    return np.asarray(np.minimum(picked, n_versions[doc_type] - 1), dtype=np.int64)


def _expand(doc_type: npt.NDArray[np.int64], rows: int) -> _Rows:
    """One row per (document, field), in document order, cut to exactly ``rows``."""
    n_fields = np.array([len(d.fields) for d in profiles.DOC_TYPES])
    offsets = np.concatenate([[0], np.cumsum(n_fields)[:-1]])
    counts = n_fields[doc_type]
    doc = np.repeat(np.arange(len(doc_type)), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    field_pos = np.arange(len(doc)) - starts
    types = doc_type[doc]
    return _Rows(doc[:rows], types[:rows], (offsets[types] + field_pos)[:rows])


#: The most rows the demo builds; it holds them all in memory at once.
MAX_ROWS = 20_000_000


def check_size(seed: int, rows: int) -> None:
    """Refuse a seed numpy cannot take or a row count outside ``1..MAX_ROWS``."""
    if not 1 <= rows <= MAX_ROWS:
        raise InputError(f"rows must be between 1 and {MAX_ROWS:,}, got {rows:,}")
    if seed < 0:
        raise InputError(f"seed must be 0 or more, got {seed}")


def generate_demo(
    seed: int = 7, rows: int = 300_000, end_week: str | None = None, weeks: int = 8
) -> DemoData:
    """Draw the demo extractions and their hidden truth.

    Parameters
    ----------
    seed
        Seed of ``np.random.default_rng``; the same seed and sizes give the
        same rows, ids and timestamps on every machine.
    rows
        Number of extractions (the last document may lose trailing fields).
    end_week, weeks
        The demo spans ``weeks`` ISO weeks ending at ``end_week``
        (default 2026-W48).
    """
    check_size(seed, rows)
    week_labels = demo_weeks(end_week, weeks)
    s_types, s_times, s_versions, s_values, s_conf, s_truth = np.random.default_rng(seed).spawn(6)

    doc_type = _documents_for(s_types, rows)
    times = _timestamps(s_times, len(doc_type), week_labels)
    doc_week = _week_index(times, week_labels)
    version = _form_versions(s_versions, doc_type, doc_week, weeks)
    tax_absent = np.array([d.tax_absent for d in profiles.DOC_TYPES])
    docs = make_documents(s_values, doc_type, times, tax_absent)
    r = _expand(doc_type, rows)

    confidence, unclear, slope = _confidence(s_conf, r, docs, version, doc_week, weeks)
    correct, conflict = _correctness(s_truth, r, confidence, unclear, slope)
    field = np.array([f for _, f in _strata()], dtype=object)[r.stratum]
    columns = read_rows(s_truth, docs, r.doc, field, correct, unclear, conflict)

    return _tables(r, version, times, confidence, correct, conflict, columns, week_labels)


def _tables(
    r: _Rows,
    version: npt.NDArray[np.int64],
    times: npt.NDArray[np.datetime64],
    confidence: npt.NDArray[np.float64],
    correct: npt.NDArray[np.bool_],
    conflict: npt.NDArray[np.bool_],
    columns: dict[str, list[str | None]],
    weeks: tuple[Week, ...],
) -> DemoData:
    """Assemble the ingest table and the truth table (strings by Arrow take, not per row)."""
    n_docs = int(r.doc.max()) + 1
    doc_id = _take([f"demo-{k:07d}" for k in range(n_docs)], r.doc)
    field_name = _take([f for _, f in _strata()], r.stratum)
    extraction_id = pc.binary_join_element_wise(doc_id, field_name, "/")
    most = max(len(d.versions) for d in profiles.DOC_TYPES)
    layouts = [
        (d.versions[k].name if k < len(d.versions) else "")
        for d in profiles.DOC_TYPES
        for k in range(most)
    ]
    extractions = pa.table(
        {
            "extraction_id": extraction_id,
            "doc_id": doc_id,
            "doc_type": _take([d.name for d in profiles.DOC_TYPES], r.doc_type),
            "form_version": _take(layouts, r.doc_type * most + version[r.doc]),
            "field": field_name,
            "value": pa.array(columns["value"], pa.string()),
            "value_status": pa.array(columns["status"], pa.string()),
            "confidence": pa.array(confidence, pa.float64()),
            "model": pa.repeat(pa.scalar(profiles.MODEL_NAME, pa.string()), len(r.doc)),
            "extracted_at": pa.array(times[r.doc].astype("datetime64[us]"), pa.timestamp("us")),
            "conflict": pa.array(conflict, pa.bool_()),
            "conflict_value": pa.array(columns["conflict_value"], pa.string()),
            "source_excerpt": pa.array(columns["excerpt"], pa.string()),
            # One extractor the whole demo long: its model is its version.
            "extractor_version": pa.repeat(pa.scalar(profiles.MODEL_NAME, pa.string()),
                                           len(r.doc)),
        }
    )
    truth = pa.table(
        {
            "extraction_id": extraction_id,
            "correct": pa.array(correct, pa.bool_()),
            "true_value": pa.array(columns["true_value"], pa.string()),
            "error_type": pa.array(columns["error_type"], pa.string()),
            "error_detail": pa.array(columns["error_detail"], pa.string()),
        }
    )
    return DemoData(extractions, truth, weeks)


def _take(values: list[str], index: npt.NDArray[np.int64]) -> pa.Array:
    """``values[index]`` as an Arrow string array."""
    return pa.array(values, pa.string()).take(pa.array(index))


def _confidence(
    rng: np.random.Generator,
    r: _Rows,
    docs: Documents,
    version: npt.NDArray[np.int64],
    doc_week: npt.NDArray[np.int64],
    n_weeks: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Stated confidence, the 'unclear' flag and the slope of every row."""
    strata = _strata()
    specs = [profiles.DOC_TYPES[t].fields[f] for t, f in strata]
    conf_a = np.array([p.conf_a for p in specs])[r.stratum]
    conf_b = np.array([p.conf_b for p in specs])[r.stratum]
    slope = np.array([p.slope for p in specs])[r.stratum]

    # factors[stratum, version]: the layout's slope factor on that field.
    factors = np.ones((len(strata), max(len(d.versions) for d in profiles.DOC_TYPES)))
    for s, (t, field) in enumerate(strata):
        for k, layout in enumerate(profiles.DOC_TYPES[t].versions):
            if not layout.fields or field in layout.fields:
                factors[s, k] = layout.slope_factor
    slope = slope * factors[r.stratum, version[r.doc]]
    for (doc_type, field), (last, factor) in profiles.DRIFT.items():
        drifted = np.array([t == _type_index(doc_type) and f == field for t, f in strata])
        late = doc_week[r.doc] >= n_weeks - last
        slope = np.where(drifted[r.stratum] & late, slope * factor, slope)

    hard_share = np.array([d.hard_docs for d in profiles.DOC_TYPES])
    hard = (rng.random(len(docs.doc_type)) < hard_share[docs.doc_type])[r.doc]
    unclear_share = np.array([d.unclear for d in profiles.DOC_TYPES])
    unclear = rng.random(len(r.doc)) < unclear_share[r.doc_type]
    conf_a = np.where(hard, 4.0, np.where(unclear, 3.0, conf_a))
    conf_b = np.where(hard, 2.0, np.where(unclear, 4.0, conf_b))
    confidence = np.clip(np.round(rng.beta(conf_a, conf_b), 3), 0.001, 0.999)
    return confidence, unclear, slope


def _type_index(name: str) -> int:
    return [d.name for d in profiles.DOC_TYPES].index(name)


def _correctness(
    rng: np.random.Generator,
    r: _Rows,
    confidence: npt.NDArray[np.float64],
    unclear: npt.NDArray[np.bool_],
    slope: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whether each row is right (the hidden truth), and which rows carry a conflict."""
    strata = _strata()
    p = np.where(unclear, profiles.UNCLEAR_CORRECT, profiles.p_correct(confidence, slope))
    correct = rng.random(len(r.doc)) < p
    # A second source disagrees far more often when the model is wrong; drawn after
    # the truth, so conflicts carry information without bending the calibration.
    may_conflict = np.array([f in CONFLICT_FIELDS for _, f in strata])[r.stratum] & ~unclear
    chance = np.where(correct, profiles.CONFLICT_IF_RIGHT, profiles.CONFLICT_IF_WRONG)
    conflict = may_conflict & (rng.random(len(r.doc)) < chance)
    return correct, conflict
