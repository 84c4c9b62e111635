"""Helpers of the reliability suite: a small, fully populated store built through the library.

The store holds one ISO week of extractions, users for every role, a drawn
audit sample, labels of every review round and decisions with evidence, so
every table the history and injection tests look at has rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from fieldtrust.governance.acts import reject
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.access import bootstrap_admin, grant_role

from fieldtrust import store
from tests.decided import approve_as_stated

WEEK = "2026-W48"
WEEK_START = dt.datetime(2026, 11, 23, 8, 0, 0)
ADMIN, QA_LEAD, MANAGER = "root", "quinn", "maya"
#: Reviewers: three named ones plus eight more for the concurrency tests.
REVIEWERS = ("ana", "ben", "chloe", *(f"rev{i}" for i in range(1, 9)))
DOC_TYPES = ("invoice", "receipt")
FIELDS = ("total", "tax", "date")
#: A design that samples a large share of the small week, so reviewers have work.
DESIGN = Design(base_rate=0.5, minimum=4, double_review_share=0.2)


def extraction_rows(count: int, *, seed: int = 0, start: dt.datetime = WEEK_START,
                    prefix: str = "x") -> pa.Table:
    """``count`` valid extraction rows spread over one week (typed columns)."""
    rng = np.random.default_rng(seed)
    doc = np.arange(count) // len(FIELDS)
    return pa.table({
        "extraction_id": [f"{prefix}{i:06d}" for i in range(count)],
        "doc_id": [f"doc{d:05d}" for d in doc],
        "doc_type": [DOC_TYPES[d % len(DOC_TYPES)] for d in doc],
        "form_version": ["v1" if d % 5 else "v2" for d in doc],
        "field": [FIELDS[i % len(FIELDS)] for i in range(count)],
        "value": [f"{rng.integers(1, 999)}.{rng.integers(0, 99):02d}" for _ in range(count)],
        "confidence": rng.uniform(0.3, 1.0, count),
        "model": ["m1"] * count,
        "extracted_at": [start + dt.timedelta(minutes=int(m))
                         for m in rng.integers(0, 6 * 24 * 60, count)],
    })


def build_store(path: Path, *, rows: int = 240) -> dict[str, Any]:
    """Fill ``path`` with a small store holding a row in every history table."""
    con = store.connect(path)
    try:
        ingest_table(con, extraction_rows(rows), source="reliability", fmt="test")
        bootstrap_admin(con, ADMIN)
        grant_role(con, ADMIN, QA_LEAD, "qa_lead")
        grant_role(con, ADMIN, MANAGER, "manager")
        for name in REVIEWERS:
            grant_role(con, ADMIN, name, "reviewer")
        sample = draw_sample(con, WEEK, DESIGN, seed=1, actor=QA_LEAD)
        # ana labels a few items; one is corrected later (supersede keeps both rows).
        items = next_items(con, "ana", sample.sample_id, count=4)
        first = record_verdict(con, actor="ana", extraction_id=items[0].extraction_id,
                               verdict="correct")
        supersede(con, actor="ana", label_id=first.label_id, verdict="incorrect",
                  corrected_value="12.00", error_type="misread_characters")
        for item in items[1:]:
            record_verdict(con, actor="ana", extraction_id=item.extraction_id,
                           verdict="unclear", error_detail="smudged")
        adjudicate(con, QA_LEAD, items[1].extraction_id, "correct")
        approve_as_stated(con, MANAGER, "invoice", "total", 0.9, "looked fine")
        reject(con, MANAGER, "receipt", "tax", "too few labels")
        return {"sample_id": sample.sample_id, "labelled": [i.extraction_id for i in items]}
    finally:
        con.close()


def rows_of(con: duckdb.DuckDBPyConnection, table: str) -> set[tuple[Any, ...]]:
    """Every row of ``table`` as a set of tuples (for "old rows unchanged" checks)."""
    return set(con.execute(f"SELECT * FROM {store.sql.quote_ident(table)}").fetchall())


def text_columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(table, column) of every text column of every base table."""
    return [
        (t, c)
        for t, c in con.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE t.table_type = 'BASE TABLE' AND c.data_type = 'VARCHAR'"
            " ORDER BY ALL"
        ).fetchall()
    ]


def find_text(con: duckdb.DuckDBPyConnection, needle: str) -> list[str]:
    """``table.column`` of every text cell in the store that contains ``needle``."""
    hits = []
    for table, column in text_columns(con):
        count = con.execute(
            f"SELECT count(*) FROM {store.sql.quote_ident(table)}"
            f" WHERE contains({store.sql.quote_ident(column)}, ?)",
            [needle],
        ).fetchall()[0][0]
        if count:
            hits.append(f"{table}.{column}")
    return hits


Writer = Callable[[duckdb.DuckDBPyConnection], object]


def record_figure(name: str, value: object) -> None:
    """Keep a measured figure (kills survived, reviewers...) under test-artifacts/reliability/.

    docs/reliability.md quotes these; one file per figure, so parallel workers never clash.
    """
    import json

    folder = Path(__file__).resolve().parents[2] / "test-artifacts" / "reliability"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(value, indent=2, default=str) + "\n",
                                         encoding="utf-8")


def as_read(markdown: str) -> str:
    """What a reader sees of ``markdown``'s backslash escapes (dashboard.layout.plain adds them)."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def dashboard_as(path: Path, monkeypatch: Any, user: str | None = None) -> Any:
    """The real dashboard entry point (AppTest) on ``path`` after one run, as ``user`` if given."""
    from fieldtrust.dashboard import state
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("FIELDTRUST_DB", str(path))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"),
                           default_timeout=120)
    if user is not None:
        at.session_state[state.AUTH_DEMO_USER] = user
    at.run()
    return at
