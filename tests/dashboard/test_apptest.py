"""Every dashboard page, run headless with Streamlit's AppTest on real store files.

Pages render on an empty store (an empty state, not a traceback) and on the
demo store; labelling writes a label; an approval writes a decision with its
evidence; a reviewer sees no approve button and the library refuses a forged
approval.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fieldtrust.dashboard import layout, state
from fieldtrust.dashboard.layout import EMPTY_HINT
from fieldtrust.governance.acts import approve
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.governance.certification import certify
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.store.access import grant_role, list_users
from streamlit.testing.v1 import AppTest

from fieldtrust import store
from fieldtrust.errors import PermissionDenied
from tests.conftest import Builder, file_rows, store_held, table_fingerprint
from tests.dashboard.conftest import REVIEW_DESIGN, settle_disagreements

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")

PAGES = {
    "overview": "app_pages/overview.py",
    "calibration": "app_pages/calibration.py",
    "audit": "app_pages/audit.py",
    "review": "app_pages/review.py",
    "automation": "app_pages/automation.py",
}
TIMEOUT = 180

#: The session key of each page's tab picker.
TABS = {"audit": state.AUDIT_TAB, "review": state.REVIEW_TAB}


def _open(page: str, user: str | None = None, *, tab: str | None = None) -> AppTest:
    """Run the app, act as ``user`` (demo mode), then show ``page`` (on ``tab``, if given)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if user is not None:
        at.selectbox(key=state.AUTH_DEMO_USER).set_value(user).run()
    at.switch_page(PAGES[page]).run()
    assert not at.exception, at.exception[0].message
    if tab is not None:
        at.session_state[TABS[page]] = tab
        at.run()
        assert not at.exception, at.exception[0].message
    return at


OpenPage = Callable[..., AppTest]


@pytest.fixture
def open_page(use_db: Callable[[Path], None]) -> OpenPage:
    """``open_page(db, page, user=None, tab=None)``: point the dashboard at ``db``, then
    :func:`_open` the page."""

    def open_on(db: Path, page: str, user: str | None = None, *, tab: str | None = None
                ) -> AppTest:
        use_db(db)
        return _open(page, user, tab=tab)

    return open_on


def _chart_data(chart: Any) -> pd.DataFrame:
    """The table a Vega-Lite chart on the page was given (Arrow, as Streamlit sends it)."""
    import pyarrow as pa

    raw = chart.proto.data.data or chart.proto.datasets[0].data.data
    return pa.ipc.open_stream(raw).read_all().to_pandas()


