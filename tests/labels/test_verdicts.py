"""Verdicts: validation, append-only history, superseding, concurrent reviewers."""

from __future__ import annotations

import datetime as dt
import inspect
import threading
import uuid
from pathlib import Path

import duckdb
import pytest
from fieldtrust.labels.verdicts import get_label, label_history, record_verdict, supersede
from fieldtrust.store.labelled import labelled_items

from fieldtrust import store
from fieldtrust.errors import InputError, PermissionDenied, Refused
from tests.conftest import Builder, table_fingerprint

SAMPLE = "2026-W10/v1"


def test_verdict_records_actor_round_sample_and_time(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    before = store.utc_now()
    label = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    assert uuid.UUID(label.label_id).version == 4
    assert (label.reviewer, label.review_round, label.sample_id) == ("alice", "primary", SAMPLE)
    assert before <= label.labeled_at <= store.utc_now()
    assert get_label(review_store, label.label_id) == label


def test_there_is_no_way_to_label_as_someone_else() -> None:
    params = set(inspect.signature(record_verdict).parameters)
    assert "reviewer" not in params
    assert "reviewer" not in set(inspect.signature(supersede).parameters)


@pytest.mark.parametrize(
    ("kwargs", "status", "value"),
    [
        ({"corrected_value": "12.00", "error_type": "misread_characters"}, "present", "12.00"),
        ({"corrected_status": "null", "error_type": "value_not_in_document"}, "null", None),
        ({"corrected_status": "unclear", "error_type": "other", "error_detail": "smudge"},
         "unclear", None),
        ({"corrected_value": "see page 2", "corrected_status": "other",
          "error_type": "wrong_field"}, "other", "see page 2"),
    ],
)
def test_incorrect_verdicts_keep_null_unclear_and_other_apart(
    review_store: duckdb.DuckDBPyConnection, kwargs: dict[str, str], status: str,
    value: str | None,
) -> None:
    label = record_verdict(
        review_store, actor="alice", extraction_id="e01", verdict="incorrect", **kwargs
    )
    stored = get_label(review_store, label.label_id)
    assert (stored.corrected_status, stored.corrected_value) == (status, value)
    assert stored.error_type == kwargs["error_type"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"verdict": "maybe"}, "verdict 'maybe' is not one of correct, incorrect, unclear"),
        ({"verdict": "incorrect", "corrected_value": "1", "error_type": "typo"},
         "error_type 'typo' is not in the taxonomy"),
        ({"verdict": "incorrect", "corrected_value": "1", "error_type": "other"},
         "error type 'Other' needs a detail"),
        ({"verdict": "incorrect", "corrected_value": "1", "corrected_status": "null",
          "error_type": "wrong_field"}, r"'Absent' \(corrected_status null\) means there is no"),
        ({"verdict": "incorrect", "corrected_status": "present", "error_type": "wrong_field"},
         r"'The document says' \(corrected_status present\) needs the corrected value"),
        ({"verdict": "correct", "error_type": "wrong_field"},
         r"'Correct' takes no error type \(error_type\)"),
        ({"verdict": "unclear", "corrected_value": "1"}, "'Unreadable' takes no"),
        ({"verdict": "correct", "extraction_id": "nope"}, "no extraction 'nope'"),
        ({"verdict": "correct", "sample_id": "2026-W11/v1"}, "is not in audit sample"),
        ({"verdict": "correct", "review_round": "adjudication"}, "review_round 'adjudication'"),
    ],
)
def test_invalid_verdicts_are_refused_and_write_nothing(
    review_store: duckdb.DuckDBPyConnection,
    kwargs: dict[str, str],
    message: str,
) -> None:
    arguments = {"extraction_id": "e01", **kwargs}
    before = table_fingerprint(review_store)
    with pytest.raises(InputError, match=message):
        record_verdict(review_store, actor="alice", **arguments)  # type: ignore[arg-type]
    assert table_fingerprint(review_store) == before


@pytest.mark.parametrize(
    ("kwargs", "stored"),
    [
        ({}, (None, None, "not_recorded", None)),
        ({"corrected_value": "1"}, ("1", "present", "not_recorded", None)),
        ({"error_type": "wrong_field"}, (None, None, "wrong_field", None)),
        ({"error_type": "not_recorded", "error_detail": " smudge "},
         (None, None, "not_recorded", "smudge")),
    ],
    ids=["bare", "value only", "type only", "an export's not_recorded"],
)
def test_an_incorrect_verdict_without_details_records_them_as_not_recorded(
    review_store: duckdb.DuckDBPyConnection, kwargs: dict[str, str],
    stored: tuple[str | None, ...],
) -> None:
    """The one rule: nothing is guessed, nothing refused for lack of detail."""
    label = record_verdict(review_store, actor="alice", extraction_id="e01",
                           verdict="incorrect", **kwargs)
    got = get_label(review_store, label.label_id)
    assert (got.corrected_value, got.corrected_status, got.error_type, got.error_detail) \
        == stored


