"""A full disk: every write ends in "no space left", the store is unchanged, and works again.

The store lives on a small tmpfs mounted for the test (root only: CI runs as
root; elsewhere the test is skipped and says why). The free space is filled
to the last byte, then ingest, sample, labels import, decide and users grant
each run through the CLI: exit code 2, a "no space left" line, no traceback,
nothing changed. After the filler is deleted the same command succeeds.
"""

from __future__ import annotations

import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rel_store import QA_LEAD, WEEK_START, extraction_rows, record_figure

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.conftest import copy_store, file_fingerprint, fill_disk
from tests.conftest import small_disk as mounted

#: Room for the populated store (a few MB) and the writes that fail on it.
DISK_MB = 24


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A private tmpfs of :data:`DISK_MB` MB, unmounted afterwards."""
    with mounted(tmp_path / "disk", DISK_MB) as mount:
        yield mount


def _fill(folder: Path) -> Path:
    """Write a file until the disk holding ``folder`` has no byte left."""
    filler = fill_disk(folder)
    with pytest.raises(OSError) as full, (folder / "probe").open("wb", buffering=0) as probe:
        probe.write(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC
    (folder / "probe").unlink(missing_ok=True)
    return filler


def _week_file(folder: Path) -> Path:
    """A new week of extractions, as a CSV outside the small disk."""
    path = folder / "week49.csv"
    rows = extraction_rows(20_000, seed=4, prefix="w", start=WEEK_START.replace(day=16))
    rows.to_pandas().to_csv(path, index=False)
    return path


def _labels_file(folder: Path, populated: Path) -> Path:
    con = store.connect(populated, read_only=True)
    try:
        ids = [x for (x,) in con.execute(
            "SELECT extraction_id FROM audit_items i WHERE NOT EXISTS"
            " (SELECT 1 FROM labels l WHERE l.extraction_id = i.extraction_id)"
            " ORDER BY 1 LIMIT 30").fetchall()]
    finally:
        con.close()
    path = folder / "labels.csv"
    path.write_text("extraction_id,verdict,reviewer\n"
                    + "".join(f"{x},correct,ana\n" for x in ids), encoding="utf-8")
    return path


COMMANDS: dict[str, list[str]] = {
    "ingest": ["ingest", "{week}"],
    "ingest (its copy of the file)": ["ingest", "{week}"],
    "sample": ["sample", "--week", "2026-W48", "--redraw", "--seed", "9", "--as", QA_LEAD],
    "labels import": ["labels", "import", "{labels}", "--as", QA_LEAD],
    "decide": ["decide", "reject", "--doc-type", "invoice", "--field", "date", "--as", "maya",
               "--comment", "not yet"],
    "users grant": ["users", "grant", "newcomer", "reviewer", "--as", "root"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_full_disk_fails_cleanly_and_the_next_run_succeeds(
    name: str, small_disk: Path, populated: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = copy_store(populated, small_disk / "store.duckdb")
    files = {"week": str(_week_file(tmp_path)), "labels": str(_labels_file(tmp_path, db))}
    argv = ["--db", str(db), *(a.format(**files) for a in COMMANDS[name])]
    before = file_fingerprint(db)
    if "copy" in name:
        # The private copy of the input file is what no longer fits.
        monkeypatch.setattr(tempfile, "tempdir", str(small_disk))
    filler = _fill(small_disk)

    failed: Any = CliRunner().invoke(cli, argv)
    assert failed.exit_code == 2, (failed.output, failed.exc_info)
    assert "no space left" in failed.stderr
    assert "Traceback" not in failed.output
    assert "other writers kept changing" not in failed.stderr
    filler.unlink()
    assert file_fingerprint(db) == before
    again = CliRunner().invoke(cli, argv)
    assert again.exit_code == 0, (again.output, again.exc_info)
    assert file_fingerprint(db) != before
    record_figure(f"disk_full_{name.split()[0]}{'_copy' if 'copy' in name else ''}",
                  {"refused": failed.stderr.strip(), "then": "succeeded"})
