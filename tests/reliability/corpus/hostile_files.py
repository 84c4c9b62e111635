"""The fixed corpus of hostile input files, as code (tests write them into tmp_path).

Each case is a file name, its bytes, and what must happen: ``reject`` with
the fragments the error message must hold (row, column, value, what to do),
or ``accept`` with the rows that must land. Kept as code rather than files so
the 1 MB cases cost nothing in the repository and every byte is visible.
Cases marked with ``xfail`` are known gaps, explained in docs/reliability.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEADER = "doc_id,doc_type,field,confidence,extracted_at"
TIME = "2026-11-24T10:00:00Z"


@dataclass(frozen=True)
class Case:
    """One hostile file: ``expect`` fragments for a rejection, ``rows`` for an acceptance."""

    name: str
    content: bytes
    outcome: str  # 'reject' | 'accept'
    expect: tuple[str, ...] = ()
    rows: dict[str, tuple[object, ...]] = field(default_factory=dict)  # doc_id -> stored values
    xfail: str | None = None


def _csv(*lines: str, header: str = HEADER, crlf: bool = False) -> bytes:
    text = "\n".join([header, *lines]) + "\n"
    return (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")


def _row(doc_id: str = "d1", confidence: str = "0.9", extracted_at: str = TIME,
         doc_type: str = "invoice", field_name: str = "total") -> str:
    return f"{doc_id},{doc_type},{field_name},{confidence},{extracted_at}"


EXTRACTION_CASES: tuple[Case, ...] = (
    # --- columns ---
    Case("missing_column.csv", _csv("d1,invoice,total,2026-11-24T10:00:00Z",
                                    header="doc_id,doc_type,field,extracted_at"),
         "reject", ("missing required column confidence", "columns found: doc_id")),
    Case("renamed_column.csv", _csv(_row(), header=HEADER.replace("confidence", "confidance")),
         "reject", ("missing required column confidence", "unknown column confidance")),
    Case("duplicate_header.csv", _csv(_row() + ",x", header=HEADER + ",doc_id"),
         "reject", ("column doc_id appears more than once",)),
    Case("blank_header.csv", _csv(_row() + ",x", header=HEADER + ","),
         "reject", ("header column 6: has no name",)),
    # --- confidence ---
    Case("confidence_nan.csv", _csv(_row(confidence="NaN")),
         "reject", ("row 1, column confidence: NaN is not a number in [0, 1]",)),
    Case("confidence_values.csv",
         _csv(_row("d1", "-0.1"), _row("d2", "1.2"), _row("d3", "high"), _row("d4", "inf"),
              _row("d5", "=1+1"), _row("d6", '"0,93"')),
         "reject", ("row 1, column confidence: -0.1 is outside [0, 1]",
                    "row 2, column confidence: 1.2 is outside [0, 1]",
                    "row 3, column confidence: 'high' is not a number",
                    "row 4, column confidence: inf is not a number in [0, 1]",
                    "row 5, column confidence: '=1+1' is not a number",
                    "row 6, column confidence: '0,93' is not a number",
                    "rejected, 6 problems; nothing was written")),
    Case("confidence_edges.csv", _csv(_row("d1", "0"), _row("d2", "1"), _row("d3", " 0.5 "),
                                      _row("d4", "1e-3")),
         "accept", rows={"d1": (0.0,), "d2": (1.0,), "d3": (0.5,), "d4": (0.001,)}),
    # --- empty and short ---
    Case("empty.csv", b"", "reject", ("no rows: the file is empty",)),
    Case("header_only.csv", _csv(), "reject", ("no rows",)),
    Case("blank_lines_only.csv", _csv("", ""), "reject", ("no rows",)),
    Case("empty.jsonl", b"\n\n", "reject", ("no rows",)),
    Case("ragged_row.csv", _csv(_row(), _row("d2") + ",extra"),
         "reject", ("Line: 3", "Expected Number of Columns: 5 Found: 6")),
    Case("short_row.csv", _csv("d1,invoice,total"), "reject", ("Line: 2", "Found: 3")),
    Case("blank_required.csv", _csv(_row(doc_id=""), _row("d2", doc_type="  ")),
         "reject", ("row 1, column doc_id: missing", "row 2, column doc_type: missing")),
    # --- ids ---
    Case("duplicate_ids.csv",
         _csv("x1," + _row("d1"), "x1," + _row("d2"), header="extraction_id," + HEADER),
         "reject", ("row 2, column extraction_id: 'x1' repeats row 1",)),
    Case("duplicate_derived_ids.csv", _csv(_row("d1"), _row("d1")),
         "reject", ("row 2, column extraction_id:", "same doc_id, doc_type, field")),
    # --- sizes ---
    Case("megabyte_confidence.csv", _csv(_row(confidence="9" * 1_000_000)),
         "reject", ("row 1, column confidence: 999", "...")),
    Case("megabyte_value.csv", _csv("x" * 1_000_000 + "," + _row(), header="value," + HEADER),
         "accept", rows={"d1": (0.9,)}),
    # --- encodings ---
    Case("latin1.csv", (HEADER + "\nd1,factur\xe9,total,0.9," + TIME + "\n").encode("latin-1"),
         "reject", ("not UTF-8",)),
    Case("mixed_encodings.csv",
         _csv(_row(doc_type="caf\u00e9")) + ("d2,caf\xe9,total,0.9," + TIME + "\n").encode(
             "latin-1"),
         "reject", ("not UTF-8",)),
    Case("utf16.csv", (HEADER + "\n" + _row() + "\n").encode("utf-16"), "reject", ("not UTF-8",)),
    Case("invalid_utf8_late.csv",
         _csv(*[_row(f"d{i}") for i in range(3000)]) + b"d9999,inv\xff\xfeoice,total,0.5,"
         + TIME.encode() + b"\n",
         "reject", ("Line: 3002", "not utf-8 encoded")),
    # --- Excel ---
    Case("excel_bom_crlf.csv", b"\xef\xbb\xbf" + _csv(_row("d1"), _row("d2", "0.5"), crlf=True),
         "accept", rows={"d1": (0.9,), "d2": (0.5,)}),
    Case("excel_export_sc.csv",
         _csv("d1;invoice;total;0,9;" + TIME, header=HEADER.replace(",", ";"), crlf=True),
         "reject", ("is separated by semicolons, not commas",
                    "save the file as comma-separated CSV")),
    # --- timestamps ---
    Case("timestamps_rejected.csv",
         _csv(_row("d1", extracted_at="05/01/2026 10:00"), _row("d2", extracted_at="1767607200"),
              _row("d3", extracted_at="2026-13-01T00:00:00Z"),
              _row("d4", extracted_at="2026-01-05T25:00:00Z"),
              _row("d5", extracted_at="yesterday"),
              _row("d6", extracted_at='"Mon, 05 Jan 2026 10:00:00 GMT"')),
         "reject", (
             "row 1, column extracted_at: '05/01/2026 10:00' is not an ISO 8601 timestamp",
             "row 2, column extracted_at: '1767607200'",
             "row 3, column extracted_at: '2026-13-01T00:00:00Z'",
             "row 4, column extracted_at: '2026-01-05T25:00:00Z'",
             "row 5, column extracted_at: 'yesterday'",
             "row 6, column extracted_at: 'Mon, 05 Jan 2026 10:00:00 GMT'",
         )),
    Case("timestamps_zones.csv",
         _csv(_row("d1", extracted_at="2026-01-05T10:00:00+05:30"),
              _row("d2", extracted_at="2026-01-05 10:00:00-08:00"),
              _row("d3", extracted_at="2026-01-05T10:00:00 Europe/Paris"),
              _row("d4", extracted_at="2026-01-05"),
              _row("d5", extracted_at="2026-01-05T10:00:00.123456Z")),
         "accept", rows={"d1": ("2026-01-05 04:30:00",), "d2": ("2026-01-05 18:00:00",),
                         "d3": ("2026-01-05 09:00:00",), "d4": ("2026-01-05 00:00:00",),
                         "d5": ("2026-01-05 10:00:00.123456",)}),
    Case("timestamps_special_words.csv",
         _csv(_row("d1", extracted_at="infinity"), _row("d2", extracted_at="epoch"),
              _row("d3", extracted_at="-infinity")),
         "reject", ("row 1, column extracted_at: 'infinity' is not an ISO 8601 timestamp",
                    "row 2, column extracted_at: 'epoch'", "row 3, column extracted_at:")),
    # --- JSON ---
    Case("broken.jsonl",
         b'{"doc_id":"d1","doc_type":"invoice","field":"total","confidence":0.5,'
         b'"extracted_at":"2026-11-24T10:00:00Z"}\n{"doc_id":"d2", oops\n',
         "reject", ("line 2 is not valid JSON",)),
    Case("not_objects.jsonl", b'[1, 2]\n"text"\n', "reject", ("row 1: a JSON array, not an object",
                                                          "row 2: a JSON varchar")),
    Case("json_types.jsonl",
         b'{"doc_id":null,"doc_type":"invoice","field":"total","confidence":0.5,'
         b'"extracted_at":"2026-11-24T10:00:00Z"}\n'
         b'{"doc_id":"d2","doc_type":"invoice","field":"total","confidence":true,'
         b'"extracted_at":1767607200}\n',
         "reject", ("row 1, column doc_id: missing", "row 2, column confidence: 'true'",
                    "row 2, column extracted_at: '1767607200'")),
    Case("json_array_as_text.jsonl",
         b'{"doc_id":"d1","doc_type":["invoice"],"field":"total","confidence":0.5,'
         b'"extracted_at":"2026-11-24T10:00:00Z"}\n',
         "reject", ("row 1, column doc_type: '[\"invoice\"]' is a JSON array, not a single value",
                    "write one string or number")),
    # --- files that are not extraction files ---
    Case("workbook.xlsx", b"PK\x03\x04 not a csv", "reject", ("unknown file type '.xlsx'",)),
    Case("no_extension", b"doc_id\n", "reject", ("unknown file type '(none)'",)),
    Case("binary.csv", bytes(range(256)) * 4, "reject", ("rejected",)),
    Case("parquet_garbage.parquet", b"PAR1 not really parquet", "reject",
         ("cannot read as parquet",)),
)

LABEL_HEADER = "extraction_id,verdict,reviewer,labeled_at"
LABEL_TIME = "2026-11-30T10:00:00Z"

LABEL_CASES: tuple[Case, ...] = (
    Case("unknown_id.csv", _csv(f"nope,correct,a,{LABEL_TIME}", header=LABEL_HEADER),
         "reject", ("row 1, column extraction_id: 'nope' is not in the store",)),
    Case("bad_verdict.csv", _csv(f"x000001,yes,a,{LABEL_TIME}", f"x000002,,a,{LABEL_TIME}",
                                 f"x000003,CORRECT,a,{LABEL_TIME}", header=LABEL_HEADER),
         "reject", ("row 1, column verdict: 'yes' is not one of correct, incorrect, unclear",
                    "rejected, 1 problem")),
    Case("no_verdict_column.csv", _csv("x000001,a", header="extraction_id,reviewer"),
         "reject", ("missing required column verdict",)),
    Case("bad_labeled_at.csv", _csv("x000001,correct,a,30/11/2026", header=LABEL_HEADER),
         "reject", ("row 1, column labeled_at: '30/11/2026' is not an ISO 8601 timestamp",)),
    Case("unknown_sample.csv", _csv("x000001,correct,2026-W99/v1",
                                    header="extraction_id,verdict,sample_id"),
         "reject", ("row 1, column sample_id: '2026-W99/v1' is not an audit sample",)),
    Case("bad_status.csv", _csv("x000001,incorrect,maybe",
                                header="extraction_id,verdict,corrected_status"),
         "reject", ("row 1, column corrected_status: 'maybe' is not one of",)),
    Case("conflicting_rows.csv", _csv(f"x000001,correct,a,{LABEL_TIME}",
                                      f"x000001,incorrect,a,{LABEL_TIME}", header=LABEL_HEADER),
         "reject", ("row 2, column extraction_id: 'x000001' is labelled differently on row 1",)),
    Case("labels_empty.csv", b"", "reject", ("no rows: the file is empty",)),
    Case("labels_header_only.csv", _csv(header=LABEL_HEADER), "reject", ("no rows",)),
    Case("labels_latin1.csv",
         (LABEL_HEADER + f"\nx000001,correct,Jos\xe9,{LABEL_TIME}\n").encode("latin-1"),
         "reject", ("not UTF-8",)),
    Case("labels_export_sc.csv",
         _csv(f"x000001;correct;a;{LABEL_TIME}", header=LABEL_HEADER.replace(",", ";")),
         "reject", ("is separated by semicolons, not commas",)),
    Case("labels_unknown_error_type.csv",
         _csv("x000001,incorrect,nonsense", header="extraction_id,verdict,error_type"),
         # A verdict without a correction imports (not_recorded history); a bad type does not.
         "reject", ("row 1, column error_type: 'nonsense' is not in the taxonomy",
                    "rejected, 1 problem")),
    Case("labels_other_without_detail.csv",
         _csv("x000001,incorrect,12.00,other,", header="extraction_id,verdict,corrected_value,"
              "error_type,error_detail"),
         "reject", ("row 1, column error_detail: error type 'Other' needs a detail",)),
    Case("labels_correct_with_error_type.csv",
         _csv("x000001,correct,wrong_field", header="extraction_id,verdict,error_type"),
         "reject", ("row 1, column error_type: 'Correct' takes no error type (error_type)",)),
    Case("labels_reviewer_line_break.csv",
         _csv(f'x000001,correct,"ana\nbob",{LABEL_TIME}', header=LABEL_HEADER),
         "reject", ("row 1, column reviewer: 'ana\\nbob' is not a usable name",)),
    Case("labels_reviewer_escape_code.csv",
         _csv(f"x000001,correct,ana\x1b[31m,{LABEL_TIME}", header=LABEL_HEADER),
         "reject", ("row 1, column reviewer: 'ana\\x1b[31m' is not a usable name",)),
    Case("labels_excel_bom_crlf.csv",
         b"\xef\xbb\xbf" + _csv(f"x000001,correct,ana,{LABEL_TIME}", header=LABEL_HEADER,
                                crlf=True),
         "accept", rows={"x000001": ("correct", "ana")}),
    Case("it's \"labels\"; DROP TABLE labels; --.csv",
         _csv(f"x000002,unclear,\"o'brien; --\",{LABEL_TIME}", header=LABEL_HEADER),
         "accept", rows={"x000002": ("unclear", "o'brien; --")}),
)