def test_superseding_keeps_history_and_changes_the_effective_verdict(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    first = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    second = supersede(review_store, actor="alice", label_id=first.label_id, verdict="incorrect",
                       corrected_value="11.00", error_type="misread_characters")
    third = supersede(review_store, actor="carol", label_id=second.label_id, verdict="correct")
    history = label_history(review_store, "e00")
    assert [h.label_id for h in history] == [first.label_id, second.label_id, third.label_id]
    assert [h.supersedes for h in history] == [None, first.label_id, second.label_id]
    assert history[0] == first  # the old rows are untouched
    assert third.reviewer == "carol" and third.review_round == "primary"
    effective = review_store.execute(
        "SELECT label_id, verdict FROM effective_labels WHERE extraction_id = 'e00'"
    ).fetchall()
    assert effective == [(third.label_id, "correct")]


def test_only_the_reviewer_or_a_qa_lead_may_supersede(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    label = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    with pytest.raises(PermissionDenied, match=r"bob \(role reviewer\) may not correct another"):
        supersede(review_store, actor="bob", label_id=label.label_id, verdict="unclear")
    with pytest.raises(PermissionDenied, match=r"mona \(role manager\)"):
        supersede(review_store, actor="mona", label_id=label.label_id, verdict="unclear")


def test_a_superseded_label_cannot_be_superseded_again(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    label = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    newer = supersede(review_store, actor="alice", label_id=label.label_id, verdict="unclear")
    with pytest.raises(Refused, match=f"already superseded by label {newer.label_id}"):
        supersede(review_store, actor="alice", label_id=label.label_id, verdict="correct")
    with pytest.raises(InputError, match="no label 'missing'"):
        supersede(review_store, actor="alice", label_id="missing", verdict="correct")


def test_a_second_primary_label_is_a_conflict_not_an_overwrite(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    label = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="incorrect",
                           corrected_value="9", error_type="misread_characters")
    with pytest.raises(Refused, match="already has a primary label") as raised:
        record_verdict(review_store, actor="bob", extraction_id="e00", verdict="correct")
    assert "incorrect" not in str(raised.value)  # names the label, never its verdict
    assert label_history(review_store, "e00") == [label]


def test_one_person_cannot_give_both_reviews(review_store: duckdb.DuckDBPyConnection) -> None:
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    with pytest.raises(Refused, match="needs a different person for the second review"):
        record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct",
                       review_round="second")


def _label_in_thread(
    path: Path, reviewer: str, items: list[str], outcomes: list[tuple[str, str, str]],
    start: threading.Barrier,
) -> None:
    # Each thread its own connection to the same file (one process, one DuckDB instance).
    con = store.connect(path)
    try:
        start.wait()
        for extraction_id in items:
            try:
                record_verdict(con, actor=reviewer, extraction_id=extraction_id,
                               verdict="correct" if reviewer == "alice" else "unclear")
                outcomes.append((reviewer, extraction_id, "ok"))
            except Refused:
                outcomes.append((reviewer, extraction_id, "conflict"))
    finally:
        con.close()


def _label_at_once(path: Path, work: list[tuple[str, list[str]]]) -> list[tuple[str, str, str]]:
    """Each (reviewer, items) labelled in a thread of its own, all starting together."""
    outcomes: list[tuple[str, str, str]] = []
    start = threading.Barrier(len(work))
    threads = [
        threading.Thread(target=_label_in_thread, args=(path, name, items, outcomes, start))
        for name, items in work
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _many_items(con: duckdb.DuckDBPyConnection, count: int) -> list[str]:
    ids = [f"x{i:03d}" for i in range(count)]
    Builder(con).extractions([
        {"extraction_id": i, "doc_id": "d", "value": "1", "extracted_at": dt.datetime(2026, 3, 2)}
        for i in ids
    ])
    return ids


def test_concurrent_reviewers_never_lose_a_label(
    review_store: duckdb.DuckDBPyConnection, db_path: Path
) -> None:
    ids = _many_items(review_store, 60)
    outcomes = _label_at_once(db_path, [("alice", ids[:30]), ("bob", ids[30:])])
    assert all(outcome == "ok" for *_, outcome in outcomes)
    rows = review_store.execute(
        "SELECT reviewer, count(*) FROM labels GROUP BY reviewer ORDER BY reviewer"
    ).fetchall()
    assert rows == [("alice", 30), ("bob", 30)]
    bob_items = {r for (r,) in review_store.execute(
        "SELECT extraction_id FROM labels WHERE reviewer = 'bob'").fetchall()}
    assert bob_items == set(ids[30:])


def test_racing_on_the_same_items_one_wins_the_other_is_told(
    review_store: duckdb.DuckDBPyConnection, db_path: Path
) -> None:
    ids = _many_items(review_store, 40)
    outcomes = _label_at_once(db_path, [("alice", ids), ("bob", ids)])
    winners = {(e, r) for r, e, o in outcomes if o == "ok"}
    losers = {(e, r) for r, e, o in outcomes if o == "conflict"}
    assert len(outcomes) == 80
    assert len(winners) == 40 and len(losers) == 40
    assert {e for e, _ in winners} == set(ids)
    # Exactly the winners' labels are stored, each once, with the winner's verdict.
    stored = review_store.execute(
        "SELECT extraction_id, reviewer, verdict FROM labels WHERE extraction_id LIKE 'x%'"
    ).fetchall()
    assert {(e, r) for e, r, _ in stored} == winners
    assert all(v == ("correct" if r == "alice" else "unclear") for _, r, v in stored)


def test_concurrent_cursors_on_one_connection(review_store: duckdb.DuckDBPyConnection) -> None:
    ids = _many_items(review_store, 40)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(reviewer: str, items: list[str]) -> None:
        cursor = review_store.cursor()
        start.wait()
        try:
            for extraction_id in items:
                record_verdict(cursor, actor=reviewer, extraction_id=extraction_id,
                               verdict="correct")
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)
        finally:
            cursor.close()

    threads = [threading.Thread(target=work, args=("alice", ids[::2])),
               threading.Thread(target=work, args=("bob", ids[1::2]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    count = review_store.execute("SELECT count(*) FROM labels").fetchone()
    assert count == (40,)


def test_unclear_labels_do_not_count_as_right_or_wrong(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="unclear",
                   error_detail="scan cut off")
    record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    items = labelled_items(review_store)
    assert items.column("extraction_id").to_pylist() == ["e01"]
