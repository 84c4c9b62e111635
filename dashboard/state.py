"""Every session-state key the dashboard uses, in one place, prefixed per page.

Streamlit widgets with a ``key`` share one flat namespace per session. Keeping
the names here (``<page>.<what>``) stops two pages from colliding and lets the
tests set or read a widget by the same name the page uses.
"""

from __future__ import annotations

from dataclasses import dataclass

# The store's data version read at the start of this run (the cache key of every read).
DATA_VERSION = "data.version"

# Shared sidebar filters (the entry point owns them; every page reads them).
FILTER_WEEKS = "filters.weeks"
FILTER_DOC_TYPES = "filters.doc_types"
FILTER_FORM_VERSIONS = "filters.form_versions"
FILTER_SCOPE = "filters.scope"  # the Scope the filters produced on this run

# Identity.
AUTH_IDENTITY = "auth.identity"
AUTH_DEMO_USER = "auth.demo_user"
AUTH_DEMO_KEPT = "auth.demo_user_kept"  # the pick, outside the widget (survives busy runs)

# Calibration page.
CAL_STRATUM = "calibration.stratum"
CAL_STRATEGY = "calibration.strategy"
CAL_BINS = "calibration.bins"

# Weekly audit page.
AUDIT_WEEK = "audit.week"
AUDIT_TAB = "audit.tab"
AUDIT_BASE_RATE = "audit.base_rate"
AUDIT_MINIMUM = "audit.minimum"
AUDIT_BOOST = "audit.boost"
AUDIT_BUDGET = "audit.budget"
AUDIT_DRAW = "audit.draw"
AUDIT_TREND_STRATUM = "audit.trend_stratum"
AUDIT_DRAW_FLASH = "audit.draw_flash"
AUDIT_ADJ_VERDICT = "audit.adjudication_verdict"
AUDIT_ADJ_ITEM = "audit.adjudication_item"
AUDIT_ADJ_TYPE = "audit.adjudication_error_type"
AUDIT_ADJ_VALUE = "audit.adjudication_value"
AUDIT_ADJ_DETAIL = "audit.adjudication_error_detail"
AUDIT_ADJ_ABSENT = "audit.adjudication_absent"
AUDIT_ADJ_SUBMIT = "audit.adjudication_submit"
AUDIT_ADJ_FLASH = "audit.adjudication_flash"

# Review page.
REVIEW_TAB = "review.tab"
REVIEW_CORRECTED = "review.corrected_value"
REVIEW_ABSENT = "review.field_absent"
REVIEW_ERROR_TYPE = "review.error_type"
REVIEW_ERROR_DETAIL = "review.error_detail"
REVIEW_CORRECT = "review.correct"
REVIEW_INCORRECT = "review.incorrect"
REVIEW_UNCLEAR = "review.unclear"
REVIEW_SKIP = "review.skip"
REVIEW_FLASH = "review.flash"
REVIEW_SAMPLE = "review.sample"

# Automation page.
AUTO_STRATUM = "automation.stratum"
AUTO_COMMENT = "automation.comment"
AUTO_APPROVE = "automation.approve"
AUTO_REJECT = "automation.reject"
AUTO_REVOKE = "automation.revoke"
AUTO_RESUME = "automation.resume"
AUTO_RESUME_SEGMENT = "automation.resume_segment"
AUTO_RESUME_COMMENT = "automation.resume_comment"
AUTO_FLASH = "automation.flash"
AUTO_CONFIRM = "automation.confirm"  # the dialog's confirm button
AUTO_CANCEL = "automation.cancel"
AUTO_DIALOG = "automation.dialog"  # (action, stratum key) of the open confirmation dialog


@dataclass(frozen=True)
class VerdictForm:
    """The keys of one verdict form's widgets: the review page's and the adjudication's."""

    corrected_value: str
    field_absent: str
    error_type: str
    error_detail: str


REVIEW_FORM = VerdictForm(REVIEW_CORRECTED, REVIEW_ABSENT, REVIEW_ERROR_TYPE, REVIEW_ERROR_DETAIL)
AUDIT_ADJ_FORM = VerdictForm(AUDIT_ADJ_VALUE, AUDIT_ADJ_ABSENT, AUDIT_ADJ_TYPE, AUDIT_ADJ_DETAIL)

# Document viewer (review, priority queue, adjudication).
VIEWER_REVIEW_ZOOM = "viewer.review_zoom"
VIEWER_QUEUE_ITEM = "viewer.queue_item"
VIEWER_QUEUE_ZOOM = "viewer.queue_zoom"
VIEWER_ADJ_ZOOM = "viewer.adjudication_zoom"


def download_key(table: str, kind: str) -> str:
    """Key of a table's download button (``downloads.<table>.<csv|parquet>``)."""
    return f"downloads.{table}.{kind}"

#: Every page's one-shot message about a write that has happened.
FLASHES = (AUDIT_DRAW_FLASH, AUDIT_ADJ_FLASH, REVIEW_FLASH, AUTO_FLASH)
