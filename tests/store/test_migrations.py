from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from fieldtrust.store.migrations import MIGRATIONS, applied_migrations, migrate

from fieldtrust import store
from fieldtrust.errors import StoreError


def test_fresh_file_gets_every_migration_in_order(tmp_path: Path) -> None:
    con = store.connect(tmp_path / "new.duckdb")
    assert applied_migrations(con) == [m.name for m in MIGRATIONS]


def test_reopening_applies_nothing_twice(db_path: Path) -> None:
    con = store.connect(db_path)
    assert migrate(con) == []
    assert len(applied_migrations(con)) == len(MIGRATIONS)


def test_existing_file_gains_only_missing_migrations(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute(
        "CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    old.execute(MIGRATIONS[0].sql)
    old.execute("INSERT INTO schema_migrations VALUES (?, now()::TIMESTAMP)", [MIGRATIONS[0].name])
    old.execute(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field,"
        " value_status, confidence, extracted_at, batch_id)"
        " VALUES ('x1', 'd1', 'invoice', 'v1', 'total', 'null', 0.5, '2026-01-05', 'b')"
    )
    old.close()

    con = store.connect(path)
    assert applied_migrations(con) == [m.name for m in MIGRATIONS]
    assert con.execute("SELECT extraction_id FROM extractions").fetchall() == [("x1",)]


def test_failed_migration_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = (*MIGRATIONS, store.migrations.Migration("9999_broken", "CREATE TABLE oops (; "))
    monkeypatch.setattr(store.migrations, "MIGRATIONS", broken)
    con = duckdb.connect(str(tmp_path / "s.duckdb"))
    with pytest.raises(duckdb.ParserException):
        migrate(con)
    assert "9999_broken" not in applied_migrations(con)
    assert len(applied_migrations(con)) == len(MIGRATIONS)


def test_read_only_store_must_exist(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        store.connect(tmp_path / "missing.duckdb", read_only=True)


def test_a_new_store_has_no_demo_truth_and_an_old_store_keeps_its_own(tmp_path: Path) -> None:
    from fieldtrust.store.sql import has_table

    from fieldtrust.demo.truth import create_truth_table, truth_rows

    con = store.connect(tmp_path / "new.duckdb")
    assert not has_table(con, "demo_truth") and truth_rows(con) == 0
    create_truth_table(con)  # what the demo does when it builds a store
    assert truth_rows(con) == 0 and has_table(con, "demo_truth")

    # A store made when migrations 0006 and 0011 were in the schema.
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute(
        "CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    old.execute(MIGRATIONS[0].sql)
    old.execute("CREATE TABLE demo_truth (extraction_id VARCHAR PRIMARY KEY,"
                " correct BOOLEAN NOT NULL, true_value VARCHAR, error_type VARCHAR,"
                " error_detail VARCHAR)")
    old.execute("INSERT INTO demo_truth VALUES ('x1', true, '1.00', NULL, NULL)")
    old.executemany("INSERT INTO schema_migrations VALUES (?, now()::TIMESTAMP)",
                    [[MIGRATIONS[0].name], ["0006_demo_truth"], ["0011_demo_truth_error_type"]])
    old.close()
    con = store.connect(path)
    assert applied_migrations(con)[-1] == MIGRATIONS[-1].name
    assert truth_rows(con) == 1
    create_truth_table(con)  # an old demo store rebuilt keeps its table as it is
    assert con.execute("SELECT * FROM demo_truth").fetchall() == [("x1", True, "1.00", None, None)]
