"""Outputs never replace what they did not write (issue 25, faults 1 and 23).

Every command that writes a file (``policy export --out``, ``sample --out``,
``sample --label-config``, ``labels export --out``) goes through
``store.files.write_output``: never over a DuckDB store or its log, by any
name or link; never over a file fieldtrust did not write unless ``--force``;
never onto a pipe or a folder; always through a temporary file renamed into
place, so the earlier file stays whole until the new one is complete.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rel_store import QA_LEAD, WEEK

from fieldtrust.cli.main import cli
from tests.conftest import file_fingerprint

#: Each writing command, with ``{out}`` where its output goes. The label config is the
#: second output of a Label Studio sample, so its tasks go to a file of their own.
COMMANDS: dict[str, tuple[str, ...]] = {
    "policy export": ("policy", "export", "--out", "{out}"),
    "sample --out": ("sample", "--week", WEEK, "--out", "{out}", "--as", QA_LEAD),
    "sample --format label-studio --out": (
        "sample", "--week", WEEK, "--format", "label-studio", "--out", "{out}", "--as", QA_LEAD),
    "sample --label-config": (
        "sample", "--week", WEEK, "--format", "label-studio", "--out", "{tasks}",
        "--label-config", "{out}", "--as", QA_LEAD),
    "labels export (csv)": ("labels", "export", "--out", "{out}"),
    "labels export (parquet)": ("labels", "export", "--out", "{out}"),
}
#: The extension each command's output takes (labels export picks its format by it).
SUFFIX = {"labels export (parquet)": ".parquet", "policy export": ".json",
          "sample --format label-studio --out": ".json", "sample --label-config": ".xml"}


def _run(db: Path, name: str, out: Path, *extra: str) -> Any:
    args = [a.format(out=out, tasks=out.with_name("tasks.json")) for a in COMMANDS[name]]
    return CliRunner().invoke(cli, ["--db", str(db), *args, *extra])


def _bytes(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes())
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        digest.update(wal.read_bytes())
    return digest.hexdigest()


def _out(tmp_path: Path, name: str, stem: str = "out") -> Path:
    return tmp_path / f"{stem}{SUFFIX.get(name, '.csv')}"


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("how", ["the store", "a link to the store", "the store's log"])
def test_no_output_replaces_the_store_by_any_name(
    name: str, how: str, populated: Path, tmp_path: Path
) -> None:
    before, inode = _bytes(populated), populated.stat().st_ino
    if how == "the store":
        out = populated
    elif how == "a link to the store":
        out = _out(tmp_path, name, "link")
        out.symlink_to(populated)
    else:
        out = populated.with_name(populated.name + ".wal")
    result = _run(populated, name, out)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and "Traceback" not in result.output
    if not (name.startswith("labels export") and how != "a link to the store"):
        # (labels export refuses a .duckdb or .wal name by its extension already)
        assert "which no output may replace" in result.stderr
    assert _bytes(populated) == before and populated.stat().st_ino == inode
    assert not out.with_name(out.name).exists() or out.resolve() == populated
    assert file_fingerprint(populated)["labels"][0] > 0


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_file_fieldtrust_did_not_write_is_replaced_only_with_force(
    name: str, populated: Path, tmp_path: Path
) -> None:
    out = _out(tmp_path, name)
    out.write_text("my own notes\n", encoding="utf-8")
    refused = _run(populated, name, out)
    assert refused.exit_code == 2, refused.output
    assert f"{out} already exists and is not a" in refused.stderr
    assert "pass --force to replace it" in refused.stderr
    assert out.read_text(encoding="utf-8") == "my own notes\n"

    forced = _run(populated, name, out, "--force")
    assert forced.exit_code == 0, forced.output
    assert out.read_bytes() != b"my own notes\n"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_an_earlier_output_is_replaced_whole_through_a_renamed_temporary_file(
    name: str, populated: Path, tmp_path: Path
) -> None:
    out = _out(tmp_path, name)
    first = _run(populated, name, out)
    assert first.exit_code == 0, first.output
    content, inode = out.read_bytes(), out.stat().st_ino
    out.chmod(0o640)
    again = _run(populated, name, out)
    assert again.exit_code == 0, again.output  # its own file: no --force needed
    assert out.stat().st_ino != inode  # a new file renamed over the old one
    assert out.stat().st_mode & 0o777 == 0o640  # with the old one's permissions
    if name != "policy export":  # (the policy carries the time it was generated)
        assert out.read_bytes() == content
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_a_link_to_an_earlier_output_keeps_pointing_at_the_new_file(
    populated: Path, tmp_path: Path
) -> None:
    real = tmp_path / "policy-2026-W48.json"
    link = tmp_path / "policy.json"
    assert _run(populated, "policy export", real).exit_code == 0
    link.symlink_to(real.name)
    result = _run(populated, "policy export", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(link.read_text())["thresholds"]


@pytest.mark.parametrize("name", ["policy export", "sample --out", "labels export (csv)"])
@pytest.mark.parametrize("shape", ["a pipe", "a folder"])
def test_an_output_onto_a_pipe_or_folder_is_refused_without_waiting(
    name: str, shape: str, populated: Path, tmp_path: Path
) -> None:
    out = _out(tmp_path, name)
    if shape == "a pipe":
        os.mkfifo(out)  # opening it to write would wait for a reader for ever
    else:
        out.mkdir()
    before = _bytes(populated)
    result = _run(populated, name, out, "--force")
    assert result.exit_code == 2, result.output
    # (click's own check names a folder first, as "is a directory")
    expected = ("is a directory",) if shape == "a folder" else ("it is not a regular file",)
    assert any(e in result.stderr for e in expected), result.stderr
    assert _bytes(populated) == before


def test_a_refused_sample_output_draws_nothing(populated: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.csv"
    notes.write_text("mine\n", encoding="utf-8")
    before = file_fingerprint(populated)
    result = CliRunner().invoke(cli, ["--db", str(populated), "sample", "--week", "2026-W47",
                                      "--out", str(notes), "--as", QA_LEAD])
    assert result.exit_code == 2, result.output
    assert file_fingerprint(populated) == before


def test_a_filled_in_sample_file_is_not_replaced_without_force(
    populated: Path, tmp_path: Path
) -> None:
    out = tmp_path / "w48.csv"
    assert _run(populated, "sample --out", out).exit_code == 0
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    rows[1][rows[0].index("verdict")] = "correct"  # a reviewer's first verdict: their work
    with out.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    filled = out.read_bytes()
    result = _run(populated, "sample --out", out)
    assert result.exit_code == 2, result.output
    assert "is not a sample file fieldtrust wrote" in result.stderr
    assert out.read_bytes() == filled


def test_a_batch_manifest_is_saved_like_every_other_output(populated: Path,
                                                          tmp_path: Path) -> None:
    from fieldtrust.extraction.manifest import load_manifest, new_manifest, save_manifest

    from fieldtrust.errors import InputError

    manifest = new_manifest(run_id="run-1", doc_type="invoice", model="m")
    wal = populated.with_name(populated.name + ".wal")
    with pytest.raises(InputError, match="the write-ahead log of a DuckDB store"):
        save_manifest(wal, manifest)  # DuckDB would replay it over the store
    assert not wal.exists()
    notes = tmp_path / "notes.json"
    notes.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="is not a batch manifest fieldtrust wrote"):
        save_manifest(notes, manifest)
    mine = tmp_path / "run.json"
    save_manifest(mine, manifest)
    save_manifest(mine, {**manifest, "documents": {"d1": {"state": "pending"}}})
    assert load_manifest(mine)["documents"] == {"d1": {"state": "pending"}}
