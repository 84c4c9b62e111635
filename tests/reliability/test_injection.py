"""Injection: hostile text in every user-supplied field is stored and shown verbatim, runs nothing.

Every value travels as a bound parameter, so SQL metacharacters are just
characters: the tests put them in reviewer names, comments, corrected values,
error details, skip reasons, scope filters, file names and the doc_type /
field / value columns of ingested files, then read them back unchanged and
check every table is still there. CSV exports (labels export, ``sample
--out``, dashboard downloads) must defuse text a spreadsheet would run as a
formula; Parquet keeps values exact.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from decided import certification
from fieldtrust.dashboard.downloads import csv_bytes
from fieldtrust.governance.acts import _record as record_decision
from fieldtrust.governance.decisions import decision_history
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.ingest.readers import INVISIBLE
from fieldtrust.ingest.rules import TimeWindow
from fieldtrust.labels.agreement import review_pairs
from fieldtrust.labels.assignment import next_items, skip
from fieldtrust.labels.errors_report import error_report
from fieldtrust.labels.export import export_labels
from fieldtrust.labels.verdicts import get_label, record_verdict, supersede
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.items_csv import write_items_csv
from fieldtrust.sampling.samples import sample_items
from fieldtrust.store.access import bootstrap_admin, grant_role
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.scope import Scope
from fieldtrust.store.spreadsheet import escape_cell, unescape_cell
from rel_store import (
    ADMIN,
    MANAGER,
    QA_LEAD,
    WEEK_START,
    as_read,
    dashboard_as,
    extraction_rows,
)

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from tests.conftest import table_fingerprint

HOSTILE = (
    "'; DROP TABLE labels; --",
    '"; DELETE FROM decisions; --',
    "Robert'); DROP TABLE extractions;--",
    "back\\slash \\' \\\" \\n \\x00",
    "x' OR '1'='1",
    "$1 ? :name %s {0} ${sql}",
    "ünïcødé ☃ 𝔘𝔫𝔦 \u202eRTL\u202c \u200bzero-width",
    "=cmd|' /C calc'!A0",
    "+SUM(1,2)",
    "-2+3",
    "@A1",
    "a|b",
    "*md* `code` [link](http://example.com) <b>x</b>",
    "<script>alert(1)</script>",
    "nul\x00byte",
)
#: Characters a spreadsheet treats as the start of a formula (OWASP CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
BASE_TABLES = (
    "assignments", "audit_cells", "audit_items", "audit_samples", "decisions",
    "evidence_snapshots", "extraction_counts", "extraction_log", "extractions",
    "extractor_versions", "form_versions", "history_chain", "history_signatures", "ingest_batches",
    "label_import_designs", "label_import_second_looks", "label_imports", "label_lead_times",
    "labels", "monitoring_resumptions", "policy_settings", "queue_cache_state", "queue_candidates",
    "queue_partitions", "recalibration_knots", "recalibration_maps", "rekeyed_values",
    "role_revocations", "sampled_extractions", "schema_migrations", "seed_items", "seed_verdicts",
    "signing_started", "skips", "source_counts", "source_draw_skips",
    "source_file_acknowledgements", "source_files", "source_refreshes", "user_roles",
)


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {
        name for (name,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()
    }


def _one_line(text: str) -> bool:
    return not any(ch in text for ch in "\r\n\t\x00") and len(text.strip()) <= 100


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_in_every_labels_field_is_stored_verbatim(
    pcon: duckdb.DuckDBPyConnection, sample_id: str, text: str
) -> None:
    counts = {t: pcon.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in BASE_TABLES}
    reviewer = "ben"
    if _one_line(text):
        grant_role(pcon, ADMIN, text, "reviewer")
        reviewer = text.strip()
    else:
        with pytest.raises(InputError, match="not a usable name"):
            grant_role(pcon, ADMIN, text, "reviewer")
    items = next_items(pcon, reviewer, sample_id, count=2)
    label = record_verdict(pcon, actor=reviewer, extraction_id=items[0].extraction_id,
                           verdict="incorrect", corrected_value=text, error_type="other",
                           error_detail=f"detail {text}")
    newer = supersede(pcon, actor=reviewer, label_id=label.label_id, verdict="incorrect",
                      corrected_value=text + text, error_type="wrong_field")
    skip(pcon, reviewer, sample_id, items[1].extraction_id, f"reason {text}")
    stated = certification(None, candidate=False, reasons=("too_few_labels",), method=text)
    decision = record_decision(pcon, MANAGER, "reject", "invoice", "total", None,
                               f"comment {text}", certification=stated)

    stored = get_label(pcon, label.label_id)
    assert stored.corrected_value == text
    assert stored.error_detail == f"detail {text}".strip()
    assert stored.reviewer == reviewer
    assert get_label(pcon, newer.label_id).corrected_value == text + text
    assert pcon.execute("SELECT reason FROM skips WHERE reviewer = ?",
                        [reviewer]).fetchall() == [(f"reason {text}".strip(),)]
    assert decision_history(pcon, "invoice", "total")[-1].comment == f"comment {text}".strip()
    assert evidence_payload(pcon, decision.evidence_id or "")["certification"]["method"] == text
    # Nothing ran: every table is there and only the expected rows were added.
    assert _tables(pcon) == set(BASE_TABLES)
    grew = {t: pcon.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] - counts[t]
            for t in BASE_TABLES}
    assert grew["labels"] == 2 and grew["skips"] == 1 and grew["decisions"] == 1
    assert grew["extractions"] == 0 and grew["audit_items"] == 0


# --- hostile values inside ingested files, and hostile file names ------------------------------


def _as_key(text: str) -> str:
    """``text`` as a key may hold it: keys refuse invisible characters (test_hostile_faults)."""
    return INVISIBLE.sub("?", text)


def _hostile_ids() -> set[str]:
    return {f"{_as_key(t)}#{i}" for i, t in enumerate(t for t in HOSTILE for _ in (0, 1))}


def _hostile_rows() -> pa.Table:
    """Rows whose every text column is hostile (keys without invisible characters); ids unique."""
    rows = extraction_rows(len(HOSTILE) * 2, seed=3, prefix="h").to_pylist()
    for index, row in enumerate(rows):
        text = HOSTILE[index // 2]
        key = _as_key(text)
        row.update(
            extraction_id=f"{key}#{index}", doc_id=key, doc_type=key, form_version=key,
            field=key if index % 2 else "total", value=text, model=key,
            extracted_at=WEEK_START.isoformat() + "Z", confidence=str(row["confidence"]),
        )
    return pa.Table.from_pylist(rows)


def _write(table: pa.Table, path: Path) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()), encoding="utf-8")
    else:
        table.to_pandas().to_csv(path, index=False, encoding="utf-8")
    return path


def _run(db: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


FILE_NAME = "it's \"week 48\"; DROP TABLE labels; -- ünï"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_hostile_values_and_file_names_round_trip_through_ingest_sample_and_export(
    tmp_path: Path, suffix: str
) -> None:
    db = tmp_path / "store.duckdb"
    rows = _hostile_rows()
    source = _write(rows, tmp_path / f"{FILE_NAME}{suffix}")

    result = _run(db, "ingest", str(source))
    assert result.exit_code == 0, result.output + result.stderr
    assert f"{source.name}: {rows.num_rows} rows read, {rows.num_rows} added" in result.output

    con = store.connect(db)
    try:
        stored = con.execute(
            "SELECT extraction_id, doc_id, doc_type, form_version, field, value, model"
            " FROM extractions ORDER BY extraction_id"
        ).fetchall()
        expected = sorted(
            (r["extraction_id"], r["doc_id"], r["doc_type"], r["form_version"], r["field"],
             r["value"], r["model"]) for r in rows.to_pylist()
        )
        assert stored == expected
        assert con.execute("SELECT source FROM ingest_batches").fetchall() == [(source.name,)]
        # Scope filters carry the same text: they match exactly those rows, nothing more.
        for text in set(rows["doc_type"].to_pylist()):
            scope = Scope(doc_types=(text,), form_versions=(text,), fields=("total",))
            where, params = scope.where("e")
            matched = con.execute(f"SELECT doc_type FROM extractions e WHERE {where}",
                                  params).fetchall()
            assert matched == [(text,)]
        assert _tables(con) == set(BASE_TABLES)
    finally:
        con.close()

    # Draw the week as a qa_lead with a hostile name: doc_type/field with '|' must not
    # merge two cells into one, and the name is recorded as written.
    lead = HOSTILE[0]
    for grant in (["root", "admin"], [lead, "qa_lead"]):
        granted = _run(db, "users", "grant", *grant, "--as", "root")
        assert granted.exit_code == 0, granted.output + granted.stderr
    out = tmp_path / "sample 'out' \"48\".csv"
    result = _run(db, "sample", "--week", "2026-W48", "--design", _design(tmp_path), "--out",
                  str(out), "--as", lead)
    assert result.exit_code == 0, result.output + result.stderr
    assert f"wrote {rows.num_rows} items to {out}" in result.output
    _assert_no_live_formula(out)
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT drawn_by FROM audit_samples").fetchall() == [(lead,)]
    finally:
        con.close()


def _design(tmp_path: Path) -> str:
    path = tmp_path / "design.json"
    path.write_text(json.dumps({"base_rate": 1.0, "minimum": 2}), encoding="utf-8")
    return str(path)


def _cells(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _assert_no_live_formula(path: Path, *, keys: tuple[str, ...] = ()) -> None:
    """No cell of the CSV (besides ``keys``) starts like a formula; the header neither."""
    rows = _cells(path)
    assert rows
    for row in rows:
        for column, value in row.items():
            if column in keys:
                continue
            assert not value.startswith(FORMULA_START), f"{path.name} {column}: {value!r}"


def test_doc_type_and_field_with_the_cell_separator_stay_separate_cells(
    con: duckdb.DuckDBPyConnection,
) -> None:
    rows = extraction_rows(8, seed=5).to_pylist()
    for index, row in enumerate(rows):
        row["doc_type"], row["field"] = ("a|b", "c") if index % 2 else ("a", "b|c")
        row["confidence"] = 0.6
    ingest_table(con, pa.Table.from_pylist(rows), source="pipes")
    bootstrap_admin(con, "root")
    grant_role(con, "root", "quinn", "qa_lead")
    sample = draw_sample(con, "2026-W48", Design(base_rate=1.0, minimum=2), seed=1, actor="quinn")
    cells = sample.cells.to_pylist()
    assert len(cells) == 2
    assert {(c["doc_type"], c["field"]) for c in cells} == {("a|b", "c"), ("a", "b|c")}
    assert len({c["cell"] for c in cells}) == 2
    assert sample.n_sample == 8


def test_a_nul_byte_in_a_csv_value_is_kept_verbatim(db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "nul.csv"
    path.write_bytes(b"doc_id,doc_type,field,value,confidence,extracted_at\n"
                     b"d1,invoice,total,12\x0050,0.5,2026-11-24T10:00:00Z\n")
    result = CliRunner().invoke(cli, ["--db", str(db_path), "ingest", str(path)])
    assert result.exit_code == 0, result.stderr
    con = store.connect(db_path)
    try:
        assert con.execute("SELECT value FROM extractions").fetchall() == [("12\x0050",)]
    finally:
        con.close()


@pytest.mark.parametrize("where", ["header", "json_key"])
def test_a_hostile_column_name_is_reported_not_run(db_path: Path, tmp_path: Path,
                                                  where: str) -> None:
    bad = "x\"; DROP TABLE labels; --"
    if where == "header":
        path = tmp_path / "cols.csv"
        header = '"' + bad.replace('"', '""') + '"'
        path.write_text(f"doc_id,doc_type,field,confidence,extracted_at,{header}\n"
                        "d1,invoice,total,0.5,2026-11-24T10:00:00Z,1\n", encoding="utf-8")
    else:
        path = tmp_path / "cols.jsonl"
        path.write_text(json.dumps({"doc_id": "d1", "doc_type": "invoice", "field": "total",
                                    "confidence": 0.5, "extracted_at": "2026-11-24T10:00:00Z",
                                    bad: 1}) + "\n", encoding="utf-8")
    con = store.connect(db_path)
    before = table_fingerprint(con)
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "ingest", str(path)])
    assert result.exit_code == 2
    assert f"unknown column {bad}" in result.stderr
    con = store.connect(db_path)
    try:
        assert table_fingerprint(con) == before
    finally:
        con.close()


# --- exports ----------------------------------------------------------------------------------


def _label_hostile(con: duckdb.DuckDBPyConnection, sample_id: str) -> list[str]:
    """Labels whose free text is every hostile value (one line ones as reviewers too)."""
    written = []
    for index, text in enumerate(HOSTILE):
        items = next_items(con, QA_LEAD, sample_id, count=1)
        record_verdict(con, actor=QA_LEAD, extraction_id=items[0].extraction_id,
                       verdict="incorrect", corrected_value=text, error_type="other",
                       error_detail=text if text.strip() else f"d{index}")
        written.append(text)
    return written


def test_labels_export_csv_defuses_formulas_and_parquet_keeps_values(
    pcon: duckdb.DuckDBPyConnection, sample_id: str, tmp_path: Path
) -> None:
    written = _label_hostile(pcon, sample_id)
    out_csv = tmp_path / "labels 'export' \"x\".csv"
    out_parquet = tmp_path / "labels 'export' \"x\".parquet"
    total = export_labels(pcon, out_csv)
    assert export_labels(pcon, out_parquet) == total
    _assert_no_live_formula(out_csv)
    exact = pq.read_table(out_parquet).to_pylist()
    assert {r["corrected_value"] for r in exact} >= set(written)
    # CSV: formula-looking (or quote-led) text gains one leading quote; the rest is as stored.
    shown = {r["corrected_value"] for r in _cells(out_csv)}
    for text in written:
        if "\x00" in text:
            continue  # DuckDB's CSV writer keeps the byte; csv.reader cannot compare it
        assert escape_cell(text) in shown, text


def _hostile_sample_csv(con: duckdb.DuckDBPyConnection, folder: Path) -> Path:
    """The hostile rows ingested, all drawn into a sample and written out for labelling."""
    ingest_table(con, _hostile_rows(), source="hostile")
    sample = draw_sample(con, "2026-W48", Design(base_rate=1.0, minimum=2), seed=2,
                         actor=QA_LEAD, redraw=True)
    out = folder / "items.csv"
    write_items_csv(sample_items(con, sample.sample_id), out)
    return out


def test_sample_csv_defuses_formulas_in_every_column(
    pcon: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    _assert_no_live_formula(_hostile_sample_csv(pcon, tmp_path))


def test_sample_csv_defuses_formula_looking_ids_and_they_import_back(
    pcon: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    out = _hostile_sample_csv(pcon, tmp_path)
    _assert_no_live_formula(out)
    # A reviewer fills the verdict column of the hostile rows and imports the file back.
    rows = _cells(out)
    hostile_ids = _hostile_ids()
    filled = [dict(r, verdict="correct", reviewer="rev8") for r in rows
              if unescape_cell(r["extraction_id"]) in hostile_ids]
    assert len(filled) == len(hostile_ids)
    back = tmp_path / "filled.csv"
    with back.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(filled)
    from fieldtrust.labels.label_import import import_labels

    result = import_labels(pcon, back, actor=QA_LEAD)
    assert result.rows_added == len(hostile_ids)
    labelled = {x for (x,) in pcon.execute(
        "SELECT extraction_id FROM labels WHERE reviewer = 'rev8'").fetchall()}
    assert labelled == hostile_ids


def test_dashboard_csv_downloads_defuse_formulas_in_cells_and_headers() -> None:
    frame = pd.DataFrame({"value": list(HOSTILE), "=col": range(len(HOSTILE)),
                          "n": [1.5] * len(HOSTILE)})
    text = csv_bytes(frame).decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["value", "'=col", "n"]
    for cell in (r[0] for r in rows[1:]):
        assert not cell.startswith(FORMULA_START), cell
    assert "'=cmd|' /C calc'!A0" in {r[0] for r in rows[1:]}
    assert "'-2+3" in {r[0] for r in rows[1:]}


def test_hostile_scope_filters_match_nothing_and_run_nothing(
    pcon: duckdb.DuckDBPyConnection,
) -> None:
    before = table_fingerprint(pcon)
    for text in HOSTILE:
        scope = Scope(doc_types=(text,), form_versions=(text,), fields=(text,))
        assert labelled_items(pcon, scope).num_rows == 0
        assert review_pairs(pcon, scope) == []
        assert error_report(pcon, scope).num_rows == 0
    with pytest.raises(ValueError, match="week"):
        Scope(weeks=("2026-W48'; DROP TABLE labels; --",))
    assert table_fingerprint(pcon) == before


# --- shown verbatim in the dashboard -----------------------------------------------------------


@pytest.mark.parametrize("text", [HOSTILE[12], ":red[ALERT] $x^2$ # heading", "a`b``c"],
                         ids=["markdown", "streamlit", "backticks"])
def test_the_review_page_shows_hostile_extractions_as_written(
    pcon: duckdb.DuckDBPyConnection, populated: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    from fieldtrust.dashboard.layout import code_span, plain

    rows = extraction_rows(2, seed=9, prefix="md",
                           start=WEEK_START + dt.timedelta(days=7)).to_pylist()
    for row in rows:
        row.update(doc_id=text, doc_type=text, form_version=text, field=text, value=text)
    rows[1]["field"] = "total"
    # Week 49 may still be ahead of the clock: widen the accepted times for it.
    ingest_table(pcon, pa.Table.from_pylist(rows), source="markdown",
                 window=TimeWindow(ahead=dt.timedelta(days=3650)))
    draw_sample(pcon, "2026-W49", Design(base_rate=1.0, minimum=2), seed=1, actor=QA_LEAD)
    pcon.close()
    at = dashboard_as(populated, monkeypatch, "ben")
    at.switch_page("app_pages/review.py").run()
    assert not at.exception
    shown_field = text if at.subheader[0].value.endswith(plain(text)) else "total"
    assert at.subheader[0].value == f"{plain(text)} · {plain(shown_field)}"
    assert [c.value for c in at.code][:1] == [text]  # the value, in a code block
    details = next(m.value for m in at.markdown if m.value.startswith("Document "))
    assert details.startswith(f"Document {code_span(text)} · type **{plain(text)}**")


def test_the_review_form_stores_hostile_text_and_refuses_incomplete_input(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.dashboard import state

    at = dashboard_as(populated, monkeypatch, "ben")
    at.switch_page("app_pages/review.py").run()
    corrected = HOSTILE[0] + " " + HOSTILE[7] + " " + HOSTILE[6]
    at.text_input(key=state.REVIEW_CORRECTED).set_value(corrected)
    at.selectbox(key=state.REVIEW_ERROR_TYPE).set_value("other")
    con = store.connect(populated, read_only=True)
    before = table_fingerprint(con)
    con.close()

    at.button(key=state.REVIEW_INCORRECT).click().run()  # 'other' without a detail
    assert not at.exception
    assert any("needs a detail" in as_read(e.value) for e in at.error)
    con = store.connect(populated, read_only=True)
    try:
        assert table_fingerprint(con) == before
    finally:
        con.close()

    at.text_input(key=state.REVIEW_CORRECTED).set_value(corrected)
    at.selectbox(key=state.REVIEW_ERROR_TYPE).set_value("other")
    at.text_input(key=state.REVIEW_ERROR_DETAIL).set_value(HOSTILE[1])
    at.button(key=state.REVIEW_INCORRECT).click().run()
    assert not at.exception
    con = store.connect(populated, read_only=True)
    try:
        assert con.execute(
            "SELECT corrected_value, error_type, error_detail FROM labels WHERE reviewer = 'ben'"
        ).fetchall() == [(corrected, "other", HOSTILE[1])]
    finally:
        con.close()
