"""The one boundary of the dashboard: a fieldtrust error reaching a page becomes a message on it.

The library raises :class:`fieldtrust.errors.FieldtrustError` on purpose,
with a message for people (a bad settings file, a refusal, a store that
cannot be read); the entry point runs every page, and everything it does
before, inside :func:`messages_on_the_page`, so such an error is shown as
one message where the page would be, never as a traceback. Anything else is
a bug and keeps its traceback. The CLI's counterpart is
``fieldtrust.cli.main.FieldtrustGroup``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import streamlit as st
from fieldtrust.dashboard import data, layout, state

from fieldtrust.errors import FieldtrustError, StoreLockedError


@contextlib.contextmanager
def messages_on_the_page() -> Iterator[None]:
    """Run the block; a :class:`FieldtrustError` it raises is drawn as a message instead."""
    try:
        yield
    except StoreLockedError as exc:
        # A write that landed just before the store got busy still says so: a reviewer
        # must not take a saved verdict for a lost one.
        for key in state.FLASHES:
            layout.flash(key)
        st.warning(layout.plain(data.busy_message(exc)), icon=":material/hourglass_top:")
    except FieldtrustError as exc:
        # Library messages quote values from files (a doc_type, a path): as written.
        st.error(layout.plain(exc), icon=":material/error:")
