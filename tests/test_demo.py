"""The demo store: deterministic rows, the planted miscalibration, the CLI, the reviewers."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from fieldtrust.ingest.extractions import EXTRACTION_COLUMNS
from fieldtrust.store.labelled import labelled_items
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.demo import (
    build_demo,
    ensure_demo_store,
    generate_demo,
)
from fieldtrust.demo.reviewers import simulate_reviews
from fieldtrust.errors import Refused
from tests.conftest import table_fingerprint

PROFILE_ROWS = 60_000
STORE_ROWS = 20_000


@pytest.fixture(scope="module")
def profile() -> duckdb.DuckDBPyConnection:
    """The demo rows joined to their truth, in an in-memory DuckDB (no store needed)."""
    data = generate_demo(seed=7, rows=PROFILE_ROWS)
    con = duckdb.connect()
    con.register("e", data.extractions)
    con.register("t", data.truth)
    con.execute("CREATE TABLE d AS SELECT * FROM e JOIN t USING (extraction_id)")
    return con


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A labelled demo store of STORE_ROWS rows, built once for the module."""
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    con = store.connect(path)
    try:
        build_demo(con, seed=7, rows=STORE_ROWS)
    finally:
        con.close()
    return path


@pytest.fixture
def demo_con(demo_store: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the module's demo store, closed after the test."""
    con = store.connect(demo_store, read_only=True)
    try:
        yield con
    finally:
        con.close()


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> object:
    return con.execute(sql, params or []).fetchall()[0][0]


def _content_hash(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """Order-independent hash of extractions (without the batch id) and of the truth."""
    ext = _one(con, "SELECT bit_xor(hash(x)) FROM (SELECT * EXCLUDE (batch_id) FROM extractions) x")
    truth = _one(con, "SELECT bit_xor(hash(t)) FROM demo_truth t")
    return int(ext), int(truth)  # type: ignore[call-overload]


# --- determinism ---------------------------------------------------------------


def test_same_seed_gives_identical_rows_and_another_seed_does_not() -> None:
    first, again, other = (generate_demo(seed=s, rows=5_000) for s in (7, 7, 8))
    assert first.extractions.equals(again.extractions)
    assert first.truth.equals(again.truth)
    assert not first.extractions.equals(other.extractions)
    assert first.extractions["value"].to_pylist() != other.extractions["value"].to_pylist()


def test_same_seed_gives_identical_stores(tmp_path: Path) -> None:
    hashes = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        con = store.connect(tmp_path / f"{name}.duckdb")
        build_demo(con, seed=seed, rows=3_000, labelled=False)
        hashes.append(_content_hash(con))
        con.close()
    assert hashes[0] == hashes[1]
    assert hashes[0][0] != hashes[2][0]


@pytest.mark.parametrize("rows", [1, 7, 4_321])
def test_exactly_the_rows_asked_for(rows: int) -> None:
    data = generate_demo(seed=1, rows=rows)
    assert data.extractions.num_rows == rows == data.truth.num_rows
    ids = data.extractions["extraction_id"].to_pylist()
    assert len(set(ids)) == rows


def test_weeks_are_fixed_not_todays() -> None:
    data = generate_demo(seed=7, rows=20_000)
    weeks = {t.isocalendar()[:2] for t in data.extractions["extracted_at"].to_pylist()}
    assert weeks == {(2026, w) for w in range(41, 49)}
    assert data.weeks == tuple(f"2026-W{w}" for w in range(41, 49))
    shifted = generate_demo(seed=7, rows=2_000, end_week="2025-W03", weeks=4)
    assert shifted.weeks == ("2024-W52", "2025-W01", "2025-W02", "2025-W03")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rows": 0}, "rows must be between 1 and"),
        ({"weeks": 0}, "weeks must be at least 1"),
        ({"end_week": "2026-48"}, "not an ISO week"),
    ],
)
def test_bad_sizes_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        generate_demo(**kwargs)  # type: ignore[arg-type]


# --- the planted profile ---------------------------------------------------------


def test_overall_accuracy_is_near_97_percent(profile: duckdb.DuckDBPyConnection) -> None:
    accuracy = _one(profile, "SELECT avg(correct::INT) FROM d")
    assert 0.96 <= accuracy <= 0.98  # type: ignore[operator]


def test_handwritten_tax_is_stated_near_90_but_right_near_60(
    profile: duckdb.DuckDBPyConnection,
) -> None:
    conf, acc = profile.execute(
        "SELECT avg(confidence), avg(correct::INT) FROM d"
        " WHERE doc_type = 'handwritten_receipt' AND field = 'tax'"
    ).fetchall()[0]
    assert 0.87 <= conf <= 0.93
    assert 0.5 <= acc <= 0.7
    copied = _one(
        profile,
        "SELECT avg((error_type = 'total_copied_into_tax')::INT) FROM d"
        " WHERE doc_type = 'handwritten_receipt' AND field = 'tax' AND NOT correct",
    )
    assert copied > 0.5  # type: ignore[operator]


