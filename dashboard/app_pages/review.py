"""Review (reviewer): label the week's sample one item at a time, by keyboard.

Keys: 1 correct, 2 incorrect, 3 unreadable, N next (skip, the item goes back
to the pool for someone else), U change your last verdict (then 1, 2, 3 give
the new one, K keeps it). Streamlit reserves C and R, hence digits. The
choices and what a verdict without details means come from
:mod:`fieldtrust.labels.verdict_rule`; every write is one library call
(:mod:`fieldtrust.dashboard.reviewing` holds the callbacks), which checks the
role; the page only hides what a role cannot use.

The labelling part is a fragment: a key press reruns it alone, on the screen
its write prepared, not the page with its sidebar and tables. The page, the
box on the value and the verdict buttons fit a 1400 x 1000 window, and a
refusal is shown right under the buttons.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import streamlit as st
from fieldtrust.dashboard import (
    auth,
    boundary,
    data,
    downloads,
    layout,
    render,
    reviewing,
    sidebar,
    state,
    viewer,
    views,
)
from fieldtrust.labels.corrections import OwnLabel, own_label, recent_labels
from fieldtrust.labels.review_screen import Screen
from fieldtrust.labels.verdict_rule import VERDICT_CHOICES
from fieldtrust.store.access import allowed
from fieldtrust.store.locations import Location, document_location
from fieldtrust.store.lookup import ItemFacts

from fieldtrust.errors import InputError

#: How many of a reviewer's own verdicts "My recent labels" lists.
RECENT_SHOWN = 10
ROUND_WORDS = {"primary": "first review", "second": "second review"}
KEYS_HINT = ("Keys: " + " · ".join(f"**{c.key}** {c.label.lower()}" for c in VERDICT_CHOICES)
             + " · **N** next (skip) · **U** change your last verdict. Incorrect without"
             " details is recorded with the error type and correction 'not recorded'.")


def _value_of(facts: ItemFacts | None, value: str | None, status: str) -> None:
    st.markdown("**Extracted value**")
    st.code(value if value is not None else f"({status})", language=None)
    if facts is not None and facts.conflict:
        st.warning(f"Another source says: {layout.code_span(facts.conflict_value)}")


def _form(form: state.VerdictForm) -> None:
    """The details an "incorrect" verdict carries (read when the key is pressed)."""
    with st.expander("If incorrect: what the document holds and why (optional)",
                     expanded=True):
        layout.verdict_details(form)


#: An extra button beside the verdicts: label, key, shortcut, callback, its arguments.
Extra = tuple[str, str, str, Callable[..., None], tuple[Any, ...]]


def _verdict_buttons(keys: state.VerdictButtons, on_verdict: Callable[..., None],
                     args: tuple[Any, ...], extra: list[Extra]) -> None:
    """Buttons 1, 2, 3 calling ``on_verdict(*args, verdict)``, then ``extra`` ones
    (label, key, shortcut, callback, args)."""
    # A row that wraps rather than cutting labels short in a narrow column.
    row = st.container(horizontal=True, gap="small")
    button_keys = {"correct": keys.correct, "incorrect": keys.incorrect, "unclear": keys.unclear}
    for choice in VERDICT_CHOICES:  # the one verdict rule's choices, in its words
        assert choice.value is not None
        row.button(choice.label, key=button_keys[choice.value], shortcut=choice.key,
                   type="primary" if choice.value == "correct" else "secondary",
                   help=choice.help, on_click=on_verdict, args=(*args, choice.value))
    for label, key, shortcut, callback, more in extra:
        row.button(label, key=key, shortcut=shortcut, on_click=callback, args=more)


def _document_panel(screen_facts: ItemFacts | None, location: Location | None,
                    document: render.Source | render.Notice | None, excerpt: str | None,
                    review_round: str) -> None:
    if location is not None and document is not None:
        viewer.show_page(location, document, excerpt,
                         zoom_key=state.VIEWER_REVIEW_ZOOM, whole_key=state.VIEWER_REVIEW_WHOLE)
    else:
        st.info("No such extraction in the store.")
    if screen_facts is None:
        return
    st.markdown(
        f"Document {layout.code_span(screen_facts.doc_id)} · type"
        f" **{layout.plain(screen_facts.doc_type)}** · form version"
        f" **{layout.plain(screen_facts.form_version)}** ·"
        f" {ROUND_WORDS.get(review_round, review_round)}"
    )
    with st.expander("Model's stated confidence (judge first: numbers anchor)"):
        st.metric("stated confidence", f"{screen_facts.confidence:.3f}")


def _progress(screen: Screen) -> None:
    share = screen.labelled / screen.items if screen.items else 0.0
    st.progress(share, text=f"Sample {screen.sample_id}: {screen.labelled:,} of"
                            f" {screen.items:,} items labelled · {screen.labelled_by_you:,}"
                            " by you")


def _show_item(identity: auth.Identity, screen: Screen,
               document: render.Source | render.Notice | None) -> None:
    item = screen.item
    assert item is not None
    left, right = st.columns([2, 3])
    with left:
        # Everything below comes from ingested files: shown as written, never as markdown.
        st.subheader(f"{layout.plain(item.doc_type)} · {layout.plain(item.field)}")
        _value_of(screen.facts, item.value, item.value_status)
        _verdict_buttons(state.REVIEW_BUTTONS, reviewing.verdict,
                         (identity, screen.sample_id, item), [
                             ("Next (skip)", state.REVIEW_SKIP, "N", reviewing.skip_item,
                              (identity, screen.sample_id, item)),
                         ])
        st.button("Change my last verdict", key=state.REVIEW_UNDO, shortcut="U",
                  on_click=reviewing.undo, disabled=screen.labelled_by_you == 0,
                  icon=":material/undo:")
        layout.flash(state.REVIEW_FLASH)
        st.caption(KEYS_HINT)
        _form(state.REVIEW_FORM)
        _excerpt(item.source_excerpt)
    with right:
        _document_panel(screen.facts, screen.location, document, item.source_excerpt,
                        item.review_round)


def _excerpt(excerpt: str | None) -> None:
    if excerpt:
        st.markdown("**Source excerpt**")
        st.text(excerpt)
    else:
        st.caption("No source excerpt stored for this extraction: see the document.")


def _show_change(identity: auth.Identity, sample_id: str, label: OwnLabel) -> None:
    """The verdict being changed, back on screen: 1, 2, 3 give the new one, K keeps it."""
    reviewing.prefill(label)
    facts = label.item
    with data.reading(data.db_path()) as con:
        location = document_location(con, label.extraction_id)
        document = viewer.open_document(con, location) if location is not None else None
    left, right = st.columns([2, 3])
    with left:
        what = f"{layout.plain(facts.doc_type)} · {layout.plain(facts.field)}" if facts \
            else layout.plain(label.extraction_id)
        st.subheader(f"Changing your verdict: {what}")
        st.info(f"You said **{label.verdict}** at {label.labeled_at:%H:%M} UTC"
                f" ({label.labeled_at:%Y-%m-%d}). Press **1**, **2** or **3** for the new"
                " verdict, **K** to keep it. The earlier verdict stays in the history.")
        if facts is not None:
            _value_of(facts, facts.value, facts.value_status)
        _verdict_buttons(state.REVIEW_BUTTONS, reviewing.change, (identity, sample_id, label), [
            ("Keep it", state.REVIEW_KEEP, "K", reviewing.keep, (label,)),
        ])
        layout.flash(state.REVIEW_FLASH)
        _form(state.REVIEW_FORM)
        _excerpt(facts.source_excerpt if facts else None)
    with right:
        _document_panel(facts, location, document, facts.source_excerpt if facts else None,
                        label.review_round)


def _correcting(identity: auth.Identity, sample_id: str) -> OwnLabel | None:
    """The verdict the reviewer asked to change (Undo or My recent labels), if it can change."""
    wanted = st.session_state.get(state.REVIEW_CORRECTING)
    if wanted is None:
        return None
    with data.reading(data.db_path()) as con:
        if wanted == reviewing.LAST:
            found = recent_labels(con, identity.user, sample_id=sample_id, limit=1)
            label = found[0] if found else None
            refusal = None if found else "You have no verdict in this sample to change yet."
        else:
            try:
                label, refusal = own_label(con, identity.user, wanted), None
            except InputError as exc:
                label, refusal = None, str(exc)
    if label is not None and label.why_fixed is not None:
        refusal = f"This verdict can no longer change here: {label.why_fixed}"
        label = None
    if label is None:
        st.session_state[state.REVIEW_CORRECTING] = None
        st.session_state[state.REVIEW_FLASH] = ("warning", layout.plain(refusal))
        return None
    st.session_state[state.REVIEW_CORRECTING] = label.label_id
    return label


def _recent(identity: auth.Identity, sample_id: str) -> None:
    """My recent labels: one's standing verdicts of this sample, any of them to change."""
    if not st.toggle("My recent labels", key=state.REVIEW_RECENT):
        return
    with data.reading(data.db_path()) as con:
        labels = recent_labels(con, identity.user, sample_id=sample_id, limit=RECENT_SHOWN)
    if not labels:
        st.caption("You have no verdict in this sample yet.")
        return
    st.caption(f"Your {len(labels)} newest verdicts in this sample that still stand, newest"
               " first. Changing one adds a new label; the earlier one stays in the history.")
    st.dataframe(
        [{"Document": lab.item.doc_id if lab.item else lab.extraction_id,
          "Field": lab.item.field if lab.item else "",
          "Verdict": lab.verdict, "Corrected value": lab.corrected_value or "",
          "Given at (UTC)": f"{lab.labeled_at:%Y-%m-%d %H:%M}",
          "Can you change it": "yes" if lab.changeable else f"no: {lab.why_fixed}"}
         for lab in labels],
        hide_index=True, width="stretch",
    )
    open_ = {lab.label_id: lab for lab in labels if lab.changeable}
    if not open_:
        return
    pick, go = st.columns([3, 1], vertical_alignment="bottom")
    picked = pick.selectbox(
        "Verdict to change", list(open_), key=state.REVIEW_RECENT_PICK,
        format_func=lambda label_id: _describe(open_[label_id]),
    )
    go.button("Change it", key=state.REVIEW_RECENT_EDIT, on_click=reviewing.edit,
              args=(picked,), width="stretch")


