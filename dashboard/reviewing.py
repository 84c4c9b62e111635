"""What the review page's keys do: each one library write, then the next screen, on one connection.

The page (``app_pages/review.py``) draws; these are its button callbacks. Each
writes through the one library path of its act (a verdict:
:func:`~fieldtrust.labels.verdicts.record_verdict`; a changed verdict:
:func:`~fieldtrust.labels.verdicts.supersede`; a skip:
:func:`~fieldtrust.labels.assignment.skip`), which checks the role and the
rules, and on the same short connection reads the next screen
(:func:`~fieldtrust.labels.review_screen.review_screen`), opens its document
and starts rendering the page after it. The fragment that reruns then only
draws: a key press costs one store connection and no page render.

A refusal or a busy store becomes the flash under the buttons, in the
library's words; nothing was written then, so the same key simply works later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import streamlit as st
from fieldtrust.dashboard import auth, data, layout, render, state, viewer
from fieldtrust.labels.assignment import ReviewItem, skip
from fieldtrust.labels.corrections import OwnLabel
from fieldtrust.labels.review_screen import Screen, review_screen
from fieldtrust.labels.taxonomy import ERROR_TYPES
from fieldtrust.labels.verdict_rule import verdict_label
from fieldtrust.labels.verdicts import record_verdict, supersede

from fieldtrust.errors import FieldtrustError, StoreLockedError

SKIP_REASON = "skipped by reviewer (next)"
#: ``state.REVIEW_CORRECTING`` while Undo waits for the newest verdict to be looked up.
LAST = "last"


@dataclass(frozen=True)
class Prepared:
    """A screen with its item's document opened (no store needed to draw it)."""

    screen: Screen
    document: render.Source | render.Notice | None


def next_screen(con: duckdb.DuckDBPyConnection, user: str, sample_id: str) -> Prepared:
    """The reviewer's next screen, its document opened and the one after it being rendered."""
    screen = review_screen(con, user, sample_id)
    document = viewer.open_document(con, screen.location) if screen.location else None
    if screen.upcoming is not None:
        viewer.prepare(viewer.open_document(con, screen.upcoming), screen.upcoming)
    return Prepared(screen, document)


def take_screen(identity: auth.Identity, sample_id: str) -> Prepared | None:
    """The screen the last key press prepared for this reviewer and sample (once), if any."""
    left = st.session_state.pop(state.REVIEW_NEXT, None)
    if left is not None and left[0] == (identity.user, sample_id):
        return left[1]  # type: ignore[no-any-return]
    return None


def _write(identity: auth.Identity, sample_id: str | None,
           act: Callable[[duckdb.DuckDBPyConnection], Any], done: str,
           kind: str = "success") -> bool:
    """Run ``act`` and (for the audit tab) read the next screen, on one connection.

    ``done`` is the flash once ``act`` has written, kept even if reading the
    next screen then fails (the fragment reads it again): a reviewer must not
    take a saved verdict for a lost one.
    """

    def step(con: duckdb.DuckDBPyConnection) -> Prepared | None:
        act(con)
        st.session_state[state.REVIEW_FLASH] = (kind, done)
        if sample_id is None:
            return None
        try:
            return next_screen(con, identity.user, sample_id)
        except FieldtrustError:
            return None

    try:
        prepared = data.write(step)
    except StoreLockedError as exc:
        # Another process (an ingest) holds the store longer than we wait: nothing was
        # recorded, so the same key press simply works a moment later.
        st.session_state[state.REVIEW_FLASH] = ("warning", layout.plain(data.busy_message(exc)))
        return False
    except FieldtrustError as exc:  # a refusal (role, conflict, bad fields): the library's words
        st.session_state[state.REVIEW_FLASH] = ("error", layout.plain(exc))
        return False
    if prepared is not None:
        st.session_state[state.REVIEW_NEXT] = ((identity.user, sample_id), prepared)
    return True


def _clear_form(form: state.VerdictForm) -> None:
    layout.reset_verdict_form(form)


def _what(doc_id: str, field: str) -> str:
    return f"{layout.plain(doc_id)} · {layout.plain(field)}"


