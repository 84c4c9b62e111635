"""The review screen: the next item, what is shown with it, and the one held after it."""

from __future__ import annotations

import duckdb
import pytest
from fieldtrust.labels.review_screen import HELD, review_screen
from fieldtrust.labels.verdicts import record_verdict

from fieldtrust.errors import PermissionDenied
from tests.conftest import SAMPLE


def _held(con: duckdb.DuckDBPyConnection, reviewer: str) -> list[str]:
    rows = con.execute(
        "SELECT a.extraction_id FROM assignments a WHERE a.reviewer = ? AND NOT EXISTS ("
        " SELECT 1 FROM labels l WHERE l.extraction_id = a.extraction_id) ORDER BY 1",
        [reviewer]).fetchall()
    return [r for (r,) in rows]


def test_the_screen_holds_the_item_shown_and_the_next(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    screen = review_screen(review_store, "alice", SAMPLE)
    assert screen.item is not None and screen.item.extraction_id == "e00"
    assert screen.upcoming is not None and screen.upcoming.extraction_id == "e10"
    assert _held(review_store, "alice") == ["e00", "e10"] and HELD == 2
    assert screen.facts is not None and screen.facts.confidence == pytest.approx(0.97)
    assert screen.location is not None and screen.location.extraction_id == "e00"
    assert (screen.items, screen.labelled, screen.labelled_by_you) == (12, 0, 0)


def test_after_a_verdict_the_held_item_is_shown_and_one_more_is_held(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    first = review_screen(review_store, "alice", SAMPLE)
    assert first.item is not None and first.upcoming is not None
    record_verdict(review_store, actor="alice", extraction_id=first.item.extraction_id,
                   verdict="correct")
    after = review_screen(review_store, "alice", SAMPLE)
    assert after.item is not None
    assert after.item.extraction_id == first.upcoming.extraction_id
    assert _held(review_store, "alice") == ["e10", "e20"]  # never more than two open
    assert (after.labelled, after.labelled_by_you) == (1, 1)
    again = review_screen(review_store, "alice", SAMPLE)  # a rerun assigns nothing new
    assert again.item == after.item and _held(review_store, "alice") == ["e10", "e20"]


def test_an_empty_pool_gives_an_empty_screen_with_its_counts(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    while (screen := review_screen(review_store, "alice", SAMPLE)).item is not None:
        record_verdict(review_store, actor="alice", extraction_id=screen.item.extraction_id,
                       verdict="correct")
    assert (screen.upcoming, screen.location, screen.facts) == (None, None, None)
    assert (screen.labelled, screen.items, screen.labelled_by_you) == (12, 12, 12)


def test_a_manager_gets_no_screen(review_store: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(PermissionDenied, match=r"mona \(role manager\) may not record a verdict"):
        review_screen(review_store, "mona", SAMPLE)
