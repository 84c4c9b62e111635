"""Weekly audit (QA lead): preview and draw the week's sample, follow it, read the trend.

Sizes come from :mod:`fieldtrust.sampling` (design, planner, draw), estimates and alerts
from :mod:`fieldtrust.sampling.estimates` / :mod:`fieldtrust.sampling.alerts`, disagreements and
error types from :mod:`fieldtrust.labels`. Drawing and adjudicating are checked by the
library's permission table.
"""

from __future__ import annotations

import dataclasses

import duckdb
import streamlit as st
from fieldtrust.dashboard import (
    auth,
    charts,
    data,
    downloads,
    layout,
    sidebar,
    state,
    viewer,
    views,
)
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.verdict_rule import VERDICT_CHOICES, verdict_label
from fieldtrust.sampling.design import ALLOCATIONS, Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.samples import SampleResult
from fieldtrust.store.access import allowed, require
from fieldtrust.store.bar import Bar

from fieldtrust.errors import FieldtrustError


def _design_from_widgets(base: Design) -> Design:
    """``base`` with the form's settings: what the form shows, and the rest of ``base``."""
    budget = int(st.session_state.get(state.AUDIT_BUDGET) or 0)
    return dataclasses.replace(
        base,
        base_rate=float(st.session_state.get(state.AUDIT_BASE_RATE, base.base_rate)),
        minimum=int(st.session_state.get(state.AUDIT_MINIMUM, base.minimum)),
        boost=float(st.session_state.get(state.AUDIT_BOOST, base.boost)),
        budget=budget or None,
        allocation=st.session_state.get(state.AUDIT_ALLOCATION, base.allocation_rule),
    )


def _draw(con: duckdb.DuckDBPyConnection, user: str, week: str, design: Design,
          seed: int) -> SampleResult:
    """Check the role, then draw as the signed-in user (one short read-write connection).

    The library checks the role again inside the draw's transaction; the check
    here keeps the page's refusal ahead of any write.
    """
    # Its own cursor: a check's unfinished result must not block the draw's queries.
    check = con.cursor()
    try:
        require(check, user, "draw_sample")
    finally:
        check.close()
    with data.configured_source() as lake:
        return draw_sample(con, week, design, seed=seed, actor=user, source=lake)


def _on_draw(identity: auth.Identity, week: str, base: Design, seed: int) -> None:
    try:
        result = data.write(_draw, identity.user, week, _design_from_widgets(base), seed)
    except FieldtrustError as exc:
        st.session_state[state.AUDIT_DRAW_FLASH] = ("error", layout.plain(exc))
        return
    verb = "Drew" if result.created else "Found the existing"
    st.session_state[state.AUDIT_DRAW_FLASH] = (
        "success", f"{verb} sample {result.sample_id}: {result.n_sample:,} items"
        f" from {result.n_population:,} extractions.",
    )


def _design_section(identity: auth.Identity | None, week: str, bar: Bar) -> None:
    # The form starts at the design the last sample used, so drawing a week again
    # finds its sample instead of making a new version with the built-in design.
    defaults = data.cached("latest_design") or Design()
    cols = st.columns(5)
    cols[0].number_input("Base rate", 0.0005, 1.0, defaults.base_rate, 0.005, format="%.4f",
                         key=state.AUDIT_BASE_RATE, help="Share of each cell drawn.")
    cols[1].number_input("Minimum per cell", 2, 1000, defaults.minimum, key=state.AUDIT_MINIMUM)
    cols[2].number_input("Boost of new form versions", 1.0, 50.0, defaults.boost, 0.5,
                         key=state.AUDIT_BOOST)
    cols[3].number_input("Weekly label budget (0: none)", 0, 100_000, defaults.budget or 0, 50,
                         key=state.AUDIT_BUDGET,
                         help="Labels a week in all, spread by the allocation, keeping the"
                         " minimums.")
    cols[4].selectbox("Allocation", ALLOCATIONS, ALLOCATIONS.index(defaults.allocation_rule),
                      key=state.AUDIT_ALLOCATION,
                      help="Neyman: more labels where past labels found errors, the same"
                      " total; every band keeps its minimum.")
    design = _design_from_widgets(defaults)
    preview = data.cached("preview_design", week, design.canonical_json())
    st.markdown(views.plan_summary(preview, design))
    with st.expander("Cells of the preview", expanded=False):
        downloads.show_table("design_preview", preview.cells)
    certify = data.cached("certificate_plan", week, design.canonical_json(), bar)
    st.markdown("**What this design can certify, and when**")
    st.caption(views.certify_caption(certify))
    downloads.show_table("certificate_plan", certify.strata)
    layout.flash(state.AUDIT_DRAW_FLASH)
    current = data.cached("week_sample", week)
    if current is not None:
        st.caption(f"Current sample of {week}: `{current}`. Drawing again with the same design"
                   " returns it; another design makes a new version (labels are kept).")
    if identity is not None and allowed(identity.roles, "draw_sample"):
        seed = data.settings().seed
        label = f"Draw the sample of {week}" if current is None else f"Draw {week} with this design"
        st.button(label, key=state.AUDIT_DRAW, type="primary",
                  on_click=_on_draw, args=(identity, week, defaults, seed))
    else:
        st.caption("Drawing a sample needs the qa_lead role.")


