"""What a store holds: the filter options every scope chooses from."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
from click.testing import CliRunner
from fieldtrust.store.summary import FilterOptions, filter_options

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.conftest import Builder


def _add(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str, str, dt.datetime]]) -> None:
    Builder(con).extractions([
        {"extraction_id": i, "doc_id": "d", "doc_type": t, "form_version": v, "value": "1",
         "extracted_at": at}
        for i, t, v, at in rows
    ])


def test_filter_options_of_an_empty_store_are_empty(con: duckdb.DuckDBPyConnection) -> None:
    assert filter_options(con) == FilterOptions(weeks=(), doc_types=(), form_versions=())


def test_filter_options_list_weeks_types_and_versions_sorted(
    con: duckdb.DuckDBPyConnection,
) -> None:
    _add(con, [
        # Sunday 2026-01-04 23:59 is still 2026-W01; Monday 2026-01-05 starts W02.
        ("e1", "receipt", "pos-2023", dt.datetime(2026, 1, 4, 23, 59)),
        ("e2", "invoice", "v2", dt.datetime(2026, 1, 5, 0, 0)),
        ("e3", "invoice", "v1", dt.datetime(2026, 1, 7, 12, 0)),
        # 2025-12-29 (a Monday) belongs to ISO week 2026-W01, not to 2025.
        ("e4", "invoice", "v1", dt.datetime(2025, 12, 29, 8, 0)),
        # A gap week (W03) is not invented.
        ("e5", "receipt", "pos-2023", dt.datetime(2026, 1, 19, 8, 0)),
        # A doc_type that looks like markup is kept as written.
        ("e6", "**x** [a](b)", "v'1", dt.datetime(2026, 1, 19, 9, 0)),
    ])
    options = filter_options(con)
    assert options.weeks == ("2026-W01", "2026-W02", "2026-W04")
    assert options.doc_types == ("**x** [a](b)", "invoice", "receipt")
    assert options.form_versions == (
        ("**x** [a](b)", "v'1"), ("invoice", "v1"), ("invoice", "v2"), ("receipt", "pos-2023"),
    )


def test_filter_options_read_from_a_read_only_connection(db_path: Path) -> None:
    writer = store.connect(db_path)
    _add(writer, [("e1", "invoice", "v1", dt.datetime(2026, 11, 23, 9))])
    writer.close()
    reader = store.connect(db_path, read_only=True)
    try:
        assert filter_options(reader).weeks == ("2026-W48",)
    finally:
        reader.close()


def test_info_values_lists_what_the_filters_offer(db_path: Path) -> None:
    writer = store.connect(db_path)
    _add(writer, [("e1", "invoice", "v2", dt.datetime(2026, 11, 23, 9)),
                  ("e2", "invoice", "v1", dt.datetime(2026, 11, 30, 9)),
                  ("e3", "receipt", "pos", dt.datetime(2026, 11, 30, 9))])
    writer.close()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "info", "--values"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "weeks: 2026-W48, 2026-W49",
        "invoice: form versions v1, v2",
        "receipt: form versions pos",
    ]
    result = CliRunner().invoke(cli, ["--db", str(db_path), "info", "--values", "--json"])
    assert json.loads(result.stdout) == {
        "weeks": ["2026-W48", "2026-W49"], "doc_types": ["invoice", "receipt"],
        "form_versions": [{"doc_type": "invoice", "form_version": "v1"},
                          {"doc_type": "invoice", "form_version": "v2"},
                          {"doc_type": "receipt", "form_version": "pos"}],
    }
