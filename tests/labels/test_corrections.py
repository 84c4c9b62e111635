"""Fixing a slip: one's own verdict within the window, never behind an adjudication."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from fieldtrust.labels import corrections, verdicts
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.corrections import OWN_CORRECTION_WINDOW, own_label, recent_labels
from fieldtrust.labels.verdicts import get_label, label_history, record_verdict, supersede
from fieldtrust.store.access import revoke_role
from fieldtrust.store.rollup import copy_is_complete

from fieldtrust import store
from fieldtrust.errors import InputError, PermissionDenied, Refused
from tests.conftest import Builder, table_fingerprint


def _later(monkeypatch: pytest.MonkeyPatch, by: dt.timedelta) -> None:
    """Labels are written, and the rules judge, as if ``by`` had passed since now."""
    now = store.utc_now() + by
    monkeypatch.setattr(corrections, "utc_now", lambda: now)
    monkeypatch.setattr(verdicts, "utc_now", lambda: now)


def test_a_reviewer_changes_their_own_verdict_with_a_superseding_row(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    slip = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    fixed = supersede(review_store, actor="alice", label_id=slip.label_id, verdict="incorrect",
                      corrected_value="11.00", error_type="misread_characters")
    assert [h.label_id for h in label_history(review_store, "e01")] == [
        slip.label_id, fixed.label_id]
    assert get_label(review_store, slip.label_id) == slip  # the slip stays, as written
    assert (fixed.supersedes, fixed.reviewer, fixed.review_round, fixed.sample_id) == (
        slip.label_id, "alice", "primary", slip.sample_id)
    assert review_store.execute(
        "SELECT label_id, verdict, corrected_value FROM effective_labels"
        " WHERE extraction_id = 'e01'").fetchall() == [(fixed.label_id, "incorrect", "11.00")]


def test_the_window_runs_from_the_first_verdict_not_the_last_correction(
    review_store: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    _later(monkeypatch, OWN_CORRECTION_WINDOW - dt.timedelta(hours=1))
    second = supersede(review_store, actor="alice", label_id=first.label_id, verdict="unclear")
    assert second.labeled_at - first.labeled_at > dt.timedelta(days=6)
    _later(monkeypatch, OWN_CORRECTION_WINDOW + dt.timedelta(hours=1))
    before = table_fingerprint(review_store)
    with pytest.raises(Refused, match=(
            rf"label {second.label_id} on e01 was first given .* UTC, more than 7 days ago:"
            r" a reviewer changes their own verdict within 7 days; a QA lead can still")):
        supersede(review_store, actor="alice", label_id=second.label_id, verdict="correct")
    assert table_fingerprint(review_store) == before
    # The QA lead still can, at any time.
    by_lead = supersede(review_store, actor="carol", label_id=second.label_id, verdict="correct")
    assert by_lead.supersedes == second.label_id


def test_no_reviewer_changes_a_review_once_it_was_adjudicated(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    # e00 is double-reviewed: alice first, bob second; they disagree, carol settles it.
    primary = record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    second = record_verdict(review_store, actor="bob", extraction_id="e00", verdict="unclear",
                            review_round="second")
    adjudicate(review_store, "carol", "e00", "correct")
    for reviewer, label in (("alice", primary), ("bob", second)):
        with pytest.raises(Refused, match=(
                r"extraction e00 was adjudicated by carol: the adjudication weighed both"
                r" reviews, so its reviewers can no longer change theirs")):
            supersede(review_store, actor=reviewer, label_id=label.label_id, verdict="incorrect",
                      corrected_status="null", error_type="value_not_in_document")
    # Before the adjudication a reviewer could have settled the disagreement themselves.
    third = record_verdict(review_store, actor="alice", extraction_id="e10", verdict="correct")
    record_verdict(review_store, actor="bob", extraction_id="e10", verdict="unclear",
                   review_round="second")
    fixed = supersede(review_store, actor="alice", label_id=third.label_id, verdict="unclear")
    assert fixed.verdict == "unclear"


def test_others_labels_adjudications_and_imports_follow_their_own_rules(
    review_store: duckdb.DuckDBPyConnection, builder: Builder,
) -> None:
    alices = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    with pytest.raises(PermissionDenied, match=r"bob \(role reviewer\) may not correct another"):
        supersede(review_store, actor="bob", label_id=alices.label_id, verdict="unclear")
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    settled = adjudicate(review_store, "carol", "e00", "correct")
    with pytest.raises(PermissionDenied, match=r"alice \(role reviewer\) may not adjudicate"):
        supersede(review_store, actor="alice", label_id=settled.label_id, verdict="unclear")
    review_store.execute(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
        " labeled_at) VALUES ('imported-1', 'e02', 'correct', 'alice', 'import', ?)",
        [store.utc_now()])
    with pytest.raises(Refused, match=r"label imported-1 was imported: change it in the file"):
        supersede(review_store, actor="alice", label_id="imported-1", verdict="unclear")


def test_a_reviewer_whose_role_was_revoked_changes_nothing(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    label = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    revoke_role(review_store, "root", "alice", "reviewer")
    with pytest.raises(PermissionDenied, match=r"alice \(no role\) may not record a verdict"):
        supersede(review_store, actor="alice", label_id=label.label_id, verdict="unclear")
    (listed,) = recent_labels(review_store, "alice")
    assert listed.why_fixed == "alice holds no role that may label any more"


def test_recent_labels_lists_ones_own_standing_verdicts_newest_first(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    first = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    slip = record_verdict(review_store, actor="alice", extraction_id="e02", verdict="correct")
    fixed = supersede(review_store, actor="alice", label_id=slip.label_id, verdict="incorrect",
                      corrected_value="9.00", error_type="misread_characters")
    record_verdict(review_store, actor="bob", extraction_id="e03", verdict="unclear")
    listed = recent_labels(review_store, "alice")
    assert [(r.label_id, r.extraction_id, r.verdict, r.corrected_value) for r in listed] == [
        (fixed.label_id, "e02", "incorrect", "9.00"), (first.label_id, "e01", "correct", None)]
    assert all(r.changeable and r.reviewer == "alice" for r in listed)
    item = listed[0].item
    assert item is not None
    assert (item.doc_id, item.doc_type, item.field, item.value, item.source_excerpt) == (
        "doc-e02", "invoice", "total", "10.00", "... 10.00 ...")
    assert [r.label_id for r in recent_labels(review_store, "alice", limit=1)] == [
        fixed.label_id]
    assert recent_labels(review_store, "alice", sample_id="2026-W99/v1") == []


def test_recent_labels_say_why_a_verdict_can_no_longer_change(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    label = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    (mine,) = recent_labels(review_store, "alice",
                            now=label.labeled_at + OWN_CORRECTION_WINDOW + dt.timedelta(seconds=1))
    assert mine.why_fixed is not None and "more than 7 days ago" in mine.why_fixed
    (still,) = recent_labels(review_store, "alice",
                             now=label.labeled_at + OWN_CORRECTION_WINDOW)
    assert still.changeable
    # A QA lead's own labels always can.
    lead = record_verdict(review_store, actor="carol", extraction_id="e02", verdict="correct")
    (theirs,) = recent_labels(review_store, "carol", now=lead.labeled_at + dt.timedelta(days=99))
    assert theirs.changeable


def test_a_verdict_outside_any_sample_keeps_the_sampled_copy_whole(
    review_store: duckdb.DuckDBPyConnection, builder: Builder,
) -> None:
    # The priority queue labels extractions no sample holds; label readers rely on
    # the sampled copy holding every labelled extraction.
    from fieldtrust.store.rollup import refresh_sampled

    refresh_sampled(review_store)
    builder.extraction("q1", value="7.00")
    assert copy_is_complete(review_store)
    label = record_verdict(review_store, actor="alice", extraction_id="q1", verdict="correct")
    assert label.sample_id is None
    assert copy_is_complete(review_store)
    assert review_store.execute(
        "SELECT doc_id, field FROM sampled_extractions WHERE extraction_id = 'q1'"
    ).fetchall() == [("doc-q1", "total")]


def test_own_label_is_one_of_ones_standing_verdicts_only(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    mine = record_verdict(review_store, actor="alice", extraction_id="e01", verdict="correct")
    theirs = record_verdict(review_store, actor="bob", extraction_id="e02", verdict="correct")
    found = own_label(review_store, "alice", mine.label_id)
    assert (found.label_id, found.verdict, found.changeable) == (mine.label_id, "correct", True)
    assert found.item is not None and found.item.extraction_id == "e01"
    with pytest.raises(InputError, match=rf"label '{theirs.label_id}' is not a verdict of"
                                         r" alice's that still stands"):
        own_label(review_store, "alice", theirs.label_id)
    newer = supersede(review_store, actor="alice", label_id=mine.label_id, verdict="unclear")
    with pytest.raises(InputError, match="still stands"):
        own_label(review_store, "alice", mine.label_id)  # superseded: the newer one stands
    assert own_label(review_store, "alice", newer.label_id).verdict == "unclear"
