"""store.files: outputs written whole and never over what they must not replace; capped reads."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from fieldtrust.store.files import OutputKind, read_capped, write_output

from fieldtrust import store
from fieldtrust.errors import InputError, NoSpaceError
from tests.conftest import fill_disk, small_disk

#: A kind whose files start with "ours".
OURS = OutputKind("test output", lambda path: path.read_bytes().startswith(b"ours"))


def test_a_folder_a_store_and_a_foreign_file_are_refused_by_the_library(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(InputError, match="it is a folder"):
        write_output(folder, "ours", OURS, force=True)
    db = tmp_path / "other.duckdb"
    store.connect(db).close()
    before = db.read_bytes()
    with pytest.raises(InputError, match="it is a DuckDB store, which no output may replace"):
        write_output(db, "ours", OURS, force=True)  # not even when forced
    with pytest.raises(InputError, match="the write-ahead log of a DuckDB store"):
        write_output(tmp_path / "other.duckdb.wal", "ours", OURS, force=True)
    assert db.read_bytes() == before and not (tmp_path / "other.duckdb.wal").exists()
    foreign = tmp_path / "notes.txt"
    foreign.write_text("mine")
    with pytest.raises(InputError, match="is not a test output fieldtrust wrote: pass --force"):
        write_output(foreign, "ours, new", OURS)
    assert foreign.read_text() == "mine"
    assert write_output(foreign, "ours, new", OURS, force=True) == foreign
    assert foreign.read_text() == "ours, new"
    with pytest.raises(InputError, match="there is no folder"):
        write_output(tmp_path / "missing" / "x.txt", "ours", OURS)


def test_a_writer_that_fails_leaves_the_earlier_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    write_output(out, "ours 1", OURS)

    def broken(path: Path) -> None:
        path.write_text("ours, half")
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(InputError, match=r"cannot write .*input/output error; nothing was written"):
        write_output(out, broken, OURS)
    assert out.read_text() == "ours 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (root only), to be filled to the last byte."""
    with small_disk(tmp_path / "disk", 1) as mount:
        yield mount


def test_a_full_disk_leaves_the_earlier_output_whole(full_disk: Path) -> None:
    out = full_disk / "policy.json"
    write_output(out, "ours " + "x" * 1000, OURS)
    filler = fill_disk(full_disk)
    with pytest.raises(NoSpaceError, match="no space left on the device holding"):
        write_output(out, "ours " + "y" * 200_000, OURS)
    assert out.read_text() == "ours " + "x" * 1000
    assert sorted(full_disk.iterdir()) == sorted([filler, out])


def test_read_capped_stops_at_its_limit(tmp_path: Path) -> None:
    assert read_capped(__file__, what="test file", limit=1 << 20).startswith(b'"""store.files')
    with pytest.raises(InputError, match="policy file /dev/zero: larger than 1,048,576 bytes"):
        read_capped("/dev/zero", what="policy file")
    with pytest.raises(InputError, match=r"design file .*gone does not exist"):
        read_capped(tmp_path / "gone", what="design file")
