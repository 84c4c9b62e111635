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
