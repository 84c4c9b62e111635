"""Assignment: spread across cells, never the same item twice, skips, blind second review."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import duckdb
import pytest
from fieldtrust.labels.assignment import ReviewItem, item_view, next_items, sample_progress, skip
from fieldtrust.labels.verdicts import record_verdict

from fieldtrust import store
from fieldtrust.errors import InputError, PermissionDenied

SAMPLE = "2026-W10/v1"
CELL_OF = {f"e{c}{k}": c for c in range(3) for k in range(4)}


def _ids(items: list[ReviewItem]) -> list[str]:
    return [i.extraction_id for i in items]


def test_items_come_round_robin_over_cells_in_prn_order(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    items = next_items(review_store, "alice", count=5)
    # First the lowest PRN of each cell, then the second lowest (PRN e<cell><rank>).
    assert _ids(items) == ["e00", "e10", "e20", "e01", "e11"]
    assert [CELL_OF[i] for i in _ids(items)] == [0, 1, 2, 0, 1]
    assert all(i.review_round == "primary" and i.sample_id == SAMPLE for i in items)
    assigned = review_store.execute(
        "SELECT extraction_id FROM assignments WHERE reviewer = 'alice' ORDER BY 1"
    ).fetchall()
    assert [a for (a,) in assigned] == sorted(_ids(items))


def test_asking_again_returns_the_open_items_first(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    first = next_items(review_store, "alice", count=3)
    again = next_items(review_store, "alice", count=3)
    assert _ids(again) == _ids(first)
    record_verdict(review_store, actor="alice", extraction_id=first[0].extraction_id,
                   verdict="correct")
    more = next_items(review_store, "alice", count=3)
    assert _ids(more)[:2] == _ids(first)[1:]
    assert first[0].extraction_id not in _ids(more)


def test_two_reviewers_never_get_the_same_primary_item(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    a = next_items(review_store, "alice", count=6)
    b = next_items(review_store, "bob", count=6)
    assert _ids(a) == ["e00", "e10", "e20", "e01", "e11", "e21"]
    # Bob shares only the double-review items (lowest PRN of each cell), in round 'second'.
    shared = [i for i in b if i.extraction_id in _ids(a)]
    assert sorted(_ids(shared)) == ["e00", "e10", "e20"]
    assert {i.review_round for i in shared} == {"second"}
    assert {i.review_round for i in b if i not in shared} == {"primary"}
    dave = next_items(review_store, "dave", count=5)
    assert sorted(_ids(dave)) == ["e03", "e13", "e23"]  # what is left of the pool


def test_concurrent_requests_get_disjoint_items(
    review_store: duckdb.DuckDBPyConnection, db_path: Path
) -> None:
    results: dict[str, list[str]] = {}
    start = threading.Barrier(3)

    def ask(name: str) -> None:
        con = store.connect(db_path)
        try:
            start.wait()
            results[name] = _ids(next_items(con, name, count=4))
        finally:
            con.close()

    threads = [threading.Thread(target=ask, args=(n,)) for n in ("alice", "bob", "dave")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handed = {(name, i) for name, ids in results.items() for i in ids}
    assert len(handed) == 12
    rounds = review_store.execute(
        "SELECT extraction_id, review_round, reviewer FROM assignments"
    ).fetchall()
    assert {(r, e) for e, _, r in rounds} == handed
    # No extraction went to two people in the same round.
    assert len({(e, rnd) for e, rnd, _ in rounds}) == len(rounds) == 12


def test_skipped_items_go_to_others_not_back_to_the_skipper(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    first = next_items(review_store, "alice", count=1)[0]
    skip(review_store, "alice", SAMPLE, first.extraction_id, "scan unreadable")
    assert first.extraction_id not in _ids(next_items(review_store, "alice", count=11))
    assert _ids(next_items(review_store, "bob", count=1)) == [first.extraction_id]
    row = review_store.execute("SELECT reviewer, reason FROM skips").fetchall()
    assert row == [("alice", "scan unreadable")]


@pytest.mark.parametrize(
    ("reason", "extraction_id", "message"),
    [("", "e00", "a skip needs a reason"), ("busy", "e11", "is not assigned to alice")],
)
def test_bad_skips_are_refused(
    review_store: duckdb.DuckDBPyConnection, reason: str, extraction_id: str, message: str
) -> None:
    next_items(review_store, "alice", count=1)
    with pytest.raises(InputError, match=message):
        skip(review_store, "alice", SAMPLE, extraction_id, reason)


def test_managers_get_no_items(review_store: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(PermissionDenied, match=r"mona \(role manager\) may not record"):
        next_items(review_store, "mona")


def test_no_sample_and_bad_count(con: duckdb.DuckDBPyConnection) -> None:
    from fieldtrust.store.access import bootstrap_admin, grant_role

    bootstrap_admin(con, "root")
    grant_role(con, "root", "alice", "reviewer")
    with pytest.raises(InputError, match="no audit sample has been drawn yet"):
        next_items(con, "alice")
    with pytest.raises(InputError, match="count must be at least 1"):
        next_items(con, "alice", count=0)


_VERDICT_FIELDS = {"verdict", "corrected_value", "corrected_status", "error_type",
                   "error_detail", "label_id", "reviewer", "labeled_at", "supersedes",
                   "confidence"}


def test_second_review_is_blind_and_by_someone_else(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    primary = next_items(review_store, "alice", count=12)
    labels = {}
    for item in primary:
        labels[item.extraction_id] = record_verdict(
            review_store, actor="alice", extraction_id=item.extraction_id, verdict="incorrect",
            corrected_value="secret-value", error_type="other", error_detail="secret-detail",
        )
    # Alice never gets her own items back for the second review.
    assert next_items(review_store, "alice", count=5) == []
    second = next_items(review_store, "bob", count=12)
    assert sorted(_ids(second)) == ["e00", "e10", "e20"]  # the double-review items
    assert all(i.review_round == "second" for i in second)
    views = [*second, item_view(review_store, "bob", SAMPLE, "e00")]
    for item in views:
        fields = set(dataclasses.asdict(item))
        assert not fields & _VERDICT_FIELDS
        text = repr(dataclasses.asdict(item))
        for secret in ("secret-value", "secret-detail", "alice", "incorrect",
                       labels[item.extraction_id].label_id):
            assert secret not in text
    # Bob's verdict lands in the second round without naming it.
    label = record_verdict(review_store, actor="bob", extraction_id="e00", verdict="correct")
    assert label.review_round == "second"
    progress = sample_progress(review_store)
    assert (progress.items, progress.labelled, progress.double_review,
            progress.second_labelled) == (12, 12, 3, 1)


def test_item_view_only_for_assigned_items(review_store: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match="is not assigned to bob"):
        item_view(review_store, "bob", SAMPLE, "e00")