def test_invoice_total_is_calibrated_and_handwritten_tax_is_not(
    profile: duckdb.DuckDBPyConnection,
) -> None:
    # Five equal-mass bins of stated confidence: each bin's accuracy is within
    # three standard errors (plus half a point) of its mean confidence.
    bins = profile.execute(
        """
        SELECT avg(confidence), avg(correct::INT), count(*) FROM (
            SELECT *, ntile(5) OVER (ORDER BY confidence, extraction_id) AS b FROM d
            WHERE doc_type = 'invoice' AND field = 'total')
        GROUP BY b ORDER BY b
        """
    ).fetchall()
    for conf, acc, n in bins:
        se = np.sqrt(max(acc * (1 - acc), 0.01) / n)
        assert abs(conf - acc) <= 3 * se + 0.005, (conf, acc, n)
    gap = _one(
        profile,
        "SELECT avg(confidence) - avg(correct::INT) FROM d"
        " WHERE doc_type = 'handwritten_receipt' AND field = 'tax'",
    )
    assert gap > 0.2  # type: ignore[operator]


def test_most_strata_are_overconfident(profile: duckdb.DuckDBPyConnection) -> None:
    gaps = [
        g
        for (g,) in profile.execute(
            "SELECT avg(confidence) - avg(correct::INT) FROM d GROUP BY doc_type, field"
        ).fetchall()
    ]
    assert len(gaps) == 22
    assert sum(g > 0 for g in gaps) >= 15


@pytest.mark.parametrize(
    ("doc_type", "new", "old", "weeks"),
    [
        ("invoice", "v3-2026", "v2", ("2026-W47", "2026-W48")),
        ("purchase_order", "po-2026", "po-2021", ("2026-W48",)),
    ],
)
def test_new_form_version_appears_late_and_is_worse(
    profile: duckdb.DuckDBPyConnection, doc_type: str, new: str, old: str, weeks: tuple[str, ...]
) -> None:
    seen = [
        w
        for (w,) in profile.execute(
            "SELECT DISTINCT strftime(extracted_at, '%G-W%V') AS w FROM d"
            " WHERE doc_type = ? AND form_version = ? ORDER BY w",
            [doc_type, new],
        ).fetchall()
    ]
    assert tuple(seen) == weeks
    acc = dict(
        profile.execute(
            "SELECT form_version, avg(correct::INT) FROM d WHERE doc_type = ?"
            " AND strftime(extracted_at, '%G-W%V') IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL",
            [doc_type, list(weeks)],
        ).fetchall()
    )
    assert acc[new] < acc[old] - 0.01


def test_some_strata_can_be_automated_at_95(profile: duckdb.DuckDBPyConnection) -> None:
    good = {
        (t, f)
        for t, f, acc, n in profile.execute(
            "SELECT doc_type, field, avg(correct::INT), count(*) FROM d"
            " WHERE confidence >= 0.95 GROUP BY ALL"
        ).fetchall()
        if acc >= 0.98 and n >= 1_000
    }
    assert {
        ("invoice", "currency"),
        ("invoice", "invoice_number"),
        ("purchase_order", "po_number"),
    } <= good


def test_printed_receipt_date_drifts_in_the_last_two_weeks(
    profile: duckdb.DuckDBPyConnection,
) -> None:
    early, late = (
        r[0]
        for r in profile.execute(
            "SELECT avg(correct::INT) FROM d WHERE doc_type = 'printed_receipt' AND field = 'date'"
            " GROUP BY strftime(extracted_at, '%G-W%V') >= '2026-W47' ORDER BY 1 DESC"
        ).fetchall()
    )
    assert late < early - 0.01


def test_volumes_are_realistic(profile: duckdb.DuckDBPyConnection) -> None:
    docs = dict(
        profile.execute("SELECT doc_type, count(DISTINCT doc_id) FROM d GROUP BY ALL").fetchall()
    )
    assert max(docs, key=docs.__getitem__) == "invoice"
    assert min(docs, key=docs.__getitem__) == "handwritten_receipt"
    weekly = [
        n
        for (_, n) in profile.execute(
            "SELECT strftime(extracted_at, '%G-W%V') AS w, count(*) FROM d GROUP BY w ORDER BY w"
        ).fetchall()
    ]
    assert len(weekly) == 8 and weekly[-1] > weekly[0]


# --- what the rows look like -----------------------------------------------------


