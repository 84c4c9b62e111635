"""fieldtrust dashboard: entry point (``fieldtrust serve`` runs ``streamlit run`` on it).

This script owns what every page shares: the page list (``st.navigation``),
who is looking (``dashboard.auth``) and the sidebar filters. Pages live in
``dashboard/app_pages/`` and only read widgets, call the library and draw.
Errors fieldtrust raises on purpose become a message here, at the edge.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

# `streamlit run` runs this file as a script; the package it belongs to is
# imported by its installed name, so the same code serves a wheel and a checkout.
from fieldtrust.dashboard import auth, data, layout, sidebar, state
from fieldtrust.store.errors import FieldtrustError, StoreLockedError

st.set_page_config(page_title="fieldtrust", page_icon=":material/fact_check:", layout="wide")

PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/dashboard:",
            default=True, url_path="overview"),
    st.Page("app_pages/calibration.py", title="Calibration", icon=":material/tune:",
            url_path="calibration"),
    st.Page("app_pages/audit.py", title="Weekly audit", icon=":material/fact_check:",
            url_path="audit"),
    st.Page("app_pages/review.py", title="Review", icon=":material/rate_review:",
            url_path="review"),
    st.Page("app_pages/automation.py", title="Automation", icon=":material/verified:",
            url_path="automation"),
]


def main() -> None:
    page = st.navigation(PAGES)
    path = data.db_path()
    with data.run_reads(path):
        _draw(page, path)


def _draw(page: Any, path: str) -> None:
    auth.remember_pick()
    try:
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
    except StoreLockedError as exc:
        # A write that landed just before the store got busy still says so: a reviewer
        # must not take a saved verdict for a lost one.
        for key in state.FLASHES:
            layout.flash(key)
        st.warning(layout.plain(data.busy_message(exc)), icon=":material/hourglass_top:")
    except FieldtrustError as exc:
        # Library messages quote values from files (a doc_type, a path): as written.
        st.error(layout.plain(exc), icon=":material/error:")


main()