def _describe(label: OwnLabel) -> str:
    where = f"{label.item.doc_id} · {label.item.field}" if label.item else label.extraction_id
    return f"{where}: {label.verdict} ({label.labeled_at:%H:%M})"


@st.fragment
def _labelling(identity: auth.Identity, sample_id: str) -> None:
    """What a key press reruns: the screen its write left, or a fresh one."""
    with boundary.messages_on_the_page(), data.run_reads(data.db_path()):
        prepared = reviewing.take_screen(identity, sample_id)
        if prepared is None:
            prepared = data.write(reviewing.next_screen, identity.user, sample_id)
        screen = prepared.screen
        _progress(screen)
        label = _correcting(identity, sample_id)
        if label is not None:
            _show_change(identity, sample_id, label)
        elif screen.item is None:
            layout.flash(state.REVIEW_FLASH)
            st.success("Nothing left for you in this sample. Thank you!")
            st.button("Change my last verdict", key=state.REVIEW_UNDO, shortcut="U",
                      on_click=reviewing.undo, disabled=screen.labelled_by_you == 0,
                      icon=":material/undo:")
        else:
            _show_item(identity, screen, prepared.document)
        _recent(identity, sample_id)


def _cells(sample_id: str) -> None:
    """How many labels the estimates can use now, per group of the sample, in plain words."""
    cells = views.frame_of(data.cached("cell_progress", sample_id))
    if cells.empty:
        return
    usable = int(cells["n_usable"].sum())
    with st.expander(f"Labels the accuracy figures can use now: {usable:,}"):
        st.caption("Each group's items are shown in a random order, and the figures count a"
                   " group's labels up to its first item still open: a label after an open or"
                   " skipped item counts once that item is labelled.")
        shown = cells[["doc_type", "field", "band", "version_status", "n_sample", "n_labelled",
                       "n_usable"]].rename(columns={
                           "doc_type": "Document type", "field": "Field",
                           "band": "Stated confidence", "version_status": "Form version",
                           "n_sample": "Items drawn", "n_labelled": "Labelled",
                           "n_usable": "Counted now"})
        downloads.show_table("review_cell_progress", shown)