def verdict(identity: auth.Identity, sample_id: str, item: ReviewItem, given: str) -> None:
    """Keys 1, 2, 3 on an assigned item: record the verdict, show the next item."""
    fields = layout.verdict_fields(given, state.REVIEW_FORM)

    def act(con: duckdb.DuckDBPyConnection) -> None:
        record_verdict(con, actor=identity.user, extraction_id=item.extraction_id,
                       verdict=given, sample_id=item.sample_id,
                       review_round=item.review_round, **fields)

    if _write(identity, sample_id, act,
              f"Recorded **{verdict_label(given).lower()}** for {_what(item.doc_id, item.field)}."):
        _clear_form(state.REVIEW_FORM)


def skip_item(identity: auth.Identity, sample_id: str, item: ReviewItem) -> None:
    """Key N: give the item back to the pool (the skip is recorded)."""

    def act(con: duckdb.DuckDBPyConnection) -> None:
        skip(con, identity.user, item.sample_id, item.extraction_id, SKIP_REASON)

    _write(identity, sample_id, act, f"Skipped {_what(item.doc_id, item.field)}.", "info")


def change(identity: auth.Identity, sample_id: str, label: OwnLabel, given: str) -> None:
    """Keys 1, 2, 3 while changing a verdict: a new label supersedes it."""
    fields = layout.verdict_fields(given, state.REVIEW_FORM)

    def act(con: duckdb.DuckDBPyConnection) -> None:
        supersede(con, actor=identity.user, label_id=label.label_id, verdict=given, **fields)

    what = _what(label.item.doc_id, label.item.field) if label.item else label.extraction_id
    if _write(identity, sample_id, act,
              f"Changed your verdict on {what} from **{label.verdict}** to **{given}**; the"
              " earlier one stays in the history."):
        _clear_form(state.REVIEW_FORM)
        st.session_state[state.REVIEW_CORRECTING] = None


def undo() -> None:
    """Key U: change your newest verdict (it comes back on screen; nothing is written yet)."""
    st.session_state[state.REVIEW_CORRECTING] = LAST


def edit(label_id: str | None) -> None:
    """"Change" in My recent labels: that verdict comes back on screen."""
    if label_id is not None:
        st.session_state[state.REVIEW_CORRECTING] = label_id


def keep(label: OwnLabel | None) -> None:
    """Key K: leave the verdict being changed as it is."""
    st.session_state[state.REVIEW_CORRECTING] = None
    st.session_state.pop(state.REVIEW_PREFILLED, None)
    _clear_form(state.REVIEW_FORM)
    if label is not None:
        what = _what(label.item.doc_id, label.item.field) if label.item else label.extraction_id
        st.session_state[state.REVIEW_FLASH] = (
            "info", f"Kept your verdict on {what}: **{label.verdict}**.")


def prefill(label: OwnLabel) -> None:
    """Fill the correction form with ``label``'s fields once, when it comes back on screen."""
    if st.session_state.get(state.REVIEW_PREFILLED) == label.label_id:
        return
    st.session_state[state.REVIEW_PREFILLED] = label.label_id
    form = state.REVIEW_FORM
    st.session_state[form.corrected_value] = label.corrected_value or ""
    st.session_state[form.corrected_status] = label.corrected_status
    if label.error_type in ERROR_TYPES:
        st.session_state[form.error_type] = label.error_type
    st.session_state[form.error_detail] = label.error_detail or ""


def queue_verdict(identity: auth.Identity, extraction_id: str, doc_id: str, field: str,
                  given: str) -> None:
    """Keys 1, 2, 3 on the priority queue's item: record the verdict (outside any assignment)."""
    fields = layout.verdict_fields(given, state.QUEUE_FORM)

    def act(con: duckdb.DuckDBPyConnection) -> None:
        record_verdict(con, actor=identity.user, extraction_id=extraction_id, verdict=given,
                       **fields)

    if _write(identity, None, act, f"Recorded **{given}** for {_what(doc_id, field)}."):
        _clear_form(state.QUEUE_FORM)
    st.session_state[state.QUEUE_FLASH] = st.session_state.pop(state.REVIEW_FLASH, None)
