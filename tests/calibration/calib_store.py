"""Build calibration test stores by inserting rows with SQL.

Small row-level helpers (extractions, audit samples, cells, items, labels)
and one generator of a whole store: strata with known truth, weekly
stratified audit samples (bands x form-version status, boosted new
versions), every sampled item labelled from the truth.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd
from fieldtrust.store.bar import Bar
from fieldtrust.store.weeks import Week

from tests.conftest import Builder

BANDS = (0.0, 0.5, 0.8, 0.9, 0.95, 1.0)
EXTRACTION_COLUMNS = ("extraction_id", "doc_id", "doc_type", "form_version", "field", "value",
                      "value_status", "confidence", "extracted_at", "batch_id")


def band_label(lo: float, hi: float) -> str:
    return f"[{lo:.2f},{hi:.2f}{']' if hi >= 1 else ')'}"


def insert_extractions(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    """Insert extractions; columns extraction_id, doc_type, form_version, field,
    confidence, extracted_at (others get defaults; other columns are not stored)."""
    rows = frame.assign(doc_id=frame.get("doc_id", frame["extraction_id"]), value="v",
                        batch_id="test")
    Builder(con).extractions(rows[[c for c in EXTRACTION_COLUMNS if c in rows.columns]])


#: The certificate these stores are read with. Their samples are written here, not drawn
#: (no PRN order, no cell sizes at drawing), and their imports are declared random
#: samples: the one-look certificate reads both, the anytime-valid one only drawn weekly
#: samples (tests/calibration/test_anytime_store.py). Tests that certify on them ask for it.
ONE_LOOK = Bar(certificate="fixed")
#: The same ask for the CLI, as a view's environment setting.
ONE_LOOK_ENV = {"FIELDTRUST_CERTIFICATE": "fixed"}


def insert_sample(
    con: duckdb.DuckDBPyConnection,
    week: str,
    cells: pd.DataFrame,
    items: pd.DataFrame,
    *,
    version: int = 1,
) -> str:
    """One audit sample: cells (cell, doc_type, field, band, version_status,
    n_population, n_sample, inclusion_prob) and items (extraction_id, cell,
    inclusion_prob)."""
    sample_id = f"{week}/v{version}"
    design = json.dumps({"test": True, "week": week}, sort_keys=True)
    con.execute(
        "INSERT INTO audit_samples VALUES (?, ?, ?, 1, ?, 'sha', now()::TIMESTAMP, 'test')",
        [sample_id, week, version, design],
    )
    if len(cells):
        cell_rows = cells.assign(sample_id=sample_id)  # noqa: F841 (read by SQL)
        con.execute(
            "INSERT INTO audit_cells SELECT sample_id, cell, doc_type, field, band,"
            " version_status, n_population, n_sample, inclusion_prob FROM cell_rows"
        )
    if len(items):
        item_rows = items.assign(sample_id=sample_id)  # noqa: F841 (read by SQL)
        con.execute(
            "INSERT INTO audit_items (sample_id, extraction_id, cell, inclusion_prob, prn)"
            " SELECT sample_id, extraction_id, cell, inclusion_prob, 0.5 FROM item_rows"
        )
    return sample_id


def insert_labels(
    con: duckdb.DuckDBPyConnection,
    extraction_ids: Sequence[str],
    correct: Sequence[int | bool],
    *,
    sample_id: str | None = None,
    review_round: str = "primary",
    prefix: str = "L",
    random_sample: bool = True,
) -> None:
    """One label per extraction; verdict from ``correct``.

    Without ``sample_id`` the labels are an import; ``random_sample`` declares
    it a simple random sample (provenance ``random_import``), otherwise it is
    ``non_random`` (as labels from the review queue).
    """
    frame = pd.DataFrame(  # noqa: F841 (read by SQL)
        {
            "label_id": [f"{prefix}-{i}" for i in extraction_ids],
            "extraction_id": list(extraction_ids),
            "verdict": np.where(np.asarray(correct, dtype=bool), "correct", "incorrect"),
        }
    )
    batch = None
    if sample_id is None and random_sample:
        batch = "test-random-sample"
        con.execute(
            "INSERT INTO label_import_designs SELECT ?, 'random_sample', 'tester',"
            " now()::TIMESTAMP WHERE NOT EXISTS (SELECT 1 FROM label_import_designs"
            " WHERE batch_id = ?)", [batch, batch],
        )
    con.execute(
        "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, reviewer,"
        " review_round, labeled_at, import_batch_id)"
        " SELECT label_id, extraction_id, ?, verdict, 'tester', ?, now()::TIMESTAMP, ?"
        " FROM frame",
        [sample_id, "import" if sample_id is None and random_sample else review_round, batch],
    )


def week_rows(
    doc_type: str,
    field: str,
    week: str,
    confidence: np.ndarray,
    *,
    form_version: str = "v1",
    prefix: str | None = None,
) -> pd.DataFrame:
    """Extraction rows of one stratum in one week, one per confidence."""
    start, _ = Week(week).bounds()
    tag = prefix or f"{doc_type}.{field}.{form_version}.{week}"
    return pd.DataFrame(
        {
            "extraction_id": [f"{tag}.{i}" for i in range(confidence.size)],
            "doc_type": doc_type,
            "form_version": form_version,
            "field": field,
            "confidence": confidence,
            "extracted_at": [
                start + dt.timedelta(hours=1 + i % 100) for i in range(confidence.size)
            ],
        }
    )


def add_stratum(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    week: str,
    *,
    n: int,
    labelled: int,
    errors: int,
    low: float = 0.90,
    high: float = 0.999,
    form_version: str = "v1",
    errors_on: str = "random",
    seed: int = 0,
) -> pd.DataFrame:
    """Insert one stratum-week: ``n`` extractions, ``labelled`` of them labelled.

    Labels are imported (no audit design, so a simple random sample of their
    stratum); ``errors`` of them are incorrect, at random or (``errors_on="top"`` /
    ``"bottom"``) the most / least confident ones. Confidences are spread evenly
    over ``[low, high]``; labelled rows are every ``n // labelled``-th row.
    """
    rng = np.random.default_rng(seed)
    rows = week_rows(
        doc_type, field, week, np.round(np.linspace(low, high, n), 4), form_version=form_version
    )
    insert_extractions(con, rows)
    chosen = rows["extraction_id"].to_numpy()[:: max(n // max(labelled, 1), 1)][:labelled]
    correct = np.ones(chosen.size, dtype=bool)
    if errors_on == "top":  # the most confident labelled rows are the wrong ones
        correct[chosen.size - errors :] = False
    elif errors_on == "bottom":  # the least confident ones
        correct[:errors] = False
    else:
        correct[rng.choice(chosen.size, size=errors, replace=False)] = False
    insert_labels(con, chosen, correct, prefix=f"L-{doc_type}-{field}-{week}")
    return rows


def p_correct_default(c: np.ndarray) -> np.ndarray:
    """STATS.md's simulation: P(correct | c) = 1 - 1.6 (1 - c)."""
    return np.clip(1 - 1.6 * (1 - c), 0, 1)


