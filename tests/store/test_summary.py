"""What a store holds: the filter options every scope chooses from."""

from __future__ import annotations

import datetime as dt

import duckdb

from store.summary import FilterOptions, filter_options


def _add(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str, str, dt.datetime]]) -> None:
    con.executemany(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field, value,"
        " value_status, confidence, extracted_at, batch_id)"
        " VALUES (?, 'd', ?, ?, 'total', '1', 'present', 0.9, ?, 'b')",
        rows,
    )


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


def test_filter_options_read_from_a_read_only_connection(db_path: object) -> None:
    import store

    writer = store.connect(db_path)  # type: ignore[arg-type]
    _add(writer, [("e1", "invoice", "v1", dt.datetime(2026, 11, 23, 9))])
    writer.close()
    reader = store.connect(db_path, read_only=True)  # type: ignore[arg-type]
    try:
        assert filter_options(reader).weeks == ("2026-W48",)
    finally:
        reader.close()