def _shown(markdown: str) -> str:
    """What a reader sees of ``markdown``'s backslash escapes (CommonMark: before punctuation)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [i.value for i in at.info]
    parts += [w.value for w in at.warning] + [s.value for s in at.success]
    parts += [e.value for e in at.error] + [c.value for c in at.caption]
    return _shown("\n".join(str(p) for p in parts))


def _click_accepted(at: AppTest, key: str) -> None:
    """Click the button ``key``: the page takes it, with no exception and no error shown."""
    at.button(key=key).click().run()
    assert not at.exception
    assert not at.error, at.error[0].value


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_on_an_empty_store_shows_the_empty_state(
    page: str, empty_db: Path, open_page: OpenPage
) -> None:
    at = open_page(empty_db, page)
    assert [i.value for i in at.info] == [EMPTY_HINT]
    assert at.title[0].value != ""


def test_a_missing_store_shows_the_empty_state(tmp_path: Path, open_page: OpenPage) -> None:
    missing = tmp_path / "missing.duckdb"
    at = open_page(missing, "overview")
    assert EMPTY_HINT in _texts(at)
    assert not missing.exists()  # the dashboard never creates a store by looking at it


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("overview", "overall"),
        ("calibration", "threshold"),
        ("audit", "cells"),
        ("review", "items labelled"),
        ("automation", "nothing is automated"),
    ],
)
def test_page_renders_on_the_demo_store(
    page: str, expected: str, shared_demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(shared_demo_db, page, user="quinn")
    shown = _texts(at) + "\n".join(str(p.text) for p in at.get("progress"))
    assert expected in shown
    assert page == "review" or at.dataframe, "the page shows its tables"
    # Every table shown carries its CSV and Parquet downloads.
    assert len(at.get("download_button")) >= 2 * len(at.dataframe)


@pytest.mark.parametrize(
    ("tab", "expected"),
    [
        ("Labelling progress", "labelled"),
        ("Trend and alerts", "Weekly trend"),
        ("Adjudication", "Adjudicating"),
        ("Error types", "misread_characters"),
        ("Reviewers", "False flag"),
    ],
)
def test_audit_tab_renders_on_the_demo_store(
    tab: str, expected: str, shared_demo_db: Path, open_page: OpenPage
) -> None:
    # A reviewer: no draw or adjudication controls.
    at = open_page(shared_demo_db, "audit", user="ben", tab=tab)
    shown = _texts(at) + "\n".join(str(p.text) for p in at.get("progress"))
    shown += "\n".join(d.value.to_csv() for d in at.dataframe)
    shown += "\n".join(s.value for s in at.subheader)
    assert expected in shown


def test_overview_puts_the_strata_below_target_next_to_the_overall_figure(
    shared_demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(shared_demo_db, "overview", user="quinn")
    headline = next(m.value for m in at.markdown if "overall" in m.value)
    assert "below 95%" in headline and "n = " in headline and "[" in headline
    tables = at.dataframe
    below = tables[0].value
    pairs = set(zip(below["doc type"], below["field"], strict=True))
    assert ("handwritten_receipt", "tax") in pairs
    assert (below["accuracy"] < 0.95).all()
    # The heatmap: a Vega-Lite chart (the first page's, lighter than plotly's), with the
    # strata of the table below it.
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["layer"][1]["encoding"]["color"]["scale"]["domain"][1] == 0.95
    assert "handwritten_receipt" in str(chart.proto)


def test_overview_figures_say_their_n_why_it_differs_from_the_sidebar_and_use_human_headers(
    shared_demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(shared_demo_db, "overview", user="quinn")
    captions = _texts(at)
    recorded = file_rows(shared_demo_db, "SELECT count(*) FROM labels")[0][0]
    headline = next(m.value for m in at.markdown if "overall" in m.value)
    n = int(re.search(r"\(n = ([\d,]+)\)", headline).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert n < recorded  # the demo's second reviews and adjudications are labels too
    assert f"n counts {n:,} design-based labels" in captions
    assert f"The sidebar's {recorded:,} labels are every label recorded" in captions
    assert f"{recorded:,} labels recorded (every review" in captions  # the sidebar itself
    strata = at.dataframe[1].value
    assert not {"accuracy_high", "n_labeled", "labels_by_provenance"} & set(strata.columns)
    assert {"design-based labels", "95% interval", "audit labels", "covers"} <= set(
        strata.columns)
    # A stratum whose interval is uninformative shows the note, the others an interval
    # (on the demo's labels every stratum's is usable; test_figures.py words the note).
    for row in strata.to_dict(orient="records"):
        shown = row["95% interval"]
        assert shown.startswith("no usable interval") or re.fullmatch(
            r"\[\d+\.\d%, \d+\.\d%\]", shown), shown
    # Each heatmap cell with labels says how many.
    (heatmap,) = at.get("vega_lite_chart")
    cells = _chart_data(heatmap)
    assert len(cells) == len(strata) and all(
        re.fullmatch(r"\d+\.\d%\nn=[\d,]+|no labels", t) for t in cells["text"])


def test_calibration_metrics_carry_an_interval_and_their_label_count(
    shared_demo_db: Path, open_page: OpenPage
) -> None:
    import re

    at = open_page(shared_demo_db, "calibration", user="quinn")
    assert not at.exception, at.exception[0].message
    captions = [c.value for c in at.caption]
    ranges = [c for c in captions if re.fullmatch(r"\[0\.\d{3}, 0\.\d{3}\] \(n = [\d,]+\)", c)]
    assert len(ranges) == 1, captions  # the Brier score's; the ECE shows none
    brier = next(m for m in at.metric if m.label.startswith("Brier"))
    low, high = (float(x) for x in re.findall(r"0\.\d{3}", ranges[0]))
    assert low <= float(brier.value) <= high
    # The point threshold says how many labels lie above it, and of how many extractions.
    thresholds = next(m.value for m in at.markdown if "threshold" in m.value)
    if "Point threshold" in thresholds:
        assert re.search(r"Point threshold \*\*0\.\d{3}\*\* \(estimate, no guarantee\):"
                         r" accuracy above [\d.]+% on n = [\d,]+ labels above, coverage"
                         r" [\d.]+% of [\d,]+ extractions", _shown(thresholds)), thresholds
    ece_caption = next(c for c in captions if c.startswith("debiased squared form"))
    assert re.fullmatch(r"debiased squared form -?\d\.\d{4}; [\d,]+ labels; no interval",
                        ece_caption)


#: A reviewer's open items in the order the review page shows them (the first is on screen).
_OPEN_ITEMS_SQL = """
SELECT a.sample_id, a.extraction_id FROM assignments a JOIN audit_items i USING (sample_id,
    extraction_id)
WHERE a.reviewer = ? AND NOT EXISTS (SELECT 1 FROM labels l WHERE
    l.extraction_id = a.extraction_id AND l.review_round = a.review_round)
ORDER BY a.assigned_at, i.prn, a.extraction_id
"""


def _labels_now(db: Path) -> list[tuple[object, ...]]:
    return file_rows(db, "SELECT count(*), sum(hash(label_id, verdict)) FROM labels")


def _on_screen(db: Path, user: str) -> tuple[str, str]:
    """(sample_id, extraction_id) of the item ``user``'s review page shows now."""
    return file_rows(db, _OPEN_ITEMS_SQL, [user])[0]