@dataclass
class StratumSpec:
    doc_type: str
    field: str
    per_week: int = 2000
    beta_a: float = 8.0
    beta_b: float = 1.0
    p_correct: Callable[[np.ndarray], np.ndarray] = p_correct_default
    # form versions: name -> (share of volume, first week index, P(correct) multiplier on errors)
    versions: dict[str, tuple[float, int, float]] = field(
        default_factory=lambda: {"v1": (1.0, 0, 1.0)}
    )


@dataclass
class DesignSpec:
    rate: float = 0.02
    minimum: int = 10
    boost: float = 5.0
    new_weeks: int = 2
    bands: tuple[float, ...] = BANDS


def weeks_from(start: str, count: int) -> list[str]:
    first, _ = Week(start).bounds()
    return [
        f"{d.isocalendar()[0]}-W{d.isocalendar()[1]:02d}"
        for d in (first + dt.timedelta(weeks=i) for i in range(count))
    ]


def generate_population(
    specs: Sequence[StratumSpec], weeks: Sequence[str], rng: np.random.Generator
) -> pd.DataFrame:
    """Extractions with a hidden ``truth`` column and a ``status`` (new/established)."""
    frames = []
    for spec in specs:
        for w_index, week in enumerate(weeks):
            start, _ = Week(week).bounds()
            live = {v: s for v, s in spec.versions.items() if s[1] <= w_index}
            shares = np.array([s[0] for s in live.values()])
            names = list(live)
            version = rng.choice(names, size=spec.per_week, p=shares / shares.sum())
            c = np.round(rng.beta(spec.beta_a, spec.beta_b, size=spec.per_week), 4)
            scale = {v: s[2] for v, s in live.items()}
            is_new = {v: w_index - s[1] < 2 and s[1] > 0 for v, s in live.items()}
            error_scale = pd.Series(version).map(scale).to_numpy(dtype=float)
            p = 1 - np.clip((1 - spec.p_correct(c)) * error_scale, 0, 1)
            status = np.where(pd.Series(version).map(is_new).to_numpy(dtype=bool),
                              "new", "established")
            seconds = rng.integers(0, 7 * 86400, size=spec.per_week)
            ids = pd.Series(np.arange(spec.per_week)).astype(str)
            frames.append(
                pd.DataFrame(
                    {
                        "extraction_id": f"{spec.doc_type}.{spec.field}.{week}." + ids,
                        "doc_type": spec.doc_type,
                        "form_version": version,
                        "field": spec.field,
                        "confidence": c,
                        "extracted_at": np.datetime64(start, "s")
                        + seconds.astype("timedelta64[s]"),
                        "week": week,
                        "status": status,
                        "truth": rng.random(spec.per_week) < p,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def draw_samples(
    population: pd.DataFrame, design: DesignSpec, rng: np.random.Generator
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Per week: audit cells and sampled items (SRS per cell, boosted new versions)."""
    bands = np.asarray(design.bands)
    band_index = np.clip(np.searchsorted(bands, population["confidence"], side="right") - 1,
                         0, len(bands) - 2)
    labels = np.array([band_label(bands[i], bands[i + 1]) for i in range(len(bands) - 1)])
    population = population.assign(band=labels[band_index])
    cells_by_week: dict[str, pd.DataFrame] = {}
    items_by_week: dict[str, pd.DataFrame] = {}
    for week, week_pop in population.groupby("week", sort=True):
        cell_rows, item_rows = [], []
        for (doc_type, fld, band, status), members in week_pop.groupby(
            ["doc_type", "field", "band", "status"], sort=True
        ):
            n_pop = len(members)
            rate = design.rate * (design.boost if status == "new" else 1.0)
            n = min(n_pop, max(design.minimum, round(rate * n_pop)))
            pi = n / n_pop
            cell = f"{doc_type}|{fld}|{band}|{status}"
            cell_rows.append((cell, doc_type, fld, band, status, n_pop, n, pi))
            chosen = rng.choice(members["extraction_id"].to_numpy(), size=n, replace=False)
            item_rows.extend((e, cell, pi) for e in chosen)
        cells_by_week[str(week)] = pd.DataFrame(
            cell_rows,
            columns=["cell", "doc_type", "field", "band", "version_status", "n_population",
                     "n_sample", "inclusion_prob"],
        )
        items_by_week[str(week)] = pd.DataFrame(
            item_rows, columns=["extraction_id", "cell", "inclusion_prob"]
        )
    return cells_by_week, items_by_week


def build_store(
    con: duckdb.DuckDBPyConnection,
    specs: Sequence[StratumSpec],
    *,
    weeks: Sequence[str],
    design: DesignSpec | None = None,
    seed: int = 0,
    label_share: float = 1.0,
) -> pd.DataFrame:
    """Population, weekly audit samples, labels of the sampled items from the truth.

    Returns the population with its truth (for checks against the real accuracy).
    """
    rng = np.random.default_rng(seed)
    population = generate_population(specs, weeks, rng)
    insert_extractions(con, population)
    if design is None:
        return population
    cells, items = draw_samples(population, design, rng)
    truth = population.set_index("extraction_id")["truth"]
    for week in cells:
        sample_id = insert_sample(con, week, cells[week], items[week])
        ids = items[week]["extraction_id"].to_numpy()
        if label_share < 1.0:
            ids = ids[rng.random(ids.size) < label_share]
        insert_labels(con, ids, truth.loc[ids].to_numpy(), sample_id=sample_id)
    return population


def true_accuracy_above(population: pd.DataFrame, doc_type: str, fld: str, t: float) -> float:
    rows = population[(population["doc_type"] == doc_type) & (population["field"] == fld)]
    above = rows[rows["confidence"] >= t - 1e-12]
    return float(above["truth"].mean())


def synthetic_store(
    con: duckdb.DuckDBPyConnection, rows: int = 1_000_000, *, rate: float = 0.008, seed: int = 1
) -> pd.DataFrame:
    """20 strata (4 document types x 5 fields) over 8 weeks, ``rows`` extractions in all,
    a new form version (15%, twice the errors) in the last two weeks, weekly audit
    samples at ``rate`` (minimum 5 per cell): about 1% labelled. For timing runs.
    """
    rng = np.random.default_rng(seed)
    specs = []
    for doc_type in ("invoice", "printed_receipt", "handwritten_receipt", "purchase_order"):
        for fld in ("total", "tax", "date", "vendor", "number"):
            slope = float(rng.uniform(0.3, 2.5))
            specs.append(StratumSpec(
                doc_type, fld, per_week=rows // (20 * 8), beta_a=float(rng.uniform(6, 30)),
                p_correct=lambda c, s=slope: np.clip(1 - s * (1 - c), 0, 1),
                versions={"v1": (0.85, 0, 1.0), "v2": (0.15, 6, 2.0)},
            ))
    return build_store(con, specs, weeks=weeks_from("2026-W41", 8),
                       design=DesignSpec(rate=rate, minimum=5), seed=seed)