def _audit_tab(identity: auth.Identity | None) -> None:
    sample_id = data.cached("current_sample")
    if sample_id is None:
        st.info("No audit sample drawn yet: a QA lead draws one on the Weekly audit page"
                " (or `fieldtrust sample --week ...`).")
        return
    if identity is None or not allowed(identity.roles, "label"):
        progress = data.cached("sample_progress", sample_id)
        st.caption(f"Sample {sample_id}: {progress.labelled:,} of {progress.items:,} items"
                   f" labelled ({progress.skips:,} skips)")
        who = "nobody" if identity is None else f"{identity.user} ({identity.role or 'no role'})"
        st.info(f"Labelling needs the reviewer or qa_lead role; you are {layout.plain(who)}.")
    else:
        _labelling(identity, sample_id)
    _cells(sample_id)


def _queue_verdict(identity: auth.Identity | None, queue: pa.Table, picked: str) -> None:
    """Verdict buttons for the queue's picked item (a label outside any audit sample)."""
    if identity is None or not allowed(identity.roles, "label"):
        st.caption("Verdicts need the reviewer or qa_lead role.")
        return
    row = next((r for r in queue.to_pylist() if r["extraction_id"] == picked), None)
    if row is None:
        return
    value = row["value"] if row["value"] is not None else f"({row['value_status']})"
    st.markdown(f"**Your verdict on {layout.plain(row['doc_id'])} ·"
                f" {layout.plain(row['field'])}**: extracted {layout.code_span(value)}")
    _verdict_buttons(state.QUEUE_BUTTONS, reviewing.queue_verdict,
                     (identity, picked, row["doc_id"], row["field"]), [])
    layout.flash(state.QUEUE_FLASH)
    st.caption("A verdict here is outside the audit: it is kept, but it supports no estimate"
               " or certificate (its selection is not random).")
    _form(state.QUEUE_FORM)


def _priority_tab(identity: auth.Identity | None) -> None:
    queue = data.cached("priority_queue", sidebar.current_scope(), 200)
    st.caption("Outside the audit: extractions not covered by an approved threshold, conflicts"
               " and unclear values first, then the lowest calibrated confidence.")
    if len(queue) == 0:
        layout.flash(state.QUEUE_FLASH)  # the verdict just given may have emptied it
        st.info("The priority queue is empty for these filters.")
        return
    downloads.show_table("priority_queue", queue)
    ids = queue.column("extraction_id").to_pylist()
    picked = st.selectbox("Open an item", ids, key=state.VIEWER_QUEUE_ITEM)
    if picked is not None:
        left, right = st.columns([2, 3])
        with left:
            _queue_verdict(identity, queue, picked)
        with right:
            viewer.show_document(picked, zoom_key=state.VIEWER_QUEUE_ZOOM)


st.title("Review")
identity = auth.current_identity()
layout.lazy_tabs(
    {"Assigned audit items": lambda: _audit_tab(identity),
     "Priority queue": lambda: _priority_tab(identity)},
    key=state.REVIEW_TAB,
)