def _progress_section(week: str) -> None:
    sample_id = data.cached("week_sample", week)
    if sample_id is None:
        st.info(f"No sample drawn for {week} yet.")
        return
    cells = views.frame_of(data.cached("cell_progress", sample_id))
    progress = data.cached("sample_progress", sample_id)
    share = progress.labelled / progress.items if progress.items else 0.0
    st.progress(share, text=f"{sample_id}: {progress.labelled:,} of {progress.items:,} labelled;"
                            f" second reviews {progress.second_labelled:,} of"
                            f" {progress.double_review:,}; {progress.skips:,} skips")
    grouped = views.progress_by_stratum(cells)
    st.plotly_chart(charts.labelling_progress(grouped), key="audit.progress_chart")
    with st.expander("Progress per cell"):
        st.caption("n_usable: each cell's labelled prefix in PRN order, the labels estimates"
                   " use now; labels past an unlabelled item wait until it is labelled.")
        downloads.show_table("cell_progress", cells)


def _trend_section(scope: object, bar: Bar) -> None:
    trend = views.frame_of(data.cached("weekly_estimates", scope, bar.confidence))
    if trend.empty:
        st.info("No audit labels in these weeks yet.")
        return
    series = views.trend_series(trend)
    options = sorted(series["series"].unique())
    default = views.worst_series(series, count=4)
    chosen = st.multiselect("Strata", options, default=default, key=state.AUDIT_TREND_STRATUM)
    shown = series[series["series"].isin(chosen)] if chosen else series
    st.plotly_chart(charts.weekly_trend(shown, target=bar.target),
                    key="audit.trend_chart")
    with st.expander("Weekly estimates"):
        downloads.show_table("weekly_estimates", views.estimates_table(trend))


def _alerts_section(week: str, bar: Bar) -> None:
    alerts = data.cached("weekly_alerts", week, bar.target, bar.confidence)
    level = 1 - bar.confidence
    st.caption(
        f"Alerts hold the false discovery rate at {level:.0%} across every stratum and kind of"
        f" the week (Benjamini-Hochberg): when nothing changed, a false alert shows in at most"
        f" {level:.0%} of weeks; of the alerts shown, at most {level:.0%} are false on average."
    )
    if not alerts:
        st.success(f"No alerts for {week}.")
        return
    st.warning("\n".join(f"- {layout.plain(alert.message)}" for alert in alerts),
               icon=":material/notifications:")
    with st.expander(f"{len(alerts)} alerts as a table"):
        downloads.show_table("alerts", views.alerts_frame(alerts))


