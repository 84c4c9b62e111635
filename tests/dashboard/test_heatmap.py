"""The Overview's heatmap: one cell a stratum with its n, colour centred on the target."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import pytest
from fieldtrust.dashboard import heatmap

STRATA = pd.DataFrame({
    "doc_type": ["invoice", "invoice", "receipt"],
    "field": ["total", "tax", "total"],
    "accuracy": [0.991, 0.9, math.nan],
    "accuracy_low": [0.98, 0.85, math.nan],
    "accuracy_high": [0.996, 0.94, math.nan],
    "n_labeled": [1234, 80, 0],
    "ece": [0.01234, 0.05, math.nan],
})


def test_every_cell_says_its_accuracy_and_n_and_a_stratum_without_labels_says_so() -> None:
    cells = heatmap.heatmap_cells(STRATA)
    assert list(cells["text"]) == ["99.1%\nn=1,234", "90.0%\nn=80", "no labels"]
    assert list(cells["interval"]) == ["[98.0%, 99.6%]", "[85.0%, 94.0%]", ""]
    assert list(cells["labels"]) == [1234, 80, 0]
    assert cells["ece"].iloc[0] == 0.012 and math.isnan(cells["ece"].iloc[2])
    assert math.isnan(cells["accuracy"].iloc[2])  # drawn grey, never coloured as a figure


def test_the_colour_runs_from_the_lowest_accuracy_through_the_target_to_one() -> None:
    cells = heatmap.heatmap_cells(STRATA)
    spec = heatmap.heatmap_spec(cells, target=0.95)
    coloured = next(layer for layer in spec["layer"] if "color" in layer["encoding"])
    scale = coloured["encoding"]["color"]["scale"]
    assert scale["domain"] == pytest.approx([0.9, 0.95, 1.0])
    assert scale["range"][0] == heatmap.BAD and scale["range"][-1] == heatmap.GOOD
    # All above the target: the scale still starts five points below it.
    high = heatmap.heatmap_cells(STRATA.assign(accuracy=[0.99, 0.98, math.nan]))
    assert next(layer for layer in heatmap.heatmap_spec(high, target=0.95)["layer"]
                if "color" in layer["encoding"])["encoding"]["color"]["scale"]["domain"][0] \
        == pytest.approx(0.9)
    assert spec["height"] == 56 * 2  # two document types


def test_the_spec_is_valid_vega_lite() -> None:
    # Altair validates a chart against the Vega-Lite schema it ships, independently of ours.
    cells = heatmap.heatmap_cells(STRATA)
    chart = alt.Chart.from_dict({**heatmap.heatmap_spec(cells, target=0.95),
                                 "data": {"values": cells.to_dict(orient="records")}})
    assert chart.to_dict()["layer"][1]["mark"]["type"] == "rect"
