"""Calibration (QA lead): per stratum, stated confidence against accuracy, and thresholds.

Reliability bins, ECE, thresholds and labels needed come from
:mod:`fieldtrust.calibration`; the recalibration map from the store. The page only picks
a stratum and draws.
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import charts, data, downloads, layout, sidebar, state, views
from fieldtrust.store.rollup import GRID

# The rollup's grid: bars 0.005 wide stay readable when the axis zooms to 0.93-1.
HISTOGRAM_BINS = GRID

st.title("Calibration")
bar = data.bar()
scope = sidebar.current_scope()

controls = st.columns([3, 1, 1])
strategy = controls[1].selectbox("Bins", ["quantile", "uniform"], key=state.CAL_STRATEGY,
                                 help="Equal-mass (quantile) or equal-width bins.")
n_bins = controls[2].number_input("Number of bins", 3, 30, 10, key=state.CAL_BINS)
report = data.cached(
    "calibration_report",
    *views.report_args(scope, bar, n_bins=int(n_bins), strategy=strategy),
)
names = {f"{s.doc_type} · {s.field}": s for s in report.strata}
chosen = controls[0].selectbox("Stratum (worst accuracy first)", list(names),
                               key=state.CAL_STRATUM)
stratum = names[chosen]
table = stratum.table
recal = data.cached("recalibration_info", stratum.doc_type, stratum.field)

metrics = st.columns(4)
accuracy = views.accuracy_text(table.accuracy, table.accuracy_low, table.accuracy_high,
                               table.n_labeled, table.accuracy_variance)
metrics[0].metric("Accuracy (design-weighted)", layout.pct(table.accuracy), help=accuracy)
# The metric shows the number itself; the caption keeps its interval (or note) and n.
metrics[0].caption(accuracy.split(" ", 1)[1] if table.n_labeled else accuracy)
spread = data.cached("metric_intervals", stratum.doc_type, stratum.field, scope, int(n_bins),
                     strategy)
metrics[1].metric("ECE, stated confidence", layout.fmt(table.ece),
                  help="Expected calibration error on the design-based labels in scope. On few"
                       " labels it is biased upwards, and a bootstrap of it does not cover the"
                       " true value, so no interval is shown (STATS.md section 11).")
metrics[1].caption(f"debiased squared form {layout.fmt(table.ece_debiased, 4)};"
                   f" {table.n_labeled:,} labels; no interval")
if recal is not None:
    metrics[2].metric("ECE after recalibration", layout.fmt(recal.ece_after),
                      delta=None if recal.ece_before is None or recal.ece_after is None
                      else f"{recal.ece_after - recal.ece_before:+.3f}",
                      delta_color="inverse",
                      help=f"{recal.method} map fitted on {recal.n_labels:,} labels;"
                           " held-out folds, before vs after.")
else:
    metrics[2].metric("ECE after recalibration", "–",
                      help="No map fitted: run `fieldtrust recalibrate`.")
metrics[3].metric("Brier score", layout.fmt(table.brier),
                  help="Mean squared gap between stated confidence and the verdict,"
                       " design-weighted; the range is a 95% bootstrap interval.")
metrics[3].caption(views.range_text(spread.brier_low, spread.brier_high, spread.n_labels))

left, right = st.columns(2)
with left:
    hist = data.cached("confidence_histogram", stratum.doc_type, stratum.field, scope,
                       HISTOGRAM_BINS)
    st.plotly_chart(
        charts.reliability_diagram(
            views.bins_frame(stratum.bins),
            confidences=views.histogram_frame(hist),
            recalibrated=views.map_frame(recal),
            title=f"Reliability: {chosen}",
        ),
        key="calibration.reliability",
    )
    if recal is None:
        st.caption("No recalibration map for this stratum yet: `fieldtrust recalibrate` fits one.")
with right:
    curve = views.frame_of(data.cached(
        "threshold_curve", stratum.doc_type, stratum.field, scope, bar,
    ))
    th = stratum.thresholds
    st.plotly_chart(
        charts.threshold_curve(
            curve, target=bar.target,
            point_threshold=th.point.threshold if th.point else None,
            certified_threshold=th.certified.threshold if th.certified else None,
        ),
        key="calibration.thresholds",
    )
st.markdown(views.threshold_text(stratum))
st.caption("The guarantee is for the average above the threshold: items just above it can be"
           f" worse. Across strata, {report.across_strata['text']}.")

with st.expander("Reliability bins"):
    downloads.show_table("reliability_bins", views.bins_table(stratum.bins))
with st.expander("Threshold table"):
    downloads.show_table("threshold_curve", views.curve_table(curve))
with st.expander("Every stratum"):
    downloads.show_table("calibration_strata", views.strata_table(report))
