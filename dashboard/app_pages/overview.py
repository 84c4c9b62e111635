"""Overview (QA lead): where the model can and cannot be trusted, at a glance.

The overall accuracy is never shown alone (STATS.md section 1): beside it stand
the strata below target, and the heatmap shows every (doc_type, field).
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import data, downloads, heatmap, layout, sidebar, views

st.title("Overview")
report = data.cached("calibration_report", *views.report_args(sidebar.current_scope(), data.bar()))
strata = views.strata_frame(report)

if report.overall.n_labeled == 0:
    st.info("No labels in these weeks yet: draw an audit sample (Weekly audit) and label it"
            " (Review) to see accuracy.")
    version = data.current_version()
    if version is not None and version.labels == 0:
        layout.getting_started(version)  # a fresh store: the first steps, not empty charts
    st.stop()

left, right = st.columns([1, 1])
with left:
    st.markdown(f"### {views.headline(report)}")
    st.caption(layout.plain(report.overall.summary) + ". Intervals are 95% (Korn-Graubard,"
               " approximate); accuracy is design-weighted.")
    st.caption(views.labels_caption(report, data.current_version().labels))
with right:
    st.markdown(f"**Strata below {report.target:.0%}**, worst first")
    below = views.below_target_frame(report)
    if below.empty:
        st.success("Every labelled stratum meets the target.")
    else:
        downloads.show_table("strata_below_target", below)

cells = heatmap.heatmap_cells(strata)
st.vega_lite_chart(cells, heatmap.heatmap_spec(cells, target=report.target), width="stretch",
                   key="overview.heatmap")

st.subheader("Every stratum")
downloads.show_table("strata", views.strata_table(report))
