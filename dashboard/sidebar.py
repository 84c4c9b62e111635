"""The filters every page shares: a window of weeks, document types, form versions.

The entry point draws them once in the sidebar; pages read the resulting
:class:`~fieldtrust.store.scope.Scope` with :func:`current_scope`, so "the last 8 weeks of
invoices" means the same rows on every page.
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import data, state
from fieldtrust.store.scope import Scope
from fieldtrust.store.summary import FilterOptions


def draw_filters(options: FilterOptions) -> Scope:
    """Draw the shared filters in the sidebar and return the scope they select."""
    st.sidebar.subheader("Filters")
    weeks = _week_window(options.weeks)
    doc_types = st.sidebar.multiselect(
        "Document type", options.doc_types, key=state.FILTER_DOC_TYPES,
        placeholder="all document types",
    )
    versions = sorted(
        {v for d, v in options.form_versions if not doc_types or d in doc_types}
    )
    # A version chosen before the document-type filter narrowed the list must go,
    # or Streamlit refuses a default missing from the options.
    chosen = [v for v in st.session_state.get(state.FILTER_FORM_VERSIONS, []) if v in versions]
    st.session_state[state.FILTER_FORM_VERSIONS] = chosen
    form_versions = st.sidebar.multiselect(
        "Form version", versions, key=state.FILTER_FORM_VERSIONS,
        placeholder="all form versions",
    )
    scope = Scope(weeks=weeks, doc_types=tuple(doc_types), form_versions=tuple(form_versions))
    st.session_state[state.FILTER_SCOPE] = scope
    return scope


def _week_window(weeks: tuple[str, ...]) -> tuple[str, ...]:
    if len(weeks) < 2:
        return weeks
    chosen = st.session_state.get(state.FILTER_WEEKS)
    # A stale or malformed value (the store changed under us) falls back to the default.
    if not (isinstance(chosen, list | tuple) and len(chosen) == 2
            and all(w in weeks for w in chosen)):
        first = default_weeks(weeks, data.bar().weeks)
        st.session_state[state.FILTER_WEEKS] = (first[0], first[-1])
    window = st.sidebar.select_slider(
        "Weeks", options=list(weeks), key=state.FILTER_WEEKS,
        help="ISO weeks (UTC) of extraction time that every page looks at.",
    )
    start, end = window  # type: ignore[str-unpack]  # a range slider returns (start, end)
    return weeks[weeks.index(start): weeks.index(end) + 1]


def default_weeks(weeks: tuple[str, ...], window: int) -> tuple[str, ...]:
    """The weeks a first visit shows: the certification window's last ``window`` of ``weeks``."""
    return weeks[-min(window, len(weeks)):] if weeks else weeks


def first_scope(options: FilterOptions, window: int) -> Scope:
    """The scope a first visit's filters select: :func:`default_weeks`, every type and version."""
    return Scope(weeks=default_weeks(options.weeks, window))


def current_scope() -> Scope:
    """The scope the sidebar selected on this run (all rows before it is drawn)."""
    scope = st.session_state.get(state.FILTER_SCOPE)
    return scope if isinstance(scope, Scope) else Scope()
