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
AUDIT_ALLOCATION = "audit.allocation"
AUDIT_DRAW = "audit.draw"
AUDIT_TREND_STRATUM = "audit.trend_stratum"
AUDIT_DRAW_FLASH = "audit.draw_flash"
AUDIT_ADJ_VERDICT = "audit.adjudication_verdict"
AUDIT_ADJ_ITEM = "audit.adjudication_item"
AUDIT_ADJ_TYPE = "audit.adjudication_error_type"
AUDIT_ADJ_VALUE = "audit.adjudication_value"
AUDIT_ADJ_DETAIL = "audit.adjudication_error_detail"
AUDIT_ADJ_CORRECTION = "audit.adjudication_corrected_status"
AUDIT_ADJ_SUBMIT = "audit.adjudication_submit"
AUDIT_ADJ_FLASH = "audit.adjudication_flash"

# Review page.
REVIEW_TAB = "review.tab"
REVIEW_CORRECTED = "review.corrected_value"
REVIEW_CORRECTION = "review.corrected_status"
REVIEW_ERROR_TYPE = "review.error_type"
REVIEW_ERROR_DETAIL = "review.error_detail"
REVIEW_CORRECT = "review.correct"
REVIEW_INCORRECT = "review.incorrect"
REVIEW_UNCLEAR = "review.unclear"
REVIEW_SKIP = "review.skip"
REVIEW_UNDO = "review.undo"  # change your last verdict
REVIEW_KEEP = "review.keep"  # leave the verdict being changed as it is
REVIEW_FLASH = "review.flash"
REVIEW_SAMPLE = "review.sample"
REVIEW_CORRECTING = "review.correcting"  # the label id being changed (LAST: the newest)
REVIEW_PREFILLED = "review.prefilled"  # the label whose fields the form was filled with
REVIEW_NEXT = "review.next_screen"  # ((user, sample), screen) a key press's write left
REVIEW_RECENT = "review.recent"  # the "My recent labels" expander
REVIEW_RECENT_PICK = "review.recent_pick"
REVIEW_RECENT_EDIT = "review.recent_edit"

# Priority queue tab of the review page: a verdict on the item picked.
QUEUE_CORRECT = "queue.correct"
QUEUE_INCORRECT = "queue.incorrect"
QUEUE_UNCLEAR = "queue.unclear"
QUEUE_CORRECTED = "queue.corrected_value"
QUEUE_CORRECTION = "queue.corrected_status"
QUEUE_ERROR_TYPE = "queue.error_type"
QUEUE_ERROR_DETAIL = "queue.error_detail"
QUEUE_FLASH = "queue.flash"

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
    corrected_status: str
    error_type: str
    error_detail: str


REVIEW_FORM = VerdictForm(REVIEW_CORRECTED, REVIEW_CORRECTION, REVIEW_ERROR_TYPE,
                          REVIEW_ERROR_DETAIL)
AUDIT_ADJ_FORM = VerdictForm(AUDIT_ADJ_VALUE, AUDIT_ADJ_CORRECTION, AUDIT_ADJ_TYPE,
                             AUDIT_ADJ_DETAIL)
QUEUE_FORM = VerdictForm(QUEUE_CORRECTED, QUEUE_CORRECTION, QUEUE_ERROR_TYPE,
                         QUEUE_ERROR_DETAIL)


@dataclass(frozen=True)
class VerdictButtons:
    """The keys of one row of verdict buttons (1 correct, 2 incorrect, 3 unclear)."""

    correct: str
    incorrect: str
    unclear: str


REVIEW_BUTTONS = VerdictButtons(REVIEW_CORRECT, REVIEW_INCORRECT, REVIEW_UNCLEAR)
QUEUE_BUTTONS = VerdictButtons(QUEUE_CORRECT, QUEUE_INCORRECT, QUEUE_UNCLEAR)

# Document viewer (review, priority queue, adjudication).
VIEWER_REVIEW_ZOOM = "viewer.review_zoom"
VIEWER_REVIEW_WHOLE = "viewer.review_whole_page"
VIEWER_QUEUE_ITEM = "viewer.queue_item"
VIEWER_QUEUE_ZOOM = "viewer.queue_zoom"
VIEWER_ADJ_ZOOM = "viewer.adjudication_zoom"


def download_key(table: str, kind: str) -> str:
    """Key of a table's download button (``downloads.<table>.<csv|parquet>``)."""
    return f"downloads.{table}.{kind}"

#: Every page's one-shot message about a write that has happened.
FLASHES = (AUDIT_DRAW_FLASH, AUDIT_ADJ_FLASH, REVIEW_FLASH, QUEUE_FLASH, AUTO_FLASH)