def test_values_statuses_and_truth_are_consistent(profile: duckdb.DuckDBPyConnection) -> None:
    bad = profile.execute(
        """
        SELECT count(*) FILTER (WHERE value_status IN ('null', 'unclear') AND value IS NOT NULL),
               count(*) FILTER (WHERE value_status IN ('present', 'other') AND value IS NULL),
               count(*) FILTER (WHERE NOT correct AND value_status <> 'unclear'
                                AND value IS NOT DISTINCT FROM true_value),
               count(*) FILTER (WHERE correct AND value_status IN ('present', 'other')
                                AND value IS DISTINCT FROM true_value),
               count(*) FILTER (WHERE NOT correct AND error_type IS NULL),
               count(*) FILTER (WHERE conflict AND (conflict_value IS NULL
                                                    OR conflict_value = value))
        FROM d
        """
    ).fetchall()[0]
    assert bad == (0, 0, 0, 0, 0, 0)
    shares = profile.execute(
        """
        SELECT avg((value_status = 'null')::INT), avg((value_status = 'unclear')::INT),
               avg((value_status = 'other')::INT), avg(conflict::INT),
               avg((source_excerpt IS NOT NULL)::INT)
        FROM d
        """
    ).fetchall()[0]
    null, unclear, other, conflict, excerpt = shares
    assert 0.002 < null < 0.05 and 0.0005 < unclear < 0.01 and 0.0005 < other < 0.01
    assert 0.002 < conflict < 0.03
    assert 0.85 < excerpt < 0.95


def test_conflicts_flag_mostly_wrong_extractions(profile: duckdb.DuckDBPyConnection) -> None:
    with_conflict, without = (
        r[0]
        for r in profile.execute(
            "SELECT avg(correct::INT) FROM d GROUP BY conflict ORDER BY conflict DESC"
        ).fetchall()
    )
    assert with_conflict < 0.8 < 0.95 < without


def test_values_look_real() -> None:
    rows = generate_demo(seed=7, rows=2_000).extractions.to_pylist()
    by_field = {r["field"]: r["value"] for r in rows if r["value_status"] == "present"}
    assert by_field["date"][:4] == "2026" and by_field["date"][4] == "-"
    assert by_field["po_number"].startswith("PO-")
    assert by_field["currency"] in ("EUR", "USD", "GBP", "CHF")
    float(by_field["total"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 1_500))
def test_any_seed_gives_valid_rows(seed: int, rows: int) -> None:
    data = generate_demo(seed=seed, rows=rows)
    table = data.extractions
    assert table.num_rows == rows
    conf = np.asarray(table["confidence"])
    assert ((conf >= 0) & (conf <= 1)).all()
    status = table["value_status"].to_pylist()
    value = table["value"].to_pylist()
    assert set(status) <= {"present", "null", "unclear", "other"}
    assert all(
        (v is None) == (s in ("null", "unclear")) for v, s in zip(value, status, strict=True)
    )
    truth = data.truth.to_pylist()
    for v, s, t in zip(value, status, truth, strict=True):
        if not t["correct"] and s != "unclear":
            assert v != t["true_value"]


# --- the store -------------------------------------------------------------------


def test_demo_went_through_ingest(demo_con: duckdb.DuckDBPyConnection) -> None:
    batch = demo_con.execute("SELECT source, format, rows_added FROM ingest_batches").fetchall()
    assert batch == [("demo", "demo", STORE_ROWS)]
    assert _one(demo_con, "SELECT count(*) FROM demo_truth") == STORE_ROWS
    first = dict(
        demo_con.execute(
            "SELECT form_version, strftime(first_seen_at, '%G-W%V') FROM form_versions"
        ).fetchall()
    )
    assert first["v3-2026"] == "2026-W47" and first["v2"] == "2026-W41"


def test_building_over_a_store_with_rows_is_refused(demo_store: Path) -> None:
    con = store.connect(demo_store)
    try:
        before = table_fingerprint(con)
        with pytest.raises(Refused, match=f"already holds {STORE_ROWS:,}"):
            build_demo(con, rows=100)
        assert table_fingerprint(con) == before
    finally:
        con.close()


