"""Benchmark data: N demo extractions over 8 weeks, a store with about 1% labelled.

The rows come from the demo generator (:func:`fieldtrust.demo.generate_demo`)
in chunks of :data:`CHUNK_ROWS`: it is vectorised, but a few of its columns
(values, mistakes, source excerpts) are Python lists, about 0.8 GB per
million rows, so ten million in one go would need some 8 GB. Each chunk is an
independent demo population over the same 8 weeks with its own seed and its
own ``demoNN-`` document ids; their union has the demo's mix of document
types, form versions and miscalibration at any size.

The chunks are written to Parquet, then DuckDB sorts them by time into one
file, as a log arrives week by week. That file is what the ingest case
reads, and it is ingested once, through the validated library path, to build
the size's store. The audit history is real: each week's sample is drawn
with :func:`fieldtrust.sampling.draw.draw_sample` by the demo qa_lead (granted first, as
drawing is checked) and labelled from ``demo_truth`` by the
demo's simulated reviewers (:func:`fieldtrust.demo.reviewers.simulate_reviews`,
with their small error rate and double reviews), recalibration maps are fitted
and the demo users granted (:func:`fieldtrust.demo.users.ensure_demo_ready`),
and one automation candidate is approved, so every dashboard page has data.

Everything is cached under ``bench/.data/rows-N-seed-S/`` and reused while
:data:`GENERATOR_VERSION` and the manifest match.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: Rows generated per chunk: peak memory of the generator is about 0.8 GB.
CHUNK_ROWS = 1_000_000
#: Bump when the data a size produces changes, so stale caches are rebuilt
#: (3: every row has the demo's document location, so the review page shows a page).
GENERATOR_VERSION = 3
#: Base rate of the audit design the history is drawn with. The default design
#: (1%, boosted 5x for new form versions, which every version is in a store's
#: first two weeks) labels about 2.2% of 10M rows; half the base rate gives the
#: issue's "about 1%" (about 100,000 labels at 10M).
BASE_RATE = 0.005
DEFAULT_ROOT = Path(__file__).resolve().parent / ".data"
#: DuckDB's memory while sorting and ingesting: generous, but bounded on a shared machine.
BUILD_MEMORY_LIMIT = "6GB"


@dataclass(frozen=True)
class Dataset:
    """One benchmark size: its Parquet log, its store and what the store holds."""

    rows: int
    seed: int
    folder: Path
    parquet: Path
    store: Path
    labelled: int
    audit_items: int
    samples: int
    weeks: tuple[str, ...]
    build_seconds: float

    @property
    def label_share(self) -> float:
        return self.labelled / self.rows if self.rows else 0.0


def bench_design() -> Any:
    """The audit design of the benchmark's history and of its draw case."""
    from fieldtrust.sampling.design import Design

    return Design(base_rate=BASE_RATE)


def dataset_folder(rows: int, seed: int, root: Path = DEFAULT_ROOT) -> Path:
    return root / f"rows-{rows}-seed-{seed}"


def load_dataset(rows: int, seed: int, root: Path = DEFAULT_ROOT) -> Dataset | None:
    """The cached dataset of this size and seed, or None when it must be built."""
    folder = dataset_folder(rows, seed, root)
    manifest = folder / "manifest.json"
    if not manifest.exists():
        return None
    meta = json.loads(manifest.read_text())
    if meta.get("generator_version") != GENERATOR_VERSION or meta.get("rows") != rows:
        return None
    dataset = Dataset(
        rows=rows,
        seed=seed,
        folder=folder,
        parquet=folder / "extractions.parquet",
        store=folder / "store.duckdb",
        labelled=int(meta["labelled"]),
        audit_items=int(meta["audit_items"]),
        samples=int(meta["samples"]),
        weeks=tuple(meta["weeks"]),
        build_seconds=float(meta["build_seconds"]),
    )
    if not dataset.parquet.exists() or not dataset.store.exists():
        return None
    return dataset


