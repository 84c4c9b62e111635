"""The Overview's doc_type x field heatmap, drawn with Vega-Lite rather than plotly.

The Overview is the page a fresh browser session opens first, and the page
is done only once its charts are drawn. Streamlit's frontend loads plotly's
bundle for a plotly chart and Vega's for a Vega-Lite one: on two cores
shared with the server, a bare page with one plotly heatmap settled 1.2 s
after the same page without it, with a Vega-Lite heatmap 0.45 s after
(docs/benchmarks.md). Every other chart stays plotly: they are on pages a
person opens once the bundles are in the browser's memory.

Vega draws text as text, never as HTML, so names from files show as written
without the escaping the plotly figures need.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from fieldtrust.dashboard.charts import BAD, GOOD, MUTED

#: The colour at the target: below it the cells turn red, above it green.
_AT_TARGET = "#ffffbf"


def _number(value: object) -> float | None:
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


def heatmap_cells(strata: pd.DataFrame) -> pd.DataFrame:
    """One row a (doc_type, field) with its accuracy, interval, n and ECE, and the cell's text.

    ``strata`` columns: doc_type, field, accuracy, accuracy_low,
    accuracy_high, n_labeled, ece. A stratum without labels keeps an empty
    accuracy and reads "no labels"; every other cell says how many labels
    its figure rests on, not only in the tooltip.
    """
    rows = []
    for row in strata.itertuples(index=False):
        accuracy = _number(row.accuracy)
        low, high, ece = (_number(row.accuracy_low), _number(row.accuracy_high),
                          _number(row.ece))
        labelled = accuracy is not None
        rows.append({
            "doc_type": str(row.doc_type),
            "field": str(row.field),
            "accuracy": accuracy,
            "text": f"{accuracy:.1%}\nn={int(row.n_labeled):,}" if labelled else "no labels",
            "interval": f"[{low:.1%}, {high:.1%}]" if labelled and low is not None
            and high is not None else "",
            "labels": int(row.n_labeled),
            "ece": round(ece, 3) if labelled and ece is not None else None,
        })
    return pd.DataFrame(rows, columns=["doc_type", "field", "accuracy", "text", "interval",
                                       "labels", "ece"])


def heatmap_spec(cells: pd.DataFrame, *, target: float) -> dict[str, Any]:
    """The Vega-Lite spec of :func:`heatmap_cells`: colour centred on ``target``, as plotly's was.

    The colour scale runs from the lowest accuracy shown (or five points
    below the target) through the target to 1; cells without labels are grey.
    """
    shown = [float(v) for v in cells["accuracy"] if v is not None and not math.isnan(v)]
    low = min([*shown, target - 0.05])
    rows = max(1, cells["doc_type"].nunique())
    position = {
        "x": {"field": "field", "type": "nominal", "sort": "ascending", "title": None,
              "axis": {"labelAngle": -30, "orient": "bottom"}},
        "y": {"field": "doc_type", "type": "nominal", "sort": "ascending", "title": None},
    }
    tooltip = [
        {"field": "doc_type", "title": "document type"},
        {"field": "field", "title": "field"},
        {"field": "accuracy", "title": "accuracy", "format": ".1%"},
        {"field": "interval", "title": "95% interval"},
        {"field": "labels", "title": "labels n", "format": ","},
        {"field": "ece", "title": "ECE"},
    ]
    return {
        "title": f"Design-weighted accuracy per stratum (target {target:.0%});"
                 " point at a cell for n, interval and ECE",
        "height": 56 * rows,
        "encoding": position,
        "layer": [
            {"mark": {"type": "rect", "color": MUTED, "stroke": "white", "strokeWidth": 2},
             "encoding": {"tooltip": tooltip}},
            {"mark": {"type": "rect", "stroke": "white", "strokeWidth": 2},
             "transform": [{"filter": "isValid(datum.accuracy)"}],
             "encoding": {
                 "color": {"field": "accuracy", "type": "quantitative", "title": "accuracy",
                           "scale": {"domain": [low, target, 1.0],
                                     "range": [BAD, _AT_TARGET, GOOD]},
                           "legend": {"format": ".0%"}},
                 "tooltip": tooltip}},
            {"mark": {"type": "text", "lineBreak": "\n", "fontSize": 12},
             "encoding": {"text": {"field": "text"}, "tooltip": tooltip}},
        ],
    }
