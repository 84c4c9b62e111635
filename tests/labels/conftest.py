"""Fixtures for the labels tests: a store with extractions, one audit sample and users.

Audit samples are written with SQL here (the sampling package draws them in
production); the rows follow the schema in store/migrations.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable

import duckdb
import pyarrow as pa
import pytest

SAMPLE = "2026-W10/v1"
WEEK = "2026-W10"
MONDAY = dt.datetime(2026, 3, 2, 9, 0)

#: Users of the standard fixture, by role ('none' = granted, then revoked).
USERS = {
    "root": "admin",
    "alice": "reviewer",
    "bob": "reviewer",
    "dave": "reviewer",
    "carol": "qa_lead",
    "mona": "manager",
    "ned": "none",
}

#: The fixture sample: three cells of four items; the first item of each cell
#: (lowest PRN) is marked for double review.
CELLS = ("invoice|total|high|established", "invoice|total|low|established",
         "invoice|tax|high|established")


class Builder:
    """Writes extractions, audit samples and users straight into a store."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._batch = False

    def extraction(
        self,
        extraction_id: str,
        *,
        doc_type: str = "invoice",
        field: str = "total",
        form_version: str = "v1",
        value: str | None = "10.00",
        confidence: float = 0.9,
        at: dt.datetime = MONDAY,
    ) -> str:
        self.con.execute(
            "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field,"
            " value, value_status, confidence, extracted_at, source_excerpt, batch_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'b1')",
            [extraction_id, f"doc-{extraction_id}", doc_type, form_version, field, value,
             "present" if value is not None else "null", confidence, at, f"... {value} ..."],
        )
        return extraction_id

    def extractions(self, rows: list[dict[str, object]]) -> None:
        """Many extractions at once (dicts with extraction_id and any column to override)."""
        defaults = {"doc_type": "invoice", "form_version": "v1", "field": "total",
                    "value": "10.00", "value_status": "present", "confidence": 0.9,
                    "extracted_at": MONDAY, "batch_id": "b1"}
        table = pa.Table.from_pylist(
            [{**defaults, "doc_id": f"doc-{r['extraction_id']}", **r} for r in rows]
        )
        self.con.register("new_extractions", table)
        self.con.execute("INSERT INTO extractions BY NAME SELECT * FROM new_extractions")
        self.con.unregister("new_extractions")

    def labels(self, rows: list[dict[str, object]]) -> None:
        """Label rows written directly (fixture data; the API is tested on its own)."""
        base = dt.datetime(2026, 3, 9)
        table = pa.Table.from_pylist([
            {"label_id": str(uuid.uuid4()), "review_round": "primary", "corrected_value": None,
             "corrected_status": None, "error_type": None,
             "labeled_at": base + dt.timedelta(seconds=i), **r}
            for i, r in enumerate(rows)
        ])
        self.con.register("new_labels", table)
        self.con.execute("INSERT INTO labels BY NAME SELECT * FROM new_labels")
        self.con.unregister("new_labels")

    def sample(
        self,
        sample_id: str,
        week: str,
        items: Iterable[tuple[str, str, float, float, bool]],
        *,
        version: int = 1,
    ) -> None:
        """items: (extraction_id, cell, inclusion_prob, prn, double_review)."""
        items = list(items)
        design = {"week": week, "seed": 7, "cells": sorted({cell for _, cell, *_ in items})}
        design_json = json.dumps(design, sort_keys=True, separators=(",", ":"))
        self.con.execute(
            "INSERT INTO audit_samples VALUES (?, ?, ?, 7, ?, ?, ?, 'carol')",
            [sample_id, week, version, design_json,
             hashlib.sha256(design_json.encode()).hexdigest(), MONDAY],
        )
        by_cell: dict[str, list[tuple[str, str, float, float, bool]]] = {}
        for item in items:
            by_cell.setdefault(item[1], []).append(item)
        for cell, members in by_cell.items():
            doc_type, field, band, status = cell.split("|")
            pi = members[0][2]
            self.con.execute(
                "INSERT INTO audit_cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sample_id, cell, doc_type, field, band, status,
                 round(len(members) / pi), len(members), pi],
            )
        for extraction_id, cell, pi, prn, double in items:
            self.con.execute(
                "INSERT INTO audit_items VALUES (?, ?, ?, ?, ?, ?)",
                [sample_id, extraction_id, cell, pi, prn, double],
            )

    def users(self, users: dict[str, str] = USERS) -> None:
        """Grant rows written directly, as an admin 'root' would have made them."""
        base = dt.datetime(2026, 1, 5)
        for i, (name, role) in enumerate(users.items()):
            if role == "none":  # granted once, then revoked
                self.con.execute("INSERT INTO user_roles VALUES (?, 'reviewer', 'root', ?)",
                                 [name, base])
            self.con.execute("INSERT INTO user_roles VALUES (?, ?, 'root', ?)",
                             [name, role, base + dt.timedelta(minutes=i + 1)])


@pytest.fixture
def builder(con: duckdb.DuckDBPyConnection) -> Builder:
    return Builder(con)


@pytest.fixture
def review_store(con: duckdb.DuckDBPyConnection, builder: Builder) -> duckdb.DuckDBPyConnection:
    """Users of every role and sample 2026-W10/v1: 3 cells x 4 items, one double review each."""
    builder.users()
    items, rows = [], []
    for c, cell in enumerate(CELLS):
        field = cell.split("|")[1]
        for k in range(4):
            extraction_id = f"e{c}{k}"
            rows.append({"extraction_id": extraction_id, "field": field,
                         "confidence": 0.97 if "high" in cell else 0.6,
                         "source_excerpt": "... 10.00 ..."})
            items.append((extraction_id, cell, 0.5, (k + 1) / 10 + c / 100, k == 0))
    builder.extractions(rows)
    builder.sample(SAMPLE, WEEK, items)
    return con


HISTORY_TABLES = ("labels", "decisions", "evidence_snapshots", "user_roles", "assignments",
                  "skips", "policy_settings", "label_import_designs")


@pytest.fixture
def snapshot() -> Callable[[duckdb.DuckDBPyConnection], dict[str, tuple[int, str]]]:
    """Row count and order-independent checksum of the tables this package writes."""

    def take(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, str]]:
        result = {}
        for table in HISTORY_TABLES:
            row = con.execute(
                f"SELECT count(*), coalesce(bit_xor(hash(t))::VARCHAR, '') FROM {table} t"
            ).fetchone()
            assert row is not None
            result[table] = (row[0], row[1])
        return result

    return take
