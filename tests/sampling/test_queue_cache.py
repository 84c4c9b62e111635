"""The review queue's cache (store.queue_cache) gives the queue ranking every row gives.

Rows come in through ingest (the path that keeps the cache), with many ties,
conflicts and unclear values over three weeks; a shallow cache (depth 6) makes
most partitions keep a frontier, so the frontier rule is what is tested. Each
answer is compared with the queue ranked over the rows themselves, on the same
store, for several scopes and limits.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.sampling import queue
from fieldtrust.sampling.queue import priority_queue
from fieldtrust.store import queue_cache
from fieldtrust.store.scope import Scope

from tests.sampling.test_review_queue import add_map, decide

WEEKS = ("2026-W44", "2026-W45", "2026-W46")
DEPTH = 6


def batch(seed: int, n: int, weeks: tuple[str, ...] = WEEKS) -> pa.Table:
    """``n`` extractions of three strata over ``weeks``: coarse confidences (ties)."""
    rng = np.random.default_rng(seed)
    mondays = [dt.datetime.strptime(w + "-1", "%G-W%V-%u") for w in weeks]
    strata = [("invoice", "total"), ("invoice", "tax"), ("receipt", "date")]
    picks = rng.integers(0, len(strata), n)
    conflict = rng.random(n) < 0.06
    unclear = rng.random(n) < 0.06
    return pa.table({
        "extraction_id": [f"s{seed}-{i:05d}" for i in range(n)],
        "doc_id": [f"d{seed}-{i // 3}" for i in range(n)],
        "doc_type": [strata[p][0] for p in picks],
        "field": [strata[p][1] for p in picks],
        "form_version": rng.choice(["v1", "v2"], n),
        "value": [f"{i}.00" for i in range(n)],
        "value_status": np.where(unclear, "unclear", "present"),
        "confidence": np.round(rng.random(n) * 20) / 20,
        "extracted_at": [
            mondays[int(rng.integers(0, len(mondays)))] + dt.timedelta(seconds=int(s))
            for s in rng.integers(0, 7 * 86400, n)
        ],
        "conflict": conflict,
        "conflict_value": np.where(conflict, "other", None),
    })


def label(con: duckdb.DuckDBPyConnection, ids: list[str]) -> None:
    for index, extraction_id in enumerate(ids):
        con.execute(
            "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
            " labeled_at) VALUES (?, ?, 'correct', 'ana', 'primary', TIMESTAMP '2026-12-02')",
            [f"q-{extraction_id}-{index}", extraction_id],
        )


SCOPES = [
    Scope(),
    Scope(weeks=("2026-W46",)),
    Scope(weeks=("2026-W45", "2026-W46"), doc_types=("invoice",)),
    Scope(form_versions=("v2",)),
    Scope(fields=("date",), weeks=("2026-W44",)),
]


def assert_same(con: duckdb.DuckDBPyConnection, *, answered: bool = True) -> int:
    """Cache and rows agree on every scope and limit; return how many the cache answered."""
    served = 0
    for scope in SCOPES:
        for limit in (1, 5, DEPTH):
            rows = queue._ranked_rows(con, scope, limit)
            assert priority_queue(con, scope, limit=limit).equals(rows)
            cached = queue._from_cache(con, scope, limit)
            if cached is not None:
                served += 1
                assert cached.equals(rows), (scope, limit)
    if answered:
        assert served > 0
    return served


@pytest.fixture
def queued(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    ingest_table(con, batch(1, 1500), source="first.parquet")
    queue_cache.refresh(con, depth=DEPTH)
    add_map(con, "invoice", "total", [(0.0, 0.1), (0.5, 0.3), (0.8, 0.3), (1.0, 0.9)])
    decide(con, "d1", "invoice", "tax", "approve", 0.8, 1)
    return con


def test_the_cache_answers_as_the_rows_do(queued: duckdb.DuckDBPyConnection) -> None:
    assert queue_cache.is_current(queued)
    frontiers = queued.sql(
        "SELECT count(*) FROM queue_partitions WHERE frontier_id IS NOT NULL").fetchall()[0][0]
    assert frontiers > 10  # the shallow cache keeps most partitions incomplete
    assert assert_same(queued) == len(SCOPES) * 3  # nothing was labelled: all from the cache


def test_labelled_items_leave_the_cache_and_a_hidden_item_forces_the_rows(
    queued: duckdb.DuckDBPyConnection,
) -> None:
    first = priority_queue(queued, limit=DEPTH).column("extraction_id").to_pylist()
    label(queued, first[:3])
    assert_same(queued, answered=False)
    after = priority_queue(queued, limit=DEPTH).column("extraction_id").to_pylist()
    assert not set(first[:3]) & set(after)
    # Label every cached item of the first partition: whatever follows it is not
    # cached, so the cache must step aside rather than answer from other partitions.
    tier, doc_type, field, week = queued.sql(
        "SELECT tier, doc_type, field, week FROM queue_partitions"
        " WHERE frontier_id IS NOT NULL ORDER BY tier, doc_type, field, week LIMIT 1"
    ).fetchall()[0]
    cached = [r[0] for r in queued.execute(
        "SELECT extraction_id FROM queue_candidates WHERE tier = ? AND doc_type = ?"
        " AND field = ? AND week = ?", [tier, doc_type, field, week]).fetchall()]
    label(queued, [c for c in cached if c not in first[:3]])
    scope = Scope(weeks=(week,), doc_types=(doc_type,), fields=(field,))
    assert queue._from_cache(queued, scope, 1) is None
    assert priority_queue(queued, scope, limit=1).equals(queue._ranked_rows(queued, scope, 1))


def test_a_second_ingest_keeps_the_cache_current(queued: duckdb.DuckDBPyConnection) -> None:
    label(queued, priority_queue(queued, limit=4).column("extraction_id").to_pylist())
    ingest_table(queued, batch(2, 600, weeks=("2026-W46", "2026-W47")), source="second.parquet")
    assert queue_cache.is_current(queued)
    assert queued.sql("SELECT count(*) FROM queue_partitions WHERE week = '2026-W47'"
                      ).fetchall()[0][0] > 0
    assert_same(queued)
    assert priority_queue(queued, Scope(weeks=("2026-W47",)), limit=5).column(
        "extraction_id").to_pylist()[0].startswith("s2-")


def test_rows_added_outside_fieldtrust_make_the_queue_read_the_rows(
    queued: duckdb.DuckDBPyConnection,
) -> None:
    queued.execute(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field, value,"
        " value_status, confidence, extracted_at, conflict, batch_id) VALUES ('by-hand', 'd',"
        " 'invoice', 'v1', 'tax', '1', 'present', 0.0, TIMESTAMP '2026-11-10 10:00', true,"
        " 'sql')"
    )
    assert not queue_cache.is_current(queued)
    assert queue._from_cache(queued, Scope(), 5) is None
    top = priority_queue(queued, Scope(fields=("tax",)), limit=1)
    assert top.column("extraction_id").to_pylist() == ["by-hand"]
    # The next ingest rebuilds the whole cache, with the row added by hand.
    ingest_table(queued, batch(3, 50), source="third.parquet")
    assert queue_cache.is_current(queued)
    assert queue._from_cache(queued, Scope(fields=("tax",)), 1).column(
        "extraction_id").to_pylist() == ["by-hand"]
    assert_same(queued)


def test_deleted_labels_and_unordered_maps_make_the_queue_read_the_rows(
    queued: duckdb.DuckDBPyConnection,
) -> None:
    label(queued, ["s1-00001"])
    queue_cache.refresh(queued, depth=DEPTH)
    queued.execute("DELETE FROM labels")
    assert not queue_cache.is_current(queued)
    assert_same(queued, answered=False)
    queue_cache.refresh(queued, depth=DEPTH)
    queued.execute(
        "INSERT INTO recalibration_maps VALUES ('m2', 'receipt', 'date', 'platt', 500,"
        " NULL, NULL, NULL, TIMESTAMP '2026-12-01')"
    )
    for x, y in [(0.0, 0.9), (1.0, 0.2)]:
        queued.execute("INSERT INTO recalibration_knots VALUES ('m2', ?, ?)", [x, y])
    assert queue._from_cache(queued, Scope(doc_types=("receipt",)), 5) is None
    assert queue._from_cache(queued, Scope(doc_types=("invoice",)), 5) is not None
    assert_same(queued)


def test_a_queue_longer_than_the_cache_reads_the_rows(
    queued: duckdb.DuckDBPyConnection,
) -> None:
    assert queue._from_cache(queued, Scope(), DEPTH + 1) is None
    assert priority_queue(queued, limit=50).equals(queue._ranked_rows(queued, Scope(), 50))


def test_a_new_store_has_an_empty_current_cache(con: duckdb.DuckDBPyConnection) -> None:
    assert queue_cache.is_current(con)
    assert queue_cache.depth(con) == queue_cache.DEPTH
    assert priority_queue(con, limit=5).num_rows == 0
    with pytest.raises(ValueError, match="depth must be at least 1, got 0"):
        queue_cache.refresh(con, depth=0)
