"""Every plotly figure the dashboard draws, built from the library's results (the Overview
heatmap is Vega-Lite, in dashboard/heatmap.py).

Figures only draw: each function takes a small frame of numbers the library
computed (bins, curves, estimates) and returns a ``go.Figure``. No statistic
is computed here. Intervals are always drawn, because a point without its
uncertainty is what fieldtrust exists to stop people trusting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

GOOD = "#1a9850"
BAD = "#d73027"
NEUTRAL = "#4575b4"
MUTED = "#9e9e9e"
RECAL = "#f28e2b"

_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def as_text(value: object) -> str:
    """``value`` escaped for plotly, which renders a few HTML tags in titles, ticks and names.

    A doc_type like ``<a href="...">`` must read as those characters, not
    become a link in a chart (plotly decodes the entities back for display).
    """
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _finite(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def reliability_diagram(
    bins: pd.DataFrame,
    *,
    confidences: pd.DataFrame | None = None,
    recalibrated: pd.DataFrame | None = None,
    title: str = "Reliability",
    min_bin: int = 30,
) -> go.Figure:
    """Stated confidence against accuracy per bin, with intervals, diagonal and histogram.

    ``bins`` columns: confidence (weighted mean stated confidence), accuracy,
    low, high (interval of accuracy), n. Bins with fewer than ``min_bin`` labels
    are drawn grey, not hidden (STATS.md section 4). ``confidences``: columns
    bin_start, bin_end, count — the population's stated confidences, drawn as a
    histogram underneath. ``recalibrated``: columns x, y of the stratum's
    recalibration map, drawn as the recalibrated curve.
    """
    figure = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.75, 0.25], vertical_spacing=0.04,
    )
    figure.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                   line={"dash": "dot", "color": MUTED}),
        row=1, col=1,
    )
    if len(bins):
        small = bins["n"] < min_bin
        for is_small, colour, name in ((False, NEUTRAL, "stated (bins)"),
                                       (True, MUTED, f"bins under {min_bin} labels")):
            part = bins[small == is_small]
            if part.empty:
                continue
            figure.add_trace(
                go.Scatter(
                    x=part["confidence"], y=part["accuracy"], mode="lines+markers", name=name,
                    marker={"color": colour, "size": 9}, line={"color": colour},
                    error_y={"type": "data", "symmetric": False,
                             "array": part["high"] - part["accuracy"],
                             "arrayminus": part["accuracy"] - part["low"], "color": colour},
                    customdata=part[["n", "low", "high"]].to_numpy(),
                    hovertemplate=("confidence %{x:.3f}<br>accuracy %{y:.1%}"
                                   " [%{customdata[1]:.1%}, %{customdata[2]:.1%}]"
                                   "<br>n = %{customdata[0]:,}<extra></extra>"),
                ),
                row=1, col=1,
            )
    if recalibrated is not None and len(recalibrated):
        figure.add_trace(
            go.Scatter(x=recalibrated["x"], y=recalibrated["y"], mode="lines",
                       name="recalibrated map", line={"color": RECAL, "width": 2}),
            row=1, col=1,
        )
    if confidences is not None and len(confidences):
        figure.add_trace(
            go.Bar(
                x=(confidences["bin_start"] + confidences["bin_end"]) / 2,
                y=confidences["count"], width=confidences["bin_end"] - confidences["bin_start"],
                name="stated confidences", marker={"color": MUTED}, showlegend=False,
                hovertemplate="%{x:.3f}: %{y:,} extractions<extra></extra>",
            ),
            row=2, col=1,
        )
    low = confidence_axis_start(bins, confidences)
    zoomed = f" (zoomed: from {low:.2f})" if low > 0 else ""
    figure.update_xaxes(range=[low, 1.0 + (1.0 - low) / 100], row=1, col=1)
    figure.update_xaxes(range=[low, 1.0 + (1.0 - low) / 100],
                        title=f"stated confidence{zoomed}", row=2, col=1)
    figure.update_yaxes(title="accuracy", tickformat=".0%", row=1, col=1)
    figure.update_yaxes(title="count", row=2, col=1)
    figure.update_layout(title=as_text(title), margin=_MARGIN, height=520,
                         legend={"orientation": "h", "y": -0.18})
    return figure


#: Share of a stratum's extractions the confidence axis may leave off on the left, so
#: a handful of hard documents at 0.3 does not squeeze the rest against the right edge.
AXIS_TAIL = 0.005


def confidence_axis_start(bins: pd.DataFrame, confidences: pd.DataFrame | None = None) -> float:
    """Where a reliability diagram's stated-confidence axis starts (it always ends at 1).

    Models such as LLMs state 0.95, 0.98, 0.99: on a [0, 1] axis every bin sits
    in the right tenth. The axis starts a little below the lowest bin with labels
    and the confidence below which only :data:`AXIS_TAIL` of the extractions lie,
    on a round number; 0 when that is under 0.5 (a zoom would gain little).
    """
    lows = [float(bins["confidence"].min())] if len(bins) else []
    if confidences is not None and len(confidences) and confidences["count"].sum() > 0:
        cumulative = confidences["count"].cumsum() / confidences["count"].sum()
        lows.append(float(confidences.loc[cumulative > AXIS_TAIL, "bin_start"].min()))
    if not lows:
        return 0.0
    lowest = min(lows)
    start = lowest - max(0.1 * (1.0 - lowest), 0.01)
    start = math.floor(start * 100) / 100
    return 0.0 if start < 0.5 else start


def threshold_curve(
    curve: pd.DataFrame,
    *,
    target: float,
    point_threshold: float | None,
    certified_threshold: float | None,
    title: str = "Accuracy above each threshold",
) -> go.Figure:
    """Accuracy, its lower bound and coverage against the confidence threshold.

    ``curve`` columns: threshold, accuracy (weighted accuracy of labels at or
    above it), accuracy_low (one-sided lower bound), coverage (share of the
    population at or above it). The target line and the point and certified
    thresholds are marked.
    """
    figure = go.Figure()
    if len(curve):
        figure.add_trace(go.Scatter(x=curve["threshold"], y=curve["accuracy"], mode="lines",
                                    name="accuracy above", line={"color": NEUTRAL}))
        figure.add_trace(go.Scatter(x=curve["threshold"], y=curve["accuracy_low"], mode="lines",
                                    name="lower bound", line={"color": NEUTRAL, "dash": "dash"}))
        figure.add_trace(go.Scatter(x=curve["threshold"], y=curve["coverage"], mode="lines",
                                    name="coverage", line={"color": MUTED}))
    figure.add_hline(y=target, line={"color": BAD, "dash": "dot"},
                     annotation_text=f"target {target:.0%}", annotation_position="bottom left")
    if _finite(point_threshold):
        figure.add_vline(x=point_threshold, line={"color": RECAL, "dash": "dash"},
                         annotation_text=f"point {point_threshold:.3f} (no guarantee)",
                         annotation_position="top left")
    if _finite(certified_threshold):
        figure.add_vline(x=certified_threshold, line={"color": GOOD, "width": 3},
                         annotation_text=f"certified {certified_threshold:.3f}",
                         annotation_position="top right")
    figure.update_layout(
        title=as_text(title), margin=_MARGIN, height=420, xaxis={"title": "confidence threshold"},
        yaxis={"title": "share", "tickformat": ".0%", "range": [0, 1.02]},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def weekly_trend(
    trend: pd.DataFrame, *, target: float, title: str = "Weekly accuracy"
) -> go.Figure:
    """Accuracy per ISO week with 95% intervals, one line per series.

    ``trend`` columns: week, series (e.g. "invoice · total"), accuracy, low,
    high, n.
    """
    figure = go.Figure()
    for series, part in trend.groupby("series", sort=True):
        part = part.sort_values("week")
        figure.add_trace(
            go.Scatter(
                x=part["week"], y=part["accuracy"], mode="lines+markers", name=as_text(series),
                error_y={"type": "data", "symmetric": False,
                         "array": part["high"] - part["accuracy"],
                         "arrayminus": part["accuracy"] - part["low"]},
                customdata=part[["n", "low", "high"]].to_numpy(),
                hovertemplate=("%{x}: %{y:.1%} [%{customdata[1]:.1%}, %{customdata[2]:.1%}]"
                               "<br>n = %{customdata[0]:,}<extra>%{fullData.name}</extra>"),
            )
        )
    figure.add_hline(y=target, line={"color": BAD, "dash": "dot"},
                     annotation_text=f"target {target:.0%}", annotation_position="bottom left")
    figure.update_layout(title=as_text(title), margin=_MARGIN, height=420,
                         xaxis={"title": "ISO week (UTC)", "type": "category"},
                         yaxis={"title": "accuracy", "tickformat": ".0%"},
                         legend={"orientation": "h", "y": -0.25})
    return figure


def error_breakdown(
    errors: pd.DataFrame, *, by: Sequence[str] = ("doc_type", "field")
) -> go.Figure:
    """Stacked bars of error types per group (counts), so systematic patterns stand out.

    ``errors`` columns: the ``by`` columns, error_type, count.
    """
    frame = errors.copy()
    frame["group"] = frame[list(by)].astype(str).agg(" · ".join, axis=1).map(as_text)
    order = frame.groupby("group")["count"].sum().sort_values(ascending=True).index.tolist()
    figure = go.Figure()
    for error_type, part in frame.groupby("error_type", sort=True):
        figure.add_trace(go.Bar(
            y=part["group"], x=part["count"], name=as_text(error_type), orientation="h",
            hovertemplate="%{y}: %{x:,} " + as_text(error_type) + "<extra></extra>",
        ))
    figure.update_layout(barmode="stack", title="Error types (incorrect labels)",
                         margin={"l": 10, "r": 10, "t": 90, "b": 10},
                         height=200 + 24 * len(order),
                         yaxis={"categoryorder": "array", "categoryarray": order, "title": None},
                         xaxis={"title": "incorrect labels", "side": "top"},
                         legend={"orientation": "h", "y": 1.0, "yanchor": "bottom",
                                 "x": 0, "title": None})
    return figure


def labelling_progress(cells: pd.DataFrame) -> go.Figure:
    """Labelled against drawn items per cell group (horizontal bars).

    ``cells`` columns: group, n_sample, n_labelled.
    """
    frame = cells.sort_values("group", ascending=False)
    frame = frame.assign(group=frame["group"].map(as_text))
    figure = go.Figure()
    figure.add_trace(go.Bar(y=frame["group"], x=frame["n_labelled"], orientation="h",
                            name="labelled", marker={"color": GOOD}))
    figure.add_trace(go.Bar(y=frame["group"], x=frame["n_sample"] - frame["n_labelled"],
                            orientation="h", name="to do", marker={"color": "#e0e0e0"}))
    figure.update_layout(barmode="stack", title="Labelling progress", margin=_MARGIN,
                         height=160 + 24 * len(frame), xaxis={"title": "items"},
                         legend={"orientation": "h", "y": -0.15})
    return figure
