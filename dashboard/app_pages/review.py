"""Review (reviewer): label the week's sample one item at a time, by keyboard.

Keys: 1 correct, 2 incorrect, 3 unreadable, N next (skip, the item goes back
to the pool for someone else). Streamlit reserves C and R, hence digits. The
choices and what a verdict without details means come from
:mod:`fieldtrust.labels.verdict_rule`; the verdict is written by
:func:`fieldtrust.labels.verdicts.record_verdict`, which checks the role; the
page only hides what a role cannot use.
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import auth, data, downloads, layout, sidebar, state, viewer, views
from fieldtrust.labels.assignment import ReviewItem, next_items, skip
from fieldtrust.labels.review_progress import ItemContext
from fieldtrust.labels.verdict_rule import VERDICT_CHOICES, verdict_label
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.store.access import allowed

from fieldtrust.errors import FieldtrustError, StoreLockedError

SKIP_REASON = "skipped by reviewer (next)"


def _verdict(identity: auth.Identity, item: ReviewItem, verdict: str) -> None:
    """Button callback: record the verdict; the rerun then shows the next item."""
    fields = layout.verdict_fields(verdict, state.REVIEW_FORM)
    try:
        data.write(
            record_verdict, actor=identity.user, extraction_id=item.extraction_id,
            verdict=verdict, sample_id=item.sample_id, review_round=item.review_round, **fields,
        )
    except StoreLockedError as exc:
        # Another process (an ingest) holds the store longer than we wait: say so
        # kindly; nothing was recorded, so the same key press simply works later.
        st.session_state[state.REVIEW_FLASH] = ("warning", layout.plain(data.busy_message(exc)))
        return
    except FieldtrustError as exc:  # a refusal (role, conflict, bad fields): the library's words
        st.session_state[state.REVIEW_FLASH] = ("error", layout.plain(exc))
        return
    layout.reset_verdict_form(state.REVIEW_FORM)
    st.session_state[state.REVIEW_FLASH] = (
        "success",
        f"Recorded **{verdict_label(verdict).lower()}** for {layout.plain(item.doc_id)}"
        f" · {layout.plain(item.field)}.",
    )


def _skip(identity: auth.Identity, item: ReviewItem) -> None:
    try:
        data.write(skip, identity.user, item.sample_id, item.extraction_id, SKIP_REASON)
    except FieldtrustError as exc:
        st.session_state[state.REVIEW_FLASH] = ("error", layout.plain(exc))
        return
    st.session_state[state.REVIEW_FLASH] = (
        "info", f"Skipped {layout.plain(item.doc_id)} · {layout.plain(item.field)}."
    )


def _show_item(item: ReviewItem, context: ItemContext) -> None:
    # Everything below comes from ingested files: shown as written, never as markdown.
    st.subheader(f"{layout.plain(item.doc_type)} · {layout.plain(item.field)}")
    left, right = st.columns([2, 3])
    with left:
        value = item.value if item.value is not None else f"({item.value_status})"
        st.markdown("**Extracted value**")
        st.code(value, language=None)
        if item.source_excerpt:
            st.markdown("**Source excerpt**")
            st.text(item.source_excerpt)
        else:
            st.caption("No source excerpt stored for this extraction: open the document.")
        if context.conflict:
            st.warning(f"Another source says: {layout.code_span(context.conflict_value)}")
    with right:
        viewer.show_document(item.extraction_id, item.source_excerpt,
                             zoom_key=state.VIEWER_REVIEW_ZOOM)
        st.markdown(
            f"Document {layout.code_span(item.doc_id)}  \nType **{layout.plain(item.doc_type)}**"
            f" · form version **{layout.plain(item.form_version)}**  \nField"
            f" **{layout.plain(item.field)}**  \nRound {item.review_round}"
            f" · cell {layout.code_span(item.cell)}"
        )
        with st.expander("Model's stated confidence (judge first: numbers anchor)"):
            st.metric("stated confidence", f"{context.confidence:.3f}")


#: Each verdict's button key (widget keys of state, so tests can press them).
_BUTTON_KEYS = {"correct": state.REVIEW_CORRECT, "incorrect": state.REVIEW_INCORRECT,
                "unclear": state.REVIEW_UNCLEAR}


def _verdict_controls(identity: auth.Identity, item: ReviewItem) -> None:
    with st.expander("If incorrect: what the document holds and why (optional)",
                     expanded=True):
        layout.verdict_details(state.REVIEW_FORM)
    buttons = st.columns(len(VERDICT_CHOICES) + 1)
    for place, choice in zip(buttons, VERDICT_CHOICES, strict=False):
        assert choice.value is not None
        place.button(choice.label, key=_BUTTON_KEYS[choice.value], shortcut=choice.key,
                     type="primary" if choice.value == "correct" else "secondary",
                     help=choice.help, on_click=_verdict,
                     args=(identity, item, choice.value), width="stretch")
    buttons[-1].button("Next (skip)", key=state.REVIEW_SKIP, shortcut="N",
                       on_click=_skip, args=(identity, item), width="stretch")
    keys = " · ".join(f"**{c.key}** {c.label.lower()}" for c in VERDICT_CHOICES)
    st.caption(f"Keys: {keys} · **N** next (skip). Incorrect without details is recorded"
               " with the error type and correction 'not recorded'.")


def _audit_tab(identity: auth.Identity | None) -> None:
    sample_id = data.cached("current_sample")
    if sample_id is None:
        st.info("No audit sample drawn yet: a QA lead draws one on the Weekly audit page"
                " (or `fieldtrust sample --week ...`).")
        return
    progress = data.cached("sample_progress", sample_id)
    share = progress.labelled / progress.items if progress.items else 0.0
    st.progress(share, text=f"Sample {sample_id}: {progress.labelled:,} of {progress.items:,}"
                            f" items labelled ({progress.skips:,} skips)")
    cells = views.frame_of(data.cached("cell_progress", sample_id))
    if not cells.empty:
        usable = int(cells["n_usable"].sum())
        with st.expander(f"Usable now: {usable:,} labels (each cell's labelled prefix)"):
            st.caption("Items come in each cell's random order; the labels up to a cell's first"
                       " open item count in the estimates. A label past an open or skipped"
                       " item waits until that item is labelled.")
            downloads.show_table("review_cell_progress",
                                 cells[["cell", "n_sample", "n_labelled", "n_usable"]])
    if identity is None or not allowed(identity.roles, "label"):
        who = "nobody" if identity is None else f"{identity.user} ({identity.role or 'no role'})"
        st.info(f"Labelling needs the reviewer or qa_lead role; you are {layout.plain(who)}.")
        return
    layout.flash(state.REVIEW_FLASH)
    items = data.write(next_items, identity.user, sample_id, count=1)
    if not items:
        st.success("Nothing left for you in this sample. Thank you!")
        return
    item = items[0]
    context = data.cached("item_context", item.extraction_id, identity.user, sample_id)
    st.caption(f"You have labelled {context.reviewer_labelled:,} items of this sample.")
    _show_item(item, context)
    _verdict_controls(identity, item)


def _priority_tab() -> None:
    queue = data.cached("priority_queue", sidebar.current_scope(), 200)
    st.caption("Outside the audit: extractions not covered by an approved threshold, conflicts"
               " and unclear values first, then the lowest calibrated confidence.")
    if len(queue) == 0:
        st.info("The priority queue is empty for these filters.")
        return
    downloads.show_table("priority_queue", queue)
    ids = queue.column("extraction_id").to_pylist()
    picked = st.selectbox("Open an item's document", ids, key=state.VIEWER_QUEUE_ITEM)
    if picked is not None:
        viewer.show_document(picked, zoom_key=state.VIEWER_QUEUE_ZOOM)


st.title("Review")
identity = auth.current_identity()
layout.lazy_tabs(
    {"Assigned audit items": lambda: _audit_tab(identity), "Priority queue": _priority_tab},
    key=state.REVIEW_TAB,
)
