"""Making a store on a full disk, opening one a newer fieldtrust migrated (issue 25, faults 19, 20).

Fault 19: a full disk during ``init``, ``demo`` or a first ``ingest`` left a
0-byte store that the advised rerun could not open. Fault 20: a store
migrated by a newer fieldtrust was written to without a word.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import StoreError
from tests.conftest import file_rows, fill_disk
from tests.conftest import small_disk as mounted

COMMANDS = {
    "init": ["init", "--admin", "root"],
    "demo": ["demo", "--rows", "600", "--no-labels"],
    "ingest": ["ingest", "{csv}", "--quiet"],
}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A private 8 MB tmpfs (root only: CI runs as root)."""
    with mounted(tmp_path / "disk", 8) as mount:
        yield mount


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_store_the_disk_could_not_hold_leaves_nothing_the_rerun_trips_on(
    name: str, small_disk: Path, tmp_path: Path
) -> None:
    csv = tmp_path / "week.csv"
    csv.write_text("doc_id,doc_type,field,confidence,extracted_at\n"
                   "d1,invoice,total,0.5,2026-11-24T10:00:00Z\n", encoding="utf-8")
    db = small_disk / "new.duckdb"
    argv = ["--db", str(db), *(a.format(csv=csv) for a in COMMANDS[name])]
    filler = fill_disk(small_disk)
    failed = CliRunner().invoke(cli, argv)
    assert failed.exit_code == 2, failed.output
    assert "no space left on the device" in failed.stderr
    assert list(small_disk.iterdir()) == [filler]  # no 0-byte store
    filler.unlink()
    again = CliRunner().invoke(cli, argv)
    assert again.exit_code == 0, again.output
    assert file_rows(db, "SELECT count(*) FROM schema_migrations")[0][0] > 0


def test_an_empty_file_left_where_the_store_goes_is_made_a_store(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    db.write_bytes(b"")  # what an older fieldtrust left after a full disk
    result = CliRunner().invoke(cli, ["--db", str(db), "init", "--admin", "root"])
    assert result.exit_code == 0, result.output
    assert file_rows(db, "SELECT user_name FROM user_roles") == [("root",)]


def _from_the_future(db: Path) -> str:
    store.connect(db).close()
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_migrations VALUES ('0099_from_a_newer_fieldtrust', now())")
    con.close()
    return hashlib.sha256(db.read_bytes()).hexdigest()


@pytest.mark.parametrize("args", [["info"], ["users", "grant", "ana", "reviewer", "--as", "x"],
                                  ["verify"]])
def test_a_store_migrated_by_a_newer_fieldtrust_is_refused_unchanged(
    args: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    before = _from_the_future(db)
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: {db} was upgraded by a newer fieldtrust (its migration"
        " 0099_from_a_newer_fieldtrust is unknown here): upgrade fieldtrust to open it;"
        " it was left unchanged"
    ]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    for read_only in (False, True):
        with pytest.raises(StoreError, match="upgraded by a newer fieldtrust"):
            store.connect(db, read_only=read_only)
