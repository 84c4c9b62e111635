"""Results into the store: rows through ingest, attempts into extraction_log, no key anywhere."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pytest
from claude_fake import (
    FIXTURES,
    KEY,
    MODEL,
    FakeClaude,
    api_error,
    client_for,
    entry,
    invoice_input,
    receipt_input,
    tool_reply,
)
from fieldtrust.extraction.loop import extract_paths
from fieldtrust.extraction.results import Extraction
from fieldtrust.extraction.sink import StoreSink, store_result, stored_doc_ids
from fieldtrust.extraction.to_rows import ROW_SCHEMA, extraction_rows
from fieldtrust.ingest.extractions import OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from fieldtrust.store.labelled import labelled_items

from fieldtrust import store

AT = dt.datetime(2026, 3, 2, 10, 0, 0)


def rows_of(con: duckdb.DuckDBPyConnection, doc_id: str | None = None) -> dict[str, dict]:
    sql = "SELECT * FROM extractions" + (" WHERE doc_id = ?" if doc_id else "")
    table = con.sql(sql, params=[doc_id] if doc_id else None).to_arrow_table()
    return {row["field"]: row for row in table.to_pylist()}


def test_row_columns_are_exactly_the_ingest_columns() -> None:
    assert set(ROW_SCHEMA.names) == set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS)


def test_value_statuses_present_null_unclear_other_stay_distinct() -> None:
    tool_input = receipt_input(
        receipt_number=entry("unclear", 0.3, "7?81"),
        category={"value": "other", "detail": "parking fee", "confidence": 0.6,
                  "source_text": ""},
    )
    extraction = Extraction("receipt", MODEL, tool_input, "6.00")

    table = extraction_rows(extraction, run_id="run-1", doc_id="r-1", extracted_at=AT)

    rows = {r["field"]: r for r in table.to_pylist()}
    assert (rows["vendor"]["value_status"], rows["vendor"]["value"]) == ("present", "Café Blue")
    assert (rows["tax"]["value_status"], rows["tax"]["value"]) == ("null", None)
    assert (rows["receipt_number"]["value_status"], rows["receipt_number"]["value"]) == (
        "unclear", None)
    assert rows["receipt_number"]["source_excerpt"] == "7?81"
    assert (rows["category"]["value_status"], rows["category"]["value"]) == (
        "other", "parking fee")
    assert rows["tax"]["confidence"] == 0.85
    assert json.loads(rows["line_items"]["value"]) == tool_input["line_items"]["items"]
    assert rows["line_items"]["value"] == (
        '[{"amount":"3.20","description":"Espresso"},{"amount":"2.80","description":"Croissant"}]'
    )
    assert {r["form_version"] for r in rows.values()} == {"unknown"}
    assert len(rows) == 9


def test_conflict_flags_total_and_line_items_with_the_computed_total(
    con: duckdb.DuckDBPyConnection,
) -> None:
    fake = FakeClaude([tool_reply("record_invoice", invoice_input(total=entry("1000.00")))] * 2)
    sink = _ConSink(con)

    extract_paths(client_for(fake), [FIXTURES / "invoice.txt"], doc_type="invoice",
                  model=MODEL, sink=sink)

    rows = rows_of(con)
    flagged = {f: (r["conflict"], r["conflict_value"]) for f, r in rows.items() if r["conflict"]}
    assert flagged == {"total": (True, "800.00"), "line_items": (True, "800.00")}
    assert rows["total"]["value"] == "1000.00"  # the printed value, never "fixed"
    assert not rows["tax"]["conflict"]


def test_extraction_run_lands_rows_the_log_and_calibration_inputs(db_path: Path) -> None:
    fake = FakeClaude([
        tool_reply("record_invoice", invoice_input(tax=entry("80.00", 2.0))),  # format error
        tool_reply("record_invoice", invoice_input(), text="done"),
    ])
    sink = StoreSink(db_path, form_version="2026-03")

    summary = extract_paths(client_for(fake), [FIXTURES / "invoice.txt"], doc_type="invoice",
                            model=MODEL, sink=sink, run_id="run-test")

    assert (summary.ok, summary.failed) == (1, 0)
    with store.open_store(db_path) as con:
        rows = rows_of(con)
        assert sorted(rows) == sorted(invoice_input())
        assert {r["form_version"] for r in rows.values()} == {"2026-03"}
        assert {r["model"] for r in rows.values()} == {MODEL}
        assert rows["date"]["value"] == "2024-04-01"
        assert rows["date"]["source_excerpt"] == "令和6年4月1日"
        assert rows["total"]["confidence"] == 0.96
        batch = con.sql("SELECT format, rows_added FROM ingest_batches").fetchall()
        assert batch == [("extract", 8)]
        log = con.sql(
            "SELECT attempt, stop_reason, tool_name, outcome, validator_message, tool_input_json"
            " FROM extraction_log ORDER BY attempt"
        ).fetchall()
        assert [row[:4] for row in log] == [
            (1, "tool_use", "record_invoice", "format_error"),
            (2, "tool_use", "record_invoice", "accepted"),
        ]
        assert log[0][4] == "tax.confidence: 2.0 is outside [0, 1]"
        assert json.loads(log[0][5])["tax"]["confidence"] == 2.0
        # a reviewer labels one row: it reaches calibration through labelled_items
        con.execute(
            "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
            " labeled_at) VALUES ('l1', ?, 'correct', 'ana', 'import', ?)",
            [rows["total"]["extraction_id"], AT],
        )
        labelled = labelled_items(con).to_pylist()
    assert [(r["doc_type"], r["field"], r["confidence"], r["correct"]) for r in labelled] == [
        ("invoice", "total", 0.96, 1)
    ]


def test_storing_the_same_result_twice_adds_nothing(con: duckdb.DuckDBPyConnection) -> None:
    fake = FakeClaude([tool_reply("record_invoice", invoice_input())])
    sink = _ConSink(con)
    extract_paths(client_for(fake), [FIXTURES / "invoice.txt"], doc_type="invoice",
                  model=MODEL, sink=sink, run_id="run-x")
    before = con.sql("SELECT count(*) FROM extractions").fetchall()

    assert store_result(con, sink.last, run_id="run-x") == 0

    assert con.sql("SELECT count(*) FROM extractions").fetchall() == before
    assert stored_doc_ids(con, [sink.last.doc_id, "other"]) == {sink.last.doc_id}


def test_a_failed_document_is_logged_and_adds_no_rows(con: duckdb.DuckDBPyConnection) -> None:
    fake = FakeClaude([api_error(400, "invalid_request_error", "Could not process PDF")])
    sink = _ConSink(con)

    extract_paths(client_for(fake), [FIXTURES / "invoice.pdf"], doc_type="invoice",
                  model=MODEL, sink=sink)

    assert con.sql("SELECT count(*) FROM extractions").fetchall() == [(0,)]
    [(outcome, message)] = con.sql(
        "SELECT outcome, validator_message FROM extraction_log").fetchall()
    assert outcome == "api_error"
    assert "Could not process PDF" in message


@pytest.mark.parametrize("leaky", [False, True])
def test_the_api_key_never_reaches_the_store(db_path: Path, leaky: bool) -> None:
    replies = [
        api_error(429, "rate_limit_error", "slow down"),
        tool_reply("record_invoice", invoice_input()),
        api_error(400, "invalid_request_error", f"echo {KEY}" if leaky else "bad"),
    ]
    fake = FakeClaude(replies)
    sink = StoreSink(db_path)

    extract_paths(client_for(fake), [FIXTURES / "invoice.txt", FIXTURES / "receipt.png"],
                  doc_type="invoice", model=MODEL, sink=sink)

    assert all(KEY in r.headers.get("authorization", "") for r in fake.requests)  # it was used
    with store.open_store(db_path) as con:
        assert con.sql("SELECT count(*) FROM extraction_log").fetchall() == [(2,)]
        for table, column in con.sql(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE data_type = 'VARCHAR'"
        ).fetchall():
            quoted = f"{store.sql.quote_ident(table)}"
            hits = con.sql(
                f"SELECT count(*) FROM {quoted} WHERE contains({store.sql.quote_ident(column)}, ?)",
                params=[KEY],
            ).fetchall()
            assert hits == [(0,)], f"{table}.{column} holds the key"


class _ConSink:
    """A sink writing through one open connection (the test's ``con``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.last = None

    def stored(self, doc_ids):
        return stored_doc_ids(self.con, doc_ids)

    def put(self, result, run_id):
        self.last = result
        store_result(self.con, result, run_id=run_id)