def test_labelling_writes_a_label_and_moves_on(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "review", user="ana")
    held = file_rows(demo_db, _OPEN_ITEMS_SQL, ["ana"])
    assert len(held) == 2  # the item on screen and the next (its page is being prepared)
    sample_id, extraction_id = held[0]

    at.button(key=state.REVIEW_CORRECT).click().run()
    assert not at.exception

    labels = file_rows(
        demo_db,
        "SELECT sample_id, verdict, reviewer, review_round FROM labels WHERE extraction_id = ?",
        [extraction_id],
    )
    assert labels == [(sample_id, "correct", "ana", "primary")]
    assert any("Recorded **correct**" in s.value for s in at.success)
    now = file_rows(demo_db, _OPEN_ITEMS_SQL, ["ana"])
    assert len(now) == 2 and now[0] == held[1]  # the held one is shown, one more is held


@pytest.mark.parametrize(
    ("error_type", "detail"),
    [("misread_characters", None), ("other", "stamp over the amount")],
    ids=["misread_characters", "other_with_its_detail"],
)
def test_an_incorrect_verdict_records_the_correction_error_type_and_detail(
    demo_db: Path, open_page: OpenPage, error_type: str, detail: str | None
) -> None:
    at = open_page(demo_db, "review", user="ben")
    held = _on_screen(demo_db, "ben")[1:]
    at.text_input(key=state.REVIEW_CORRECTED).set_value("12.50")
    at.selectbox(key=state.REVIEW_ERROR_TYPE).set_value(error_type)
    if detail is not None:
        at.text_input(key=state.REVIEW_ERROR_DETAIL).set_value(detail)
    _click_accepted(at, state.REVIEW_INCORRECT)
    labels = file_rows(
        demo_db,
        "SELECT verdict, corrected_value, corrected_status, error_type, error_detail, reviewer,"
        " review_round FROM labels WHERE extraction_id = ?",
        [held[0]],
    )
    assert labels == [("incorrect", "12.50", "present", error_type, detail, "ben", "primary")]


def test_key_2_alone_records_incorrect_with_nothing_guessed(
    demo_db: Path, open_page: OpenPage
) -> None:
    """No default error type: a bare 'incorrect' is not_recorded, as in every import."""
    at = open_page(demo_db, "review", user="chloe")
    _, shown = file_rows(demo_db, _OPEN_ITEMS_SQL, ["chloe"])[0]  # the first held is on screen
    held = (shown,)
    assert at.selectbox(key=state.REVIEW_ERROR_TYPE).value is None
    assert at.selectbox(key=state.REVIEW_CORRECTION).value is None
    _click_accepted(at, state.REVIEW_INCORRECT)
    assert file_rows(
        demo_db,
        "SELECT verdict, corrected_value, corrected_status, error_type FROM labels"
        " WHERE extraction_id = ?", [held[0]],
    ) == [("incorrect", None, None, "not_recorded")]


