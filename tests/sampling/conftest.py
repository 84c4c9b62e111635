"""Synthetic extractions with a known truth, and simulated labelling, for the sampling tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from fieldtrust.store.access import bootstrap_admin, grant_role
from fieldtrust.store.weeks import Week

from fieldtrust import store
from fieldtrust.demo.truth import create_truth_table
from tests.conftest import Builder


@dataclass
class World:
    """Builds stores for the sampling tests: users, rows in, labels in."""

    #: Drawing a sample is checked against the store's roles: this user may draw.
    qa_lead: str = "quinn"
    admin: str = "root"

    def grant(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make the store's first admin and give :attr:`qa_lead` the qa_lead role."""
        bootstrap_admin(con, self.admin)
        grant_role(con, self.admin, self.qa_lead, "qa_lead")

    def frame(
        self,
        week: str,
        n: int,
        *,
        seed: int = 0,
        doc_types: tuple[str, ...] = ("invoice", "receipt"),
        fields: tuple[str, ...] = ("total", "date"),
        new_share: float = 0.0,
        accuracy_old: float = 0.95,
        accuracy_new: float = 0.75,
        prefix: str = "",
    ) -> pd.DataFrame:
        """``n`` extractions spread over ``week``: form version v1 (in use for years) or,
        for ``new_share`` of them, v9 (first seen with its first row)."""
        rng = np.random.default_rng(seed)
        start, _ = Week(week).bounds()
        new = rng.random(n) < new_share
        confidence = np.round(rng.beta(6, 1, n), 4)
        accuracy = np.where(new, accuracy_new, accuracy_old)
        return pd.DataFrame(
            {
                "extraction_id": [f"{prefix}{week}-{i:06d}" for i in range(n)],
                "doc_id": [f"{prefix}{week}-d{i // 4}" for i in range(n)],
                "doc_type": rng.choice(doc_types, n),
                "form_version": np.where(new, "v9", "v1"),
                "field": rng.choice(fields, n),
                "value": [f"{i}.00" for i in range(n)],
                "value_status": "present",
                "confidence": confidence,
                "extracted_at": [
                    start + dt.timedelta(seconds=int(s)) for s in rng.integers(0, 7 * 86400, n)
                ],
                "conflict": False,
                "correct": rng.random(n) < accuracy,
            }
        )

    def insert(self, con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
        """Store the rows, their truth (demo_truth) and first sightings of form versions."""
        Builder(con).extractions(frame.drop(columns="correct").assign(batch_id="test"))
        create_truth_table(con)
        con.register("_incoming", frame)
        try:
            con.execute(
                "INSERT INTO demo_truth (extraction_id, correct)"
                " SELECT extraction_id, correct FROM _incoming"
            )
            # v1 stands for a form in use for years; any other version is first
            # seen with its first row.
            con.execute(
                """
                INSERT OR REPLACE INTO form_versions
                SELECT doc_type, form_version, min(first_seen_at) FROM (
                    SELECT doc_type, form_version,
                           CASE form_version WHEN 'v1' THEN TIMESTAMP '2020-01-06'
                                ELSE extracted_at END AS first_seen_at
                    FROM _incoming
                    UNION ALL SELECT doc_type, form_version, first_seen_at FROM form_versions
                ) GROUP BY ALL
                """
            )
        finally:
            con.unregister("_incoming")

    def label(self, con: duckdb.DuckDBPyConnection, sample_id: str, *, share: float = 1.0) -> int:
        """Label the first ``share`` of every cell (review order) from the stored truth."""
        con.execute(
            """
            INSERT INTO labels (label_id, extraction_id, sample_id, verdict, reviewer,
                                review_round, labeled_at)
            SELECT 'L-' || i.sample_id || '-' || i.extraction_id, i.extraction_id, i.sample_id,
                   CASE WHEN t.correct THEN 'correct' ELSE 'incorrect' END,
                   'tester', 'primary', TIMESTAMP '2027-01-01'
            FROM (
                SELECT *, row_number() OVER (PARTITION BY cell ORDER BY prn) AS rank_,
                       count(*) OVER (PARTITION BY cell) AS size_
                FROM audit_items WHERE sample_id = ?
            ) i
            JOIN demo_truth t USING (extraction_id)
            WHERE rank_ <= ceil(? * size_)
              AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.extraction_id = i.extraction_id)
            """,
            [sample_id, share],
        )
        rows = con.sql("SELECT count(*) FROM labels").fetchall()
        return int(rows[0][0])


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def con(db_path: Path, world: World) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh store (as the root ``con``) whose ``world.qa_lead`` may draw samples."""
    connection = store.connect(db_path)
    world.grant(connection)
    yield connection
    connection.close()
