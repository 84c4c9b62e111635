"""fieldtrust dashboard: entry point (``fieldtrust serve`` runs ``streamlit run`` on it).

This script owns what every page shares: the page list (``st.navigation``),
who is looking (``dashboard.auth``) and the sidebar filters. Pages live in
``dashboard/app_pages/`` and only read widgets, call the library and draw.
Errors fieldtrust raises on purpose become a message on the page
(``dashboard.boundary``), wherever in the run they are raised.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

# `streamlit run` runs this file as a script; the package it belongs to is
# imported by its installed name, so the same code serves a wheel and a checkout.
from fieldtrust.dashboard import auth, boundary, data, layout, sidebar, state
from fieldtrust.dashboard.navigation import pages_for

st.set_page_config(page_title="fieldtrust", page_icon=layout.page_icon(), layout="wide")

def _acting_roles() -> frozenset[str]:
    """The roles of the user acting in this run, as far as known before the pages run."""
    try:
        users = dict(data.cached("users"))
        picked = st.session_state.get(state.AUTH_DEMO_USER,
                                      st.session_state.get(state.AUTH_DEMO_KEPT))
        if picked is None and not auth.oidc_configured():
            picked = auth.default_user(users) if users else None
        if auth.oidc_configured():
            identity = auth.current_identity()
            return identity.roles if identity is not None else frozenset()
        return frozenset(users.get(picked, ()))
    except Exception:  # no store yet, or busy: the default navigation
        return frozenset()


def main() -> None:
    # Everything, the settings the store path comes from included, inside the boundary.
    with boundary.messages_on_the_page():
        path = data.db_path()
        with data.run_reads(path):
            page = st.navigation(pages_for(_acting_roles()))
            _draw(page, path)


def _draw(page: Any, path: str) -> None:
    auth.remember_pick()
    version = data.data_version(path)
    st.session_state[state.DATA_VERSION] = version
    if version is None or version.empty:
        auth.draw_identity(path, has_store=version is not None)
        st.title(page.title)
        layout.empty_state(path)
        return
    auth.draw_identity(path, has_store=True)
    sidebar.draw_filters(data.cached("filter_options"))
    layout.sidebar_footer(path, version)
    page.run()


main()