def test_unreadable_and_absent_are_offered_and_a_contradiction_is_refused_in_the_forms_words(
    demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(demo_db, "review", user="chloe")
    options = at.selectbox(key=state.REVIEW_CORRECTION).options
    assert {"Absent", "Unreadable", "Not recorded"} <= set(options)
    assert "Unreadable" in [b.label for b in at.button]
    before = file_rows(demo_db, "SELECT count(*) FROM labels")
    at.selectbox(key=state.REVIEW_CORRECTION).set_value("null")
    at.text_input(key=state.REVIEW_CORRECTED).set_value("12.50")
    at.button(key=state.REVIEW_INCORRECT).click().run()
    assert not at.exception
    assert any("'Absent' (corrected_status null) means there is no value" in _shown(e.value)
               for e in at.error), [e.value for e in at.error]
    assert file_rows(demo_db, "SELECT count(*) FROM labels") == before


def test_the_adjudication_form_has_no_verdict_until_one_is_picked(
    demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(demo_db, "audit", user="quinn", tab="Adjudication")
    assert at.selectbox(key=state.AUDIT_ADJ_VERDICT).value is None
    before = file_rows(demo_db, "SELECT count(*) FROM labels")
    at.button(key=state.AUDIT_ADJ_SUBMIT).click().run()
    assert any("Pick the verdict first" in e.value for e in at.error)
    assert file_rows(demo_db, "SELECT count(*) FROM labels") == before


def test_adjudication_records_error_type_other_with_its_detail(
    demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(demo_db, "audit", user="quinn", tab="Adjudication")
    item = at.selectbox(key=state.AUDIT_ADJ_ITEM).value
    at.selectbox(key=state.AUDIT_ADJ_VERDICT).set_value("incorrect")
    at.selectbox(key=state.AUDIT_ADJ_TYPE).set_value("other")
    at.text_input(key=state.AUDIT_ADJ_DETAIL).set_value("stamp over the amount")
    at.selectbox(key=state.AUDIT_ADJ_CORRECTION).set_value("null")
    _click_accepted(at, state.AUDIT_ADJ_SUBMIT)
    labels = file_rows(
        demo_db,
        "SELECT verdict, corrected_value, corrected_status, error_type, error_detail, reviewer"
        " FROM labels WHERE extraction_id = ? AND review_round = 'adjudication'",
        [item],
    )
    assert labels == [("incorrect", None, "null", "other", "stamp over the amount", "quinn")]
    assert any(f"Adjudicated {item}: incorrect" in _shown(s.value) for s in at.success)


def test_next_skips_the_item_and_records_the_skip(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "review", user="ana")
    first = _on_screen(demo_db, "ana")[1]
    at.button(key=state.REVIEW_SKIP).click().run()
    assert not at.exception
    assert file_rows(demo_db, "SELECT extraction_id, reviewer FROM skips") == [(first, "ana")]
    assert _on_screen(demo_db, "ana")[1] != first
    held = file_rows(demo_db, "SELECT extraction_id FROM assignments WHERE reviewer = 'ana'")
    assert first not in {row[0] for row in held}  # given back to the pool


def test_undo_brings_the_last_verdict_back_and_a_new_one_supersedes_it(
    demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(demo_db, "review", user="ana")
    _, first = _on_screen(demo_db, "ana")
    at.button(key=state.REVIEW_CORRECT).click().run()
    assert _on_screen(demo_db, "ana")[1] != first

    before = _labels_now(demo_db)
    at.button(key=state.REVIEW_UNDO).click().run()
    assert not at.exception
    assert any(s.value.startswith("Changing your verdict") for s in at.subheader)
    assert "You said **correct**" in _texts(at)
    assert _labels_now(demo_db) == before  # nothing is written until the new verdict

    at.button(key=state.REVIEW_UNCLEAR).click().run()
    assert not at.exception
    rows = file_rows(
        demo_db,
        "SELECT verdict, supersedes IS NULL, label_id FROM labels WHERE extraction_id = ?"
        " ORDER BY labeled_at", [first],
    )
    assert [(v, s) for v, s, _ in rows] == [("correct", True), ("unclear", False)]
    (superseded,) = file_rows(demo_db, "SELECT supersedes FROM labels WHERE verdict = 'unclear'"
                                       " AND extraction_id = ?", [first])
    assert superseded[0] == rows[0][2]  # the new row points at the verdict it replaces
    assert any("from **correct** to **unclear**" in s.value for s in at.success)
    assert not any(s.value.startswith("Changing") for s in at.subheader)  # back to labelling


def test_keep_leaves_the_verdict_and_writes_nothing(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "review", user="ana")
    at.button(key=state.REVIEW_CORRECT).click().run()
    before = _labels_now(demo_db)
    at.button(key=state.REVIEW_UNDO).click().run()
    at.button(key=state.REVIEW_KEEP).click().run()
    assert not at.exception
    assert "Kept your verdict" in _texts(at)
    assert _labels_now(demo_db) == before


def test_my_recent_labels_changes_an_earlier_verdict(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "review", user="ana")
    _, first = _on_screen(demo_db, "ana")
    at.button(key=state.REVIEW_CORRECT).click().run()
    at.button(key=state.REVIEW_CORRECT).click().run()
    at.toggle(key=state.REVIEW_RECENT).set_value(True).run()
    (older,) = file_rows(demo_db, "SELECT label_id FROM labels WHERE extraction_id = ?", [first])
    at.selectbox(key=state.REVIEW_RECENT_PICK).set_value(older[0]).run()
    at.button(key=state.REVIEW_RECENT_EDIT).click().run()
    assert not at.exception
    assert "You said **correct**" in _texts(at)
    at.text_input(key=state.REVIEW_CORRECTED).set_value("12.50")
    at.selectbox(key=state.REVIEW_ERROR_TYPE).set_value("misread_characters")
    _click_accepted(at, state.REVIEW_INCORRECT)
    effective = file_rows(
        demo_db, "SELECT verdict, corrected_value, reviewer FROM labels l WHERE extraction_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)", [first])
    assert effective == [("incorrect", "12.50", "ana")]


def test_undo_of_an_adjudicated_verdict_is_refused_in_the_library_words(
    demo_db: Path, open_page: OpenPage
) -> None:
    (adjudicated,) = file_rows(
        demo_db, "SELECT l.label_id, l.reviewer, l.sample_id FROM labels l WHERE l.review_round"
        " = 'primary' AND EXISTS (SELECT 1 FROM labels a WHERE a.review_round = 'adjudication'"
        " AND a.extraction_id = l.extraction_id) ORDER BY l.labeled_at LIMIT 1")
    label_id, reviewer, _ = adjudicated
    at = open_page(demo_db, "review", user=reviewer)
    at.session_state[state.REVIEW_CORRECTING] = label_id
    before = _labels_now(demo_db)
    at.run()
    assert not at.exception
    assert any("was adjudicated by" in _shown(w.value) for w in at.warning)
    assert not any(s.value.startswith("Changing") for s in at.subheader)
    assert _labels_now(demo_db) == before


def test_a_verdict_from_the_priority_queue_is_recorded_outside_any_sample(
    demo_db: Path, open_page: OpenPage
) -> None:
    at = open_page(demo_db, "review", user="ana", tab="Priority queue")
    picked = at.selectbox(key=state.VIEWER_QUEUE_ITEM).value
    _click_accepted(at, state.QUEUE_CORRECT)
    labels = file_rows(demo_db, "SELECT verdict, reviewer FROM labels WHERE extraction_id = ?",
                       [picked])
    assert labels == [("correct", "ana")]
    assert any("Recorded **correct**" in s.value for s in at.success)
    assert at.selectbox(key=state.VIEWER_QUEUE_ITEM).value != picked  # it left the queue


def test_a_manager_sees_no_labelling_controls(shared_demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(shared_demo_db, "review", user="maya")
    assert not [b for b in at.button if b.key == state.REVIEW_CORRECT]
    assert "Labelling needs the reviewer or qa_lead role" in _texts(at)


def test_an_approval_writes_a_decision_with_its_evidence(
    demo_db: Path, open_page: OpenPage
) -> None:
    settle_disagreements(demo_db)  # an approval waits for them
    at = open_page(demo_db, "automation", user="maya")
    chosen = at.selectbox(key=state.AUTO_STRATUM).value
    doc_type, field = chosen.split("|")
    at.text_area(key=state.AUTO_COMMENT).set_value("stable for four weeks; agreed with QA")
    at.button(key=state.AUTO_APPROVE).click().run()
    assert not at.exception
    # The dialog restates what the approval rests on; nothing is written before confirming.
    shown = _texts(at)
    assert "Approve** automation of" in shown and "Certified threshold" in shown
    assert "Comment: stable for four weeks" in shown
    assert file_rows(demo_db, "SELECT count(*) FROM decisions") == [(0,)]
    at.button(key=state.AUTO_CONFIRM).click().run()
    assert not at.exception

    rows = file_rows(
        demo_db,
        "SELECT d.doc_type, d.field, d.action, d.threshold, d.decided_by, d.role, d.comment,"
        " e.payload_json FROM decisions d JOIN evidence_snapshots e USING (evidence_id)",
    )
    assert len(rows) == 1
    got_type, got_field, action, threshold, who, role, comment, payload_json = rows[0]
    assert (got_type, got_field, action, who, role) == (doc_type, field, "approve", "maya",
                                                         "manager")
    assert comment == "stable for four weeks; agreed with QA"
    evidence = json.loads(payload_json)["certification"]
    assert evidence["threshold"] == threshold
    assert evidence["accuracy_low"] >= 0.95
    assert evidence["labels_above"] >= 100
    assert any("approve of" in s.value for s in at.success)
    policy = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert list(policy["status"]) == ["active"]


def test_an_approval_without_comment_is_refused(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "automation", user="maya")
    at.button(key=state.AUTO_APPROVE).click().run()
    at.button(key=state.AUTO_CONFIRM).click().run()
    assert any("needs a comment" in e.value for e in at.error)
    assert file_rows(demo_db, "SELECT count(*) FROM decisions") == [(0,)]


def test_a_reviewer_cannot_approve(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "automation", user="ana")
    keys = {b.key for b in at.button}
    assert state.AUTO_APPROVE not in keys and state.AUTO_REJECT not in keys
    assert "Decisions need the manager or admin role; you are ana (reviewer)" in _texts(at)

    # A forged request (what the button would have sent) is refused by the library.
    con = store.connect(demo_db)
    try:
        before = table_fingerprint(con)
        with pytest.raises(PermissionDenied, match=r"ana \(role reviewer\) may not approve"):
            approve(con, "ana", "invoice", "currency", "forged", threshold=0.5)
        assert table_fingerprint(con) == before
    finally:
        con.close()


def test_a_qa_lead_draws_a_new_sample_version(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "audit", user="quinn")
    week = at.selectbox(key=state.AUDIT_WEEK).value
    before = file_rows(demo_db, "SELECT count(*) FROM audit_samples WHERE week = ?", [week])[0][0]
    at.number_input(key=state.AUDIT_MINIMUM).set_value(12).run()
    at.button(key=state.AUDIT_DRAW).click().run()
    assert not at.exception
    after = file_rows(demo_db, "SELECT count(*), max(drawn_by) FROM audit_samples WHERE week = ?",
                  [week])[0]
    assert after == (before + 1, "quinn")
    assert any("Drew sample" in s.value for s in at.success)


def test_a_reviewer_cannot_draw_a_sample(shared_demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(shared_demo_db, "audit", user="ben")
    assert state.AUDIT_DRAW not in {b.key for b in at.button}


def test_a_busy_store_gives_a_friendly_warning(
    demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    # Another process holds the file read-write (an ingest, say) for longer than we wait.
    with store_held(demo_db):
        use_db(demo_db)
        at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
        assert not at.exception
        assert any("The store is busy" in w.value for w in at.warning)


def test_serve_refuses_a_missing_store_without_demo(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.duckdb"
    result = subprocess.run(
        [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(missing), "serve"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 2
    assert "no store at" in result.stderr
    assert not missing.exists()


def test_serve_runs_streamlit_on_the_dashboard_with_the_store() -> None:
    from fieldtrust.cli.serve_cmds import app_path, streamlit_command

    command = streamlit_command("/data/store.duckdb", 8765)
    assert Path(APP).resolve() == app_path().resolve()
    assert command[1:6] == ["-m", "fieldtrust.dashboard.serve_main", "--allowed-hosts", "", "run"]
    assert command[6] == APP
    assert command[command.index("--server.port") + 1] == "8765"
    assert command[-3:] == ["--", "--db", "/data/store.duckdb"]
    # This machine only, unless asked: demo mode lets anyone act as anyone.
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    shared = streamlit_command("/data/store.duckdb", 8765, address="0.0.0.0")
    assert shared[shared.index("--server.address") + 1] == "0.0.0.0"
    # Viewer mode: no Deploy button or developer menu for reviewers, unless --dev.
    assert command[command.index("--client.toolbarMode") + 1] == "viewer"
    dev = streamlit_command("/data/store.duckdb", 8765, dev=True)
    assert dev[dev.index("--client.toolbarMode") + 1] == "developer"
    # No collection of every generation after each run: with twenty reviewers it was a
    # quarter of the server's CPU a key (bench/review_sessions.py).
    assert command[command.index("--runner.postScriptGC") + 1] == "false"


def test_with_oidc_configured_nobody_gets_in_without_signing_in(
    shared_demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    use_db(shared_demo_db)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.secrets["auth"] = {
        "redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "client_id": "fieldtrust", "client_secret": "secret",
        "server_metadata_url": "https://id.example/.well-known/openid-configuration",
    }
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.selectbox  # no demo picker, no filters: nothing before sign-in
    assert "DEMO MODE" not in _texts(at)


HOSTILE_DOC_TYPE = "**x** [a](b) :red[ALERT] `y`"


def test_a_library_error_quoting_a_hostile_value_shows_it_as_written(
    tmp_path: Path, open_page: OpenPage
) -> None:
    # A doc_type from an ingested file that is also markdown: bold, a link, a colour, code.
    path = tmp_path / "hostile.duckdb"
    con = store.connect(path)
    try:
        Builder(con).extractions([
            {"extraction_id": f"e{i}", "doc_id": "d", "doc_type": HOSTILE_DOC_TYPE,
             "value": "1", "extracted_at": dt.datetime(2026, 11, 23, 9)}
            for i in range(5)
        ])
        grant_role(con, "root", "root", "admin")
        grant_role(con, "root", "maya", "manager")
    finally:
        con.close()
    at = open_page(path, "automation", user="maya")
    at.button(key=state.AUTO_REJECT).click().run()  # no comment: the library refuses
    assert not at.exception
    (error,) = at.error
    expected = f"reject of {HOSTILE_DOC_TYPE}/total needs a comment saying why"
    # Escaped so markdown shows every character as written: no bold, link, colour or code.
    assert _shown(error.value) == expected
    assert error.value == layout.plain(expected)
    for markup in ("**x**", "[a](b)", ":red[", "`y`"):
        assert markup not in error.value
    assert file_rows(path, "SELECT count(*) FROM decisions") == [(0,)]



def _fresh_store(path: Path) -> Path:
    """A store after `init --admin ann` and one ingest: extractions, no labels."""
    import pyarrow as pa
    from fieldtrust.ingest.extractions import ingest_table
    from fieldtrust.store.access import first_admin

    con = store.connect(path)
    try:
        first_admin(con, "ann")
        ingest_table(con, pa.table({
            "doc_id": [f"d{i}" for i in range(20)], "doc_type": ["invoice"] * 20,
            "field": ["total"] * 20, "value": ["1.00"] * 20, "confidence": [0.9] * 20,
            "extracted_at": ["2026-11-24T10:00:00Z"] * 20,
        }), source="log")
    finally:
        con.close()
    return path


def test_a_fresh_store_opens_on_the_getting_started_panel(
    tmp_path: Path, use_db: Callable[[Path], None]
) -> None:
    """Extractions ingested, nothing labelled: the four first steps, not empty charts."""
    use_db(_fresh_store(tmp_path / "fresh.duckdb"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert "Getting started" in [h.value for h in at.subheader]
    shown = _texts(at)
    assert "1. Ingest your extraction log** (done)" in shown
    assert "2. Grant roles**" in shown and "2. Grant roles** (done)" not in shown
    assert [c.value for c in at.code] == [
        "fieldtrust users grant NAME qa_lead", "fieldtrust sample --week WEEK --out sample.csv",
        "fieldtrust labels import sample.csv",
    ]
    assert not at.get("plotly_chart")
    assert not at.get("vega_lite_chart")
    assert "nan" not in shown.lower()


def test_an_empty_store_shows_every_first_step(empty_db: Path, open_page: OpenPage) -> None:
    at = open_page(empty_db, "overview")
    assert next(c.value for c in at.code) == "fieldtrust ingest extractions.csv"
    assert len(at.code) == 4


def test_a_reviewer_opens_on_the_review_page(
    shared_demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    from fieldtrust.dashboard.navigation import page_order

    assert page_order(frozenset({"reviewer"}))[0] == "review"
    assert page_order(frozenset({"manager"}))[:2] == ("overview", "automation")
    assert page_order(frozenset({"qa_lead", "admin"}))[0] == "overview"
    use_db(shared_demo_db)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state[state.AUTH_DEMO_USER] = "ana"  # a reviewer opening the dashboard
    at.run()
    assert not at.exception
    assert at.title[0].value == "Review"


def test_cancelling_the_approval_dialog_writes_nothing(demo_db: Path, open_page: OpenPage) -> None:
    at = open_page(demo_db, "automation", user="maya")
    at.text_area(key=state.AUTO_COMMENT).set_value("looked fine")
    at.button(key=state.AUTO_APPROVE).click().run()
    at.button(key=state.AUTO_CANCEL).click().run()
    assert not at.exception
    assert file_rows(demo_db, "SELECT count(*) FROM decisions") == [(0,)]
    assert not [b for b in at.button if b.key == state.AUTO_CONFIRM]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_page_of_a_store_without_labels_shows_nan(
    page: str, tmp_path: Path, open_page: OpenPage
) -> None:
    at = open_page(_fresh_store(tmp_path / "fresh.duckdb"), page, user="ann")
    # Text and metrics (tables show a missing value as an empty, greyed cell).
    shown = _texts(at) + " ".join(str(m.value) for m in at.metric)
    assert re.search(r"\bnan\b", shown.lower()) is None, shown


#: The sidebar narrowed to the invoice form versions: one version alone has too few
#: labels a week to certify anything, so the page shows a candidate only on these.
NARROWED = ["v2", "v3-2026"]


def _approve_under_a_narrowed_filter(
    demo_db: Path, versions: list[str], before_confirm: Callable[[], None] = lambda: None,
) -> tuple[AppTest, str, str]:
    """Narrow the sidebar to one form version, then approve the first stratum shown
    (``before_confirm`` runs while the confirmation dialog is open)."""
    settle_disagreements(demo_db)  # an approval waits for them
    at = _open("automation", user="maya")
    at.multiselect(key=state.FILTER_FORM_VERSIONS).set_value(versions).run()
    # The first stratum the filtered page shows as a candidate (Approve enabled).
    for option in at.selectbox(key=state.AUTO_STRATUM).options:
        at.selectbox(key=state.AUTO_STRATUM).set_value(option).run()
        if not at.button(key=state.AUTO_APPROVE).disabled:
            break
    doc_type, field = at.selectbox(key=state.AUTO_STRATUM).value.split("|")
    assert "Approving certifies the whole stratum" in _texts(at)
    at.text_area(key=state.AUTO_COMMENT).set_value("looks fine for the new version")
    at.button(key=state.AUTO_APPROVE).click().run()
    before_confirm()
    at.button(key=state.AUTO_CONFIRM).click().run()  # the dialog restates, then records
    assert not at.exception
    return at, doc_type, field


def test_an_approval_under_a_narrowed_filter_freezes_the_whole_stratum(
    demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    # Filtered to the invoice versions the page shows invoice/currency certified at a
    # threshold of its own; the approval records the threshold shown
    # (at or above the certified one) on the whole stratum's evidence.
    use_db(demo_db)
    at, doc_type, field = _approve_under_a_narrowed_filter(demo_db, NARROWED)
    con = store.connect(demo_db, read_only=True)
    try:
        whole = certify(con, doc_type, field)
        (threshold, evidence_id), = con.execute(
            "SELECT threshold, evidence_id FROM decisions").fetchall()
        frozen = evidence_payload(con, evidence_id)["certification"]
    finally:
        con.close()
    assert frozen == whole.to_dict()
    assert frozen["n_population"] == whole.n_population
    assert threshold >= whole.threshold  # type: ignore[operator]
    assert any("approve of" in s.value for s in at.success)


def test_a_page_shown_before_the_policy_was_raised_cannot_approve_on_it(
    demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    # The page (filtered to v2 and v3-2026) shows a candidate and its dialog; then an
    # admin raises the store's policy to 99%. Confirming certifies the whole stratum
    # afresh at the policy, not on what the page showed: refused, nothing recorded.
    use_db(demo_db)

    def raise_the_bar() -> None:
        con = store.connect(demo_db)
        try:
            admin = next(u.user_name for u in list_users(con) if "admin" in u.roles)
            set_policy_settings(con, admin, target=0.99)
        finally:
            con.close()

    at, doc_type, field = _approve_under_a_narrowed_filter(demo_db, NARROWED,
                                                           before_confirm=raise_the_bar)
    errors = _shown(" ".join(e.value for e in at.error))
    assert f"{doc_type}/{field} is not an automation candidate (" in errors
    assert "as a whole stratum at the store's policy settings" in errors
    assert file_rows(demo_db, "SELECT count(*) FROM decisions") == [(0,)]


def test_a_seed_on_the_review_page_is_judged_like_any_item_and_kept_apart(
    demo_db: Path, open_page: OpenPage
) -> None:
    # A seed placed first in the current sample's queue (the demo's policy seeds nothing).
    con = store.connect(demo_db)
    try:
        sample_id, cell, doc_type, field = con.sql(
            "SELECT i.sample_id, i.cell, x.doc_type, x.field FROM audit_items i"
            " JOIN sampled_extractions x USING (extraction_id)"
            " WHERE i.sample_id = (SELECT sample_id FROM audit_samples"
            "   ORDER BY week DESC, version DESC LIMIT 1) LIMIT 1").fetchall()[0]
        con.execute(
            "INSERT INTO seed_items SELECT 'i-seed-page', ?, extraction_id, doc_type, field, ?,"
            " value || '7', value, 'digit_swap', NULL, 0.0, confidence, now()::TIMESTAMP"
            " FROM extractions WHERE doc_type = ? AND field = ? AND value_status = 'present'"
            " AND extraction_id NOT IN (SELECT extraction_id FROM audit_items) LIMIT 1",
            [sample_id, cell, doc_type, field])
    finally:
        con.close()
    at = open_page(demo_db, "review", user="ana")
    # First in its cell's order, the seed is ana's first item. On screen it has what every
    # item has: its document, type and form version, the seeded value, and the host's
    # stated confidence folded away.
    assert any(m.value.startswith("Document ") and "form version" in m.value
               for m in at.markdown)
    assert [(c.value,) for c in at.code] == file_rows(demo_db, "SELECT seed_value FROM seed_items")
    assert [m.label for m in at.metric] == ["stated confidence"]
    at.button(key=state.REVIEW_CORRECT).click().run()
    assert file_rows(demo_db, "SELECT extraction_id FROM assignments WHERE reviewer = 'ana'"
                     " AND extraction_id = 'i-seed-page'") == [("i-seed-page",)]
    assert not at.exception
    assert any("Recorded **correct**" in s.value for s in at.success)
    assert file_rows(demo_db, "SELECT verdict, reviewer FROM seed_verdicts") == [
        ("correct", "ana")]
    assert file_rows(demo_db, "SELECT count(*) FROM labels WHERE extraction_id = 'i-seed-page'"
                     ) == [(0,)]


def test_the_planner_shows_the_librarys_certificate_table_with_its_n(
    shared_demo_db: Path, open_page: OpenPage
) -> None:
    from fieldtrust.sampling.certify_plan import plan_certificates
    from fieldtrust.sampling.samples import latest_design
    from fieldtrust.store.bar import resolve_bar

    from fieldtrust.demo import DEMO_DESIGN

    at = open_page(shared_demo_db, "audit", user="ben", tab="Design and draw")
    week = at.selectbox(key=state.AUDIT_WEEK).value
    con = store.connect(shared_demo_db, read_only=True)
    try:
        newest = latest_design(con)
    finally:
        con.close()
    # The form starts at the design the newest sample was drawn with (the demo's, or one
    # a test drew later), not the built-in one.
    assert newest in (DEMO_DESIGN, REVIEW_DESIGN)
    assert at.number_input(key=state.AUDIT_BASE_RATE).value == newest.base_rate != 0.01
    at.selectbox(key=state.AUDIT_ALLOCATION).set_value("neyman").run()
    assert not at.exception, at.exception[0].message
    caption = next(c.value for c in at.caption if "can certify within the window" in c.value)
    assert re.search(r"\d+ strata, n = [\d,]+ extractions: extractions of " + week, caption)
    shown = next(d.value for d in at.dataframe if "certify_week" in d.value.columns)
    con = store.connect(shared_demo_db, read_only=True)
    try:
        bar = resolve_bar(con)
        design = dataclasses.replace(newest, allocation="neyman")
        library = plan_certificates(con, week, design, bar).strata
    finally:
        con.close()
    assert shown["certify_week"].fillna(-1).tolist() == [
        -1 if w is None else w for w in library.column("certify_week").to_pylist()]
    assert shown["reason"].fillna("").tolist() == [
        r or "" for r in library.column("reason").to_pylist()]