def _on_adjudicate(identity: auth.Identity, extraction_id: str) -> None:
    verdict = st.session_state.get(state.AUDIT_ADJ_VERDICT)
    if verdict is None:  # nothing is picked for the QA lead: a settled verdict is a choice
        st.session_state[state.AUDIT_ADJ_FLASH] = ("error", "Pick the verdict first.")
        return
    fields = layout.verdict_fields(verdict, state.AUDIT_ADJ_FORM)
    try:
        data.write(adjudicate, identity.user, extraction_id, verdict, **fields)
    except FieldtrustError as exc:
        st.session_state[state.AUDIT_ADJ_FLASH] = ("error", layout.plain(exc))
        return
    st.session_state[state.AUDIT_ADJ_FLASH] = (
        "success", f"Adjudicated {layout.plain(extraction_id)}: {verdict_label(verdict).lower()}.")


def _adjudication_section(identity: auth.Identity | None, scope: object) -> None:
    queue = data.cached("adjudication_queue", scope)
    layout.flash(state.AUDIT_ADJ_FLASH)
    if not queue:
        st.success("No disagreements waiting for adjudication.")
        return
    frame = views.adjudication_frame(queue)
    downloads.show_table("adjudication_queue", frame)
    if identity is None or not allowed(identity.roles, "adjudicate"):
        st.caption("Adjudicating needs the qa_lead role.")
        return
    ids = [p.extraction_id for p in queue]
    cols = st.columns([3, 2])
    item = cols[0].selectbox("Item", ids, key=state.AUDIT_ADJ_ITEM)
    labels = {c.value: c.label for c in VERDICT_CHOICES}
    cols[1].selectbox("Verdict", [c.value for c in VERDICT_CHOICES], index=None,
                      placeholder="Pick the verdict", key=state.AUDIT_ADJ_VERDICT,
                      format_func=lambda value: labels.get(value, str(value)),
                      help="\n\n".join(f"**{c.label}**: {c.help}" for c in VERDICT_CHOICES))
    with st.expander("If incorrect: what the document holds and why (optional)"):
        layout.verdict_details(state.AUDIT_ADJ_FORM)
    st.button("Settle", key=state.AUDIT_ADJ_SUBMIT, on_click=_on_adjudicate,
              args=(identity, item), type="primary")
    if item is not None:
        viewer.show_document(item, zoom_key=state.VIEWER_ADJ_ZOOM)


def _errors_section(scope: object) -> None:
    report = views.frame_of(data.cached("error_report", scope))
    if report.empty:
        st.info("No incorrect labels in these weeks.")
        return
    counts = report.rename(columns={"n_errors": "count"})
    st.plotly_chart(charts.error_breakdown(counts, by=("doc_type", "field", "form_version")),
                    key="audit.errors_chart")
    downloads.show_table("error_report", report)


def _reviewers_section() -> None:
    rows = data.cached("reviewer_rates")
    if not rows:
        st.info("No seeds judged and no double reviews settled yet: the policy's seed_rate"
                " puts seeds into each sample (docs/review.md).")
        return
    st.caption("Every sample and week. Miss: a seed (a known wrong value mixed into the"
               " sample) judged correct. False flag: a double-reviewed item settled correct"
               " (adjudicated so, or both reviewers agreed) marked incorrect. n is each"
               " rate's count; the intervals are 95% Wilson intervals.")
    downloads.show_table("reviewer_rates", views.reviewer_rates_frame(rows))


def _trend_and_alerts_section(week: str, scope: object, bar: Bar) -> None:
    st.subheader(f"Alerts for {week}")
    _alerts_section(week, bar)
    st.subheader("Weekly trend")
    _trend_section(scope, bar)


st.title("Weekly audit")
bar = data.bar()
scope = sidebar.current_scope()
identity = auth.current_identity()
weeks = data.cached("filter_options").weeks
week = st.selectbox("Audit week", list(reversed(weeks)), key=state.AUDIT_WEEK)

# Lazy tabs: only the open tab runs its queries (the trend and alerts are the costly ones).
layout.lazy_tabs(
    {
        "Design and draw": lambda: _design_section(identity, week, bar),
        "Labelling progress": lambda: _progress_section(week),
        "Trend and alerts": lambda: _trend_and_alerts_section(week, scope, bar),
        "Adjudication": lambda: _adjudication_section(identity, scope),
        "Error types": lambda: _errors_section(scope),
        "Reviewers": _reviewers_section,
    },
    key=state.AUDIT_TAB,
)
