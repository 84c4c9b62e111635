"""The page list, ordered for the acting user's roles (the entry point calls it).

Apart from ``app.py`` so it can be imported (and tested) without running the app.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

#: (script, title, icon, url path) of every page, in the QA lead's order.
PAGE_SPECS = (
    ("app_pages/overview.py", "Overview", ":material/dashboard:", "overview"),
    ("app_pages/calibration.py", "Calibration", ":material/tune:", "calibration"),
    ("app_pages/audit.py", "Weekly audit", ":material/fact_check:", "audit"),
    ("app_pages/review.py", "Review", ":material/rate_review:", "review"),
    ("app_pages/automation.py", "Automation", ":material/verified:", "automation"),
)

#: Page order per role, the page each opens on first: a reviewer's work is the
#: Review page, a manager's the Automation decisions. Every page stays reachable
#: (reading needs no role); the library refuses what a role may not do.
ROLE_ORDER = {
    "reviewer": ("review", "overview", "calibration", "audit", "automation"),
    "manager": ("overview", "automation", "calibration", "audit", "review"),
}


def page_order(roles: frozenset[str]) -> tuple[str, ...]:
    """The url paths of the pages for someone holding ``roles``, theirs first."""
    if "qa_lead" in roles or not roles:
        return tuple(spec[3] for spec in PAGE_SPECS)
    if "reviewer" in roles:
        return ROLE_ORDER["reviewer"]
    return ROLE_ORDER["manager"]  # manager or admin


def pages_for(roles: frozenset[str]) -> list[Any]:
    """The navigation for someone holding ``roles``: their pages first, the first the default."""
    order = page_order(roles)
    specs = {spec[3]: spec for spec in PAGE_SPECS}
    return [
        st.Page(specs[name][0], title=specs[name][1], icon=specs[name][2],
                url_path=specs[name][3], default=index == 0)
        for index, name in enumerate(order)
    ]
