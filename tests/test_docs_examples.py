"""The converters in docs/examples: each service's recorded-shape output becomes ingestable rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from fieldtrust.ingest.extractions import ingest_files

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"

AZURE_W, AZURE_H = 8.2639, 11.6944
CASES = {
    "textract_to_fieldtrust.py": ("textract_analyze_expense.json", {
        "invoice_number": ("INV-2026-04512", 0.9725, 1, (0.702, 0.144, 0.832, 0.157)),
        "total": ("1,234.50", 0.965, 1, (0.825, 0.697, 0.905, 0.711)),
        "tax": ("197.11", 0.88, 1, (0.835, 0.664, 0.905, 0.677)),
    }),
    "documentai_to_fieldtrust.py": ("documentai_invoice.json", {
        "invoice_number": ("INV-2026-04512", 0.973, 1, (0.702, 0.144, 0.832, 0.157)),
        "total": ("1,234.50", 0.991, 2, (0.825, 0.697, 0.905, 0.711)),  # page "1": the second
        "vendor": ("Brightline Office Supply", 0.88, 1, (0.0, 0.14, 0.35, 0.158)),  # x 0 omitted
    }),
    "azure_di_to_fieldtrust.py": ("azure_prebuilt_invoice.json", {
        "invoice_number": ("INV-2026-04512", 0.961, 1, (5.8013 / AZURE_W, 1.684 / AZURE_H,
                                                      6.8756 / AZURE_W, 1.836 / AZURE_H)),
        "total": ("1,234.50", 0.938, 1, (6.8177 / AZURE_W, 8.151 / AZURE_H,
                                          7.4789 / AZURE_W, 8.3147 / AZURE_H)),
        "vendor": ("Brightline Office Supply", 0.55, None, None),  # no region given
    }),
}


@pytest.mark.parametrize("script", list(CASES))
def test_a_converter_s_rows_ingest_with_their_page_and_box(
    script: str, con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    sample, expected = CASES[script]
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script), str(EXAMPLES / "samples" / sample),
         "--doc-id", "inv-42", "--document-uri", "scans/inv-42.pdf",
         "--extracted-at", "2026-11-30T10:00:00Z"],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = tmp_path / "rows.jsonl"
    rows.write_text(out, encoding="utf-8")
    ingest_files(con, [rows])
    stored = {r[0]: r[1:] for r in con.execute(
        "SELECT field, value, confidence, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1, document_uri"
        " FROM extractions").fetchall()}
    assert set(stored) == set(expected)
    for field, (value, confidence, page, bbox) in expected.items():
        got = stored[field]
        assert got[0] == value and got[1] == pytest.approx(confidence) and got[2] == page
        assert got[7] == "scans/inv-42.pdf"
        if bbox is None:
            assert got[3:7] == (None, None, None, None)
        else:
            assert got[3:7] == pytest.approx(bbox, abs=1e-6)
