"""The derived caches (store.rollup) give the same answers as reading every row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from fieldtrust.calibration.design import GRID
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.store import rollup
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.migrations import MIGRATIONS, pending_migrations
from fieldtrust.store.scope import Scope

from fieldtrust import store

WEEK_START = dt.datetime(2026, 11, 2)  # Monday of 2026-W45


def extractions(n: int, *, seed: int, prefix: str) -> pa.Table:
    """``n`` rows over three weeks, two doc types, two fields, confidences on and off the grid."""
    rng = np.random.default_rng(seed)
    confidence = rng.choice([0.285, 0.9, 0.995, 1.0, 0.0], n) * (rng.random(n) < 0.5)
    confidence = np.where(confidence == 0, rng.random(n), confidence)
    return pa.table({
        "extraction_id": [f"{prefix}{i}" for i in range(n)],
        "doc_id": [f"d{i // 2}" for i in range(n)],
        "doc_type": rng.choice(["invoice", "receipt"], n).tolist(),
        "form_version": rng.choice(["v1", "v2"], n).tolist(),
        "field": rng.choice(["total", "tax"], n).tolist(),
        "value": ["1"] * n,
        "confidence": confidence,
        "extracted_at": [WEEK_START + dt.timedelta(hours=int(h))
                         for h in rng.integers(0, 21 * 24, n)],
    })


def counted_from_rows(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[tuple[object, ...]]:
    where, params = scope.where("e")
    return sorted(con.sql(rollup._counts_sql(where), params=params).fetchall())


def as_rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


SCOPES = [
    Scope(),
    Scope(weeks=("2026-W46",)),
    Scope(weeks=("2026-W45", "2026-W47"), doc_types=("receipt",), fields=("tax",)),
    Scope(form_versions=("v2",)),
]


@pytest.mark.parametrize("scope", SCOPES, ids=["all", "one-week", "filtered", "version"])
def test_the_rollup_after_several_ingests_equals_counting_every_row(
    con: duckdb.DuckDBPyConnection, scope: Scope
) -> None:
    ingest_table(con, extractions(3000, seed=1, prefix="a"), source="a")
    ingest_table(con, extractions(2000, seed=2, prefix="b"), source="b")
    ingest_table(con, extractions(2500, seed=1, prefix="a"), source="a again")  # all repeats
    assert rollup.is_current(con)
    got = as_rows(rollup.population_counts(con, scope))
    expected = counted_from_rows(con, scope)
    # doc_type, field, form_version, week, k and n exactly; the sums of confidence
    # differ only by the order they were added in.
    assert [row[:6] for row in got] == [row[:6] for row in expected]
    assert [row[6] for row in got] == pytest.approx([row[6] for row in expected])
    where, params = scope.where("e")
    stored = con.sql(f"SELECT count(*) FROM extractions e WHERE {where}", params=params)
    assert sum(row[5] for row in got) == stored.fetchall()[0][0] > 0


def test_rows_added_outside_fieldtrust_are_read_from_the_table_until_an_ingest_rebuilds(
    con: duckdb.DuckDBPyConnection,
) -> None:
    ingest_table(con, extractions(500, seed=3, prefix="a"), source="a")
    con.execute(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field, value,"
        " value_status, confidence, extracted_at, batch_id)"
        " VALUES ('by-hand', 'd', 'memo', 'v9', 'total', '1', 'present', 0.5, ?, 'sql')",
        [WEEK_START],
    )
    assert not rollup.is_current(con)
    by_hand = [r for r in as_rows(rollup.population_counts(con)) if r[0] == "memo"]
    assert by_hand == [("memo", "total", "v9", "2026-W45", 100, 1, 0.5)]

    ingest_table(con, extractions(200, seed=4, prefix="b"), source="b")
    assert rollup.is_current(con)  # the ingest found it out of step and rebuilt it
    assert as_rows(rollup.population_counts(con)) == counted_from_rows(con, Scope())



def test_two_scopes_hold_the_same_extractions_when_no_row_lies_in_a_week_only_one_has(
    con: duckdb.DuckDBPyConnection,
) -> None:
    ingest_table(con, extractions(600, seed=6, prefix="a"), source="a")  # W45..W47
    weeks = ("2026-W45", "2026-W46", "2026-W47")
    horizon = Scope(weeks=("2026-W44", *weeks))  # a week more, without rows
    assert rollup.same_extractions(con, Scope(weeks=weeks), horizon)
    assert rollup.same_extractions(con, Scope(), horizon)  # no row outside the horizon
    assert not rollup.same_extractions(con, Scope(weeks=weeks[1:]), horizon)  # W45 has rows
    filtered = Scope(weeks=weeks[1:], doc_types=("receipt",))
    assert not rollup.same_extractions(
        con, filtered, Scope(weeks=weeks, doc_types=("receipt",)))
    # The filters select rows as well as the weeks: the same filters agree, others do not.
    assert rollup.same_extractions(con, Scope(weeks=weeks, doc_types=("receipt",)),
                                   Scope(weeks=("2026-W44", *weeks), doc_types=("receipt",)))
    assert not rollup.same_extractions(con, Scope(weeks=weeks, doc_types=("receipt",)), horizon)

    con.execute(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field, value,"
        " value_status, confidence, extracted_at, batch_id)"
        " VALUES ('by-hand', 'd', 'memo', 'v9', 'total', '1', 'present', 0.5, ?, 'sql')",
        [WEEK_START],
    )
    # A rollup out of step cannot answer; "not the same" makes the caller read again.
    assert not rollup.same_extractions(con, Scope(weeks=weeks), horizon)

def test_labels_read_the_same_with_or_without_the_sampled_copy(
    con: duckdb.DuckDBPyConnection,
) -> None:
    ingest_table(con, extractions(400, seed=5, prefix="a"), source="a")
    labelled = [f"a{i}" for i in range(0, 400, 3)]
    con.executemany(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
        " labeled_at) VALUES (?, ?, ?, 'ana', 'import', ?)",
        [[f"l{i}", e, "correct" if i % 4 else "incorrect", WEEK_START]
         for i, e in enumerate(labelled)],
    )
    from_rows = labelled_items(con, Scope(weeks=("2026-W46",)))
    rollup.record_sampled(con, "SELECT unnest(?::VARCHAR[])", [labelled[::2]])
    partly = labelled_items(con, Scope(weeks=("2026-W46",)))
    rollup.refresh_sampled(con)
    assert con.sql("SELECT count(*) FROM sampled_extractions").fetchall() == [(len(labelled),)]
    fully = labelled_items(con, Scope(weeks=("2026-W46",)))
    assert from_rows.num_rows > 0
    assert partly.equals(from_rows) and fully.equals(from_rows)


def test_a_read_only_open_upgrades_a_store_made_by_an_older_fieldtrust(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = store.connect(path)
    ingest_table(con, extractions(300, seed=6, prefix="a"), source="a")
    # As an older fieldtrust left it: without the newest migration's tables.
    con.execute("DROP TABLE extraction_counts")
    con.execute("DROP TABLE sampled_extractions")
    for column in ("document_uri", "page", "bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1"):
        con.execute(f"ALTER TABLE extractions DROP COLUMN {column}")  # added by 0016
    # 0014 to 0016 built the rollup and the sampled copy; later ones are not at issue.
    newest = [m.name for m in MIGRATIONS if "0014" <= m.name < "0017"]
    con.execute("DELETE FROM schema_migrations WHERE name IN (SELECT unnest(?::VARCHAR[]))",
                [newest])
    con.close()

    reader = store.connect(path, read_only=True)
    try:
        assert pending_migrations(reader) == []
        assert rollup.is_current(reader)
        assert as_rows(rollup.population_counts(reader)) == counted_from_rows(reader, Scope())
    finally:
        reader.close()


def test_the_rollup_uses_the_calibration_grid() -> None:
    assert rollup.GRID == GRID


def test_filter_options_read_from_the_rollup_equal_those_read_from_the_rows(
    con: duckdb.DuckDBPyConnection,
) -> None:
    from fieldtrust.store.summary import filter_options

    ingest_table(con, extractions(600, seed=7, prefix="a"), source="a")
    from_rollup = filter_options(con)
    con.execute("DELETE FROM extraction_counts")  # out of step: read from the rows
    assert not rollup.is_current(con)
    assert filter_options(con) == from_rollup
    assert from_rollup.weeks == ("2026-W45", "2026-W46", "2026-W47")
    assert from_rollup.doc_types == ("invoice", "receipt")


def test_the_error_report_reads_the_same_with_or_without_the_sampled_copy(
    con: duckdb.DuckDBPyConnection,
) -> None:
    from fieldtrust.labels.errors_report import error_report

    ingest_table(con, extractions(300, seed=8, prefix="a"), source="a")
    con.executemany(
        "INSERT INTO labels (label_id, extraction_id, verdict, error_type, reviewer,"
        " review_round, labeled_at) VALUES (?, ?, ?, ?, 'ana', 'import', ?)",
        [[f"l{i}", f"a{i}", "incorrect" if i % 3 else "correct",
          "misread_characters" if i % 2 else None, WEEK_START] for i in range(0, 300, 2)],
    )
    from_rows = error_report(con)
    rollup.refresh_sampled(con)
    assert from_rows.num_rows > 0
    assert error_report(con).equals(from_rows)


def test_a_sample_draw_copies_exactly_its_items_columns(
    con: duckdb.DuckDBPyConnection,
) -> None:
    from fieldtrust.sampling.design import Design
    from fieldtrust.sampling.draw import draw_sample
    from fieldtrust.store.access import bootstrap_admin, grant_role

    bootstrap_admin(con, "root")
    grant_role(con, "root", "quinn", "qa_lead")
    ingest_table(con, extractions(5000, seed=9, prefix="a"), source="a")
    first = draw_sample(con, "2026-W46", Design(base_rate=0.05), seed=1, actor="quinn")
    again = draw_sample(con, "2026-W46", Design(base_rate=0.08), seed=2, actor="quinn",
                        redraw=True)
    assert first.n_sample > 0 and again.n_sample > first.n_sample
    copied = con.sql(
        "SELECT * FROM sampled_extractions ORDER BY extraction_id").fetchall()
    expected = con.sql(
        "SELECT extraction_id, doc_type, form_version, field, confidence, extracted_at,"
        f" {', '.join(rollup.LOCATION_COLUMNS)}, extractor_version"
        " FROM extractions WHERE extraction_id IN (SELECT extraction_id FROM audit_items)"
        " ORDER BY extraction_id").fetchall()
    assert copied == expected  # each item once, its columns as stored