def build_dataset(rows: int, seed: int, root: Path = DEFAULT_ROOT) -> Dataset:
    """Generate the Parquet log and build the store of one size (cached).

    Returns the cached dataset when one with this size, seed and generator
    version exists; otherwise rebuilds the folder from scratch.
    """
    cached = load_dataset(rows, seed, root)
    if cached is not None:
        return cached
    started = time.perf_counter()
    folder = dataset_folder(rows, seed, root)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "chunks").mkdir(parents=True)
    write_chunks(folder / "chunks", rows, seed)
    parquet = folder / "extractions.parquet"
    sort_log(folder / "chunks", parquet, folder / "tmp")
    store_path = folder / "store.duckdb"
    counts = build_store(store_path, parquet, folder / "chunks", seed)
    shutil.rmtree(folder / "tmp", ignore_errors=True)
    for chunk in (folder / "chunks").glob("extractions-*.parquet"):
        chunk.unlink()  # the sorted log holds them; truth chunks stay for reference
    meta = {
        "generator_version": GENERATOR_VERSION,
        "rows": rows,
        "seed": seed,
        **counts,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    (folder / "manifest.json").write_text(json.dumps(meta, indent=2))
    dataset = load_dataset(rows, seed, root)
    assert dataset is not None
    return dataset


def chunk_seed(seed: int, chunk: int) -> int:
    """An independent seed per chunk, from (seed, chunk) (numpy's SeedSequence)."""
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1, np.uint64)[0])


def _renamed(column: pa.ChunkedArray, chunk: int) -> pa.ChunkedArray:
    """``demo-0000001...`` becomes ``demo07-0000001...``: ids unique across chunks."""
    return pc.replace_substring(column, "demo-", f"demo{chunk:02d}-", max_replacements=1)


def write_chunks(folder: Path, rows: int, seed: int) -> None:
    """Demo populations of at most :data:`CHUNK_ROWS` rows each, as Parquet files."""
    from fieldtrust.demo import generate_demo
    from fieldtrust.demo.page_layout import with_locations

    n_chunks = max(1, math.ceil(rows / CHUNK_ROWS))
    for chunk in range(n_chunks):
        size = min(CHUNK_ROWS, rows - chunk * CHUNK_ROWS)
        data = generate_demo(chunk_seed(seed, chunk), size)
        extractions = data.extractions
        for name in ("extraction_id", "doc_id"):
            index = extractions.schema.get_field_index(name)
            extractions = extractions.set_column(index, name, _renamed(extractions[name], chunk))
        truth = data.truth.set_column(
            0, "extraction_id", _renamed(data.truth["extraction_id"], chunk)
        )
        # The page, box and uri of each value, as `fieldtrust demo` stores them: the
        # review benchmarks render the page a reviewer sees (uris name the renamed ids).
        extractions = with_locations(extractions, truth)
        pq.write_table(extractions, folder / f"extractions-{chunk:03d}.parquet")
        pq.write_table(truth, folder / f"truth-{chunk:03d}.parquet")
        del data, extractions, truth


def sort_log(chunks: Path, out: Path, tmp: Path) -> None:
    """One Parquet file of every chunk's rows in time order (DuckDB, bounded memory)."""
    import duckdb
    from fieldtrust.store.connection import DUCKDB_CONFIG

    tmp.mkdir(exist_ok=True)
    con = duckdb.connect(config=DUCKDB_CONFIG)
    try:
        con.execute(f"SET memory_limit = '{BUILD_MEMORY_LIMIT}'")
        con.execute("SET temp_directory = ?", [str(tmp)])
        con.execute("SET preserve_insertion_order = true")
        con.execute(
            "COPY (SELECT * FROM read_parquet(?) ORDER BY extracted_at, extraction_id)"
            " TO ? (FORMAT parquet, ROW_GROUP_SIZE 122880)",
            [str(chunks / "extractions-*.parquet"), str(out)],
        )
    finally:
        con.close()


