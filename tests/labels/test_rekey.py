"""Blind re-keying on a real seeded store: typed values compared, mismatches adjudicated.

The reviewer never sees the value (nor the excerpt around it); a match is
a correct primary label, a mismatch waits for the qa_lead and holds an
approval back; on a seed, typing the seeded value is a miss.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.rekey import next_blind_items, record_rekey, rekey_queue, same_value
from fieldtrust.labels.seed_verdicts import seed_judgements

from fieldtrust.cli.main import cli
from fieldtrust.errors import Refused
from tests.seeded import seeded_store


@pytest.fixture
def seeded(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return seeded_store(tmp_path / "rekey.duckdb")


def _value(con: duckdb.DuckDBPyConnection, item_id: str) -> str:
    row = con.execute("SELECT seed_value FROM seed_items WHERE seed_id = $id UNION ALL"
                      " SELECT value FROM extractions WHERE extraction_id = $id",
                      {"id": item_id}).fetchall()
    return str(row[0][0])


@pytest.mark.parametrize(("typed", "stored", "same"), [
    ("1,234.50", "1234.5", True), (" ACME ", "acme", True), ("1243.50", "1234.50", False),
    (None, None, True), ("12", None, False),
])
def test_typed_values_compare_as_values(typed: str | None, stored: str | None,
                                        same: bool) -> None:
    assert same_value(typed, stored) is same


def test_blind_items_hide_the_value_and_keep_to_high_confidence(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    items = next_blind_items(seeded, "ana", above=0.95, count=40)
    assert len(items) == 40
    assert not hasattr(items[0], "value") and not hasattr(items[0], "source_excerpt")
    ids = [i.extraction_id for i in items]
    confidence = dict(seeded.execute(
        "SELECT extraction_id, confidence FROM extractions WHERE list_contains($ids,"
        " extraction_id) UNION ALL SELECT seed_id, confidence FROM seed_items"
        " WHERE list_contains($ids, seed_id)", {"ids": ids}).fetchall())
    assert min(confidence[i] for i in ids) >= 0.95


def test_a_match_is_a_correct_label_and_a_mismatch_waits_for_adjudication(
    seeded: duckdb.DuckDBPyConnection,
) -> None:
    seeds = {s for (s,) in seeded.sql("SELECT seed_id FROM seed_items").fetchall()}
    real = [i for i in next_blind_items(seeded, "ana", above=0.9, count=60)
            if i.extraction_id not in seeds]
    first, second = real[0].extraction_id, real[1].extraction_id
    matched = record_rekey(seeded, actor="ana", extraction_id=first,
                           typed_value=_value(seeded, first))
    assert matched.matches and matched.label is not None
    assert seeded.execute("SELECT verdict, review_round FROM effective_labels"
                          " WHERE extraction_id = ?", [first]).fetchall() == [
        ("correct", "primary")]
    differed = record_rekey(seeded, actor="ana", extraction_id=second, typed_value="0.01")
    assert not differed.matches and differed.label is None
    assert [w.extraction_id for w in rekey_queue(seeded)] == [second]
    assert seeded.execute("SELECT count(*) FROM labels WHERE extraction_id = ?",
                          [second]).fetchall() == [(0,)]
    with pytest.raises(Refused, match="judged already"):
        record_rekey(seeded, actor="ben", extraction_id=second, typed_value="0.01")
    adjudicate(seeded, "quinn", second, "correct")
    assert rekey_queue(seeded) == []
    assert seeded.execute("SELECT verdict FROM effective_labels WHERE extraction_id = ?",
                          [second]).fetchall() == [("correct",)]


def test_typing_a_seeded_value_is_a_miss(seeded: duckdb.DuckDBPyConnection) -> None:
    seeds = seeded.sql("SELECT seed_id, true_value FROM seed_items WHERE field = 'total'"
                       " ORDER BY seed_id LIMIT 2").fetchall()
    record_rekey(seeded, actor="ana", extraction_id=seeds[0][0],
                 typed_value=_value(seeded, seeds[0][0]))  # passed the wrong value
    record_rekey(seeded, actor="ana", extraction_id=seeds[1][0], typed_value=seeds[1][1])
    judged = seed_judgements(seeded, doc_type="invoice", field="total")
    assert (judged.judged, judged.missed) == (2, 1)
    assert seeded.sql("SELECT count(*) FROM labels").fetchall() == [(0,)]


def test_the_cli_hands_out_a_blind_item_and_records_the_typed_value(
    seeded: duckdb.DuckDBPyConnection, tmp_path: Path,
) -> None:
    db = tmp_path / "rekey.duckdb"
    seeded.close()
    shown = CliRunner().invoke(cli, ["--db", str(db), "rekey", "--next", "--as", "ana",
                                     "--json"])
    assert shown.exit_code == 0, shown.output
    [item] = json.loads(shown.output)
    assert "value" not in item
    typed = CliRunner().invoke(cli, ["--db", str(db), "rekey", item["extraction_id"], "0.01",
                                     "--as", "ana"])
    assert typed.exit_code == 0 and "recorded" in typed.output
    refused = CliRunner().invoke(cli, ["--db", str(db), "rekey", item["extraction_id"],
                                       "0.01", "--as", "ana"])
    assert refused.exit_code == 2 and "judged already" in refused.output