def test_reviewers_labelled_eight_weekly_samples(demo_con: duckdb.DuckDBPyConnection) -> None:
    assert _one(demo_con, "SELECT count(*) FROM audit_samples") == 8
    cells = demo_con.execute("""
        SELECT s.week = (SELECT max(week) FROM audit_samples) AS newest, i.cell,
               count(*) AS n,
               count(*) FILTER (WHERE l.extraction_id IS NOT NULL) AS labelled,
               -- labelled items form a prefix in PRN order: none after the first gap
               max(i.prn) FILTER (WHERE l.extraction_id IS NOT NULL)
                 <= coalesce(min(i.prn) FILTER (WHERE l.extraction_id IS NULL), 2) AS prefix
        FROM audit_items i JOIN audit_samples s USING (sample_id)
        LEFT JOIN labels l ON l.extraction_id = i.extraction_id
             AND l.review_round = 'primary'
        GROUP BY ALL""").fetchall()
    # Every earlier week is fully labelled; the newest about 60%, per cell, by PRN
    # prefix, so a visitor acting as a reviewer has items waiting.
    assert all(labelled == n for newest, _, n, labelled, _ in cells if not newest)
    newest = [(n, labelled, prefix) for is_newest, _, n, labelled, prefix in cells
              if is_newest]
    assert newest and all(labelled == max(1, math.ceil(0.6 * n)) and prefix
                          for n, labelled, prefix in newest)
    share = sum(c[1] for c in newest) / sum(c[0] for c in newest)
    assert 0.6 <= share < 0.7
    doubles = demo_con.execute("""
        SELECT count(*), count(s.label_id), count(*) FILTER (WHERE s.reviewer = p.reviewer)
        FROM audit_items i
        JOIN labels p ON p.extraction_id = i.extraction_id AND p.review_round = 'primary'
        LEFT JOIN labels s ON s.extraction_id = i.extraction_id AND s.review_round = 'second'
        WHERE i.double_review""").fetchall()[0]
    assert doubles[0] > 0 and doubles[1] == doubles[0] and doubles[2] == 0
    agree = _one(
        demo_con,
        """
        SELECT avg(((l.verdict = 'correct') = t.correct)::INT) FROM labels l
        JOIN demo_truth t USING (extraction_id) WHERE l.review_round = 'primary'""",
    )
    assert 0.98 <= agree < 1.0  # type: ignore[operator]
    copied = _one(
        demo_con,
        """
        SELECT count(*) FROM effective_labels l JOIN extractions e USING (extraction_id)
        WHERE e.doc_type = 'handwritten_receipt' AND e.field = 'tax'
          AND l.error_type = 'total_copied_into_tax'""",
    )
    assert copied > 0  # type: ignore[operator]


def test_design_weighted_labels_estimate_the_true_accuracy(
    demo_con: duckdb.DuckDBPyConnection,
) -> None:
    items = labelled_items(demo_con)
    weight = np.asarray(items["weight"])
    correct = np.asarray(items["correct"])
    estimate = float((weight * correct).sum() / weight.sum())
    truth = float(_one(demo_con, "SELECT avg(correct::INT) FROM demo_truth"))  # type: ignore[arg-type]
    assert abs(estimate - truth) < 0.015
    assert correct.mean() < truth - 0.05  # unweighted: the boosted small cells dominate


def test_reviewers_need_truth_and_two_people(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(Refused, match="no demo truth"):
        simulate_reviews(con, seed=1)
    with pytest.raises(ValueError, match="at least two reviewers"):
        simulate_reviews(con, seed=1, reviewers=("ana",))


def test_ensure_builds_once(tmp_path: Path) -> None:
    path = tmp_path / "serve.duckdb"
    assert ensure_demo_store(path, rows=2_000) == path
    con = store.connect(path)
    before = table_fingerprint(con)
    con.close()
    ensure_demo_store(path, rows=9_999)
    con = store.connect(path)
    assert table_fingerprint(con) == before
    con.close()


# --- the command -----------------------------------------------------------------


def test_cli_prints_overall_next_to_worst_strata(tmp_path: Path) -> None:
    path = tmp_path / "cli.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(path), "demo", "--rows", "10000", "--no-labels"])
    assert result.exit_code == 0, result.output
    assert "10,000 extractions" in result.output
    assert "8 weeks (2026-W41..2026-W48)" in result.output
    assert "true accuracy overall" in result.output
    worst = result.output.split("worst are:")[1].splitlines()
    assert worst[3].startswith("handwritten_receipt  tax")
    assert "new form version invoice v3-2026" in result.output


def test_cli_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "cli.duckdb"
    runner = CliRunner()
    args = ["--db", str(path), "demo", "--rows", "500", "--no-labels"]
    assert runner.invoke(cli, args).exit_code == 0
    refused = runner.invoke(cli, [*args, "--seed", "9"])
    assert refused.exit_code == 2
    assert "error: the store already holds 500 extractions" in refused.output
    assert "--force" in refused.output
    rebuilt = runner.invoke(cli, [*args, "--rows", "700", "--force"])
    assert rebuilt.exit_code == 0, rebuilt.output
    con = store.connect(path, read_only=True)
    assert _one(con, "SELECT count(*) FROM extractions") == 700
    con.close()


def test_cli_help_has_an_example() -> None:
    result = CliRunner().invoke(cli, ["demo", "--help"])
    assert result.exit_code == 0
    assert "Example: fieldtrust" in result.output


def test_generated_table_has_the_ingest_columns() -> None:
    table = generate_demo(seed=7, rows=10).extractions
    assert table.column_names == list(EXTRACTION_COLUMNS)
    assert table.schema.field("extracted_at").type == pa.timestamp("us")