def build_store(path: Path, parquet: Path, chunks: Path, seed: int) -> dict[str, Any]:
    """Ingest the log, add the demo truth, label eight weeks of audits, fit maps, approve one."""
    from fieldtrust.ingest.extractions import ingest_files

    from fieldtrust import store
    from fieldtrust.demo.reviewers import simulate_reviews
    from fieldtrust.demo.truth import create_truth_table
    from fieldtrust.demo.users import ensure_demo_ready

    building = path.with_name(path.name + ".building")
    building.unlink(missing_ok=True)
    con = store.connect(building)
    try:
        con.execute(f"SET memory_limit = '{BUILD_MEMORY_LIMIT}'")
        ingest_files(con, [parquet])
        create_truth_table(con)
        con.execute(
            "INSERT INTO demo_truth (extraction_id, correct, true_value, error_type, error_detail)"
            " SELECT extraction_id, correct, true_value, error_type, error_detail"
            " FROM read_parquet(?)",
            [str(chunks / "truth-*.parquet")],
        )
        # Every week fully labelled: the pandas baseline computes the figures of
        # complete audits (a partly labelled week is the demo's, not the benchmark's).
        _with_design(functools.partial(simulate_reviews, current_week_share=1.0), con, seed)
    finally:
        con.close()
    ensure_demo_ready(building)
    con = store.connect(building)
    try:
        _approve_one(con, signing_key(path))
        con.execute("CHECKPOINT")
        counts = _counts(con)
    finally:
        con.close()
    building.replace(path)
    return counts


def _with_design(simulate: Any, con: Any, seed: int) -> None:
    """The demo's simulated reviewers, drawing with :func:`bench_design`.

    ``simulate_reviews`` draws with ``Design()`` and takes no design; until it
    does, its module's ``Design`` is swapped for the benchmark's while it runs.
    """
    from fieldtrust.demo import reviewers

    original = vars(reviewers)["Design"]
    setattr(reviewers, "Design", bench_design)  # noqa: B010 - a private name, on purpose
    try:
        simulate(con, seed=seed)
    finally:
        setattr(reviewers, "Design", original)  # noqa: B010


def signing_key(store_path: Path) -> Path:
    """The key the benchmark store's decisions are signed with, beside it (made on first use)."""
    from fieldtrust.store.signing import create_key

    key = store_path.with_name("signing.key")
    if not key.exists():
        create_key(key)
    return key


def _approve_one(con: Any, key: Path) -> None:
    """Approve the first automation candidate, so the policy pages show a decision."""
    from fieldtrust.calibration.candidates import automation_candidates
    from fieldtrust.governance.acts import approve
    from fieldtrust.store.scope import Scope, last_weeks
    from fieldtrust.store.signing import using

    scope = Scope(weeks=last_weeks(con.cursor(), 8))
    found = [a for a in automation_candidates(con, scope) if a.candidate]
    if found:
        with using(str(key)):
            approve(con, "maya", found[0].doc_type, found[0].field,
                    "benchmark: approve one candidate")


def _counts(con: Any) -> dict[str, Any]:
    row = con.execute(
        "SELECT (SELECT count(*) FROM effective_labels WHERE correct IS NOT NULL),"
        " (SELECT count(*) FROM audit_items), (SELECT count(*) FROM audit_samples)"
    ).fetchall()[0]
    weeks = [w for (w,) in con.execute("SELECT week FROM audit_samples ORDER BY week").fetchall()]
    return {"labelled": int(row[0]), "audit_items": int(row[1]), "samples": int(row[2]),
            "weeks": weeks}


def describe(dataset: Dataset) -> dict[str, Any]:
    """The dataset as plain values, for the report."""
    values = asdict(dataset)
    values["folder"] = str(dataset.folder)
    values["parquet"] = str(dataset.parquet)
    values["store"] = str(dataset.store)
    values["parquet_mb"] = round(dataset.parquet.stat().st_size / 1e6, 1)
    values["store_mb"] = round(dataset.store.stat().st_size / 1e6, 1)
    values["label_share"] = dataset.label_share
    return values
