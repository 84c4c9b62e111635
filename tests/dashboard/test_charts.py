"""The figures people read: axes that show where the data lie."""

from __future__ import annotations

import pandas as pd
import pytest
from fieldtrust.dashboard import charts


def _bins(confidences: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"confidence": confidences, "accuracy": [0.9] * len(confidences),
                         "low": [0.85] * len(confidences), "high": [0.95] * len(confidences),
                         "n": [120] * len(confidences)})


def _histogram(counts: dict[int, int], bins: int = 200) -> pd.DataFrame:
    """Equal-width bins on [0, 1] as calibration.histogram returns them, ``counts`` by bin."""
    return pd.DataFrame({"bin_start": [k / bins for k in range(bins)],
                         "bin_end": [(k + 1) / bins for k in range(bins)],
                         "count": [counts.get(k, 0) for k in range(bins)]})


def test_llm_style_confidences_fill_the_reliability_diagram() -> None:
    # A model that states 0.95, 0.98 and 0.99 only: on [0, 1] the bins sat in the right tenth.
    bins = _bins([0.95, 0.98, 0.99])
    hist = _histogram({190: 4000, 196: 3000, 198: 5000})
    figure = charts.reliability_diagram(bins, confidences=hist)
    low, high = figure.layout.xaxis.range
    assert (low, high) == (pytest.approx(0.94), pytest.approx(1.0006))
    # The bins now span most of the width (0.95 to 0.99 of 0.94 to 1.0006).
    assert (0.99 - 0.95) / (high - low) > 0.6
    assert figure.layout.xaxis2.range == figure.layout.xaxis.range  # histogram underneath
    assert figure.layout.xaxis2.title.text == "stated confidence (zoomed: from 0.94)"


def test_a_few_hard_documents_do_not_squeeze_the_axis_but_a_labelled_bin_does() -> None:
    # 20 of 12,020 extractions at 0.3 (0.17%, under the 0.5% tail): left off the axis.
    hist = _histogram({60: 20, 190: 4000, 196: 3000, 198: 5000})
    assert charts.confidence_axis_start(_bins([0.95, 0.98, 0.99]), hist) == pytest.approx(0.94)
    # A reliability bin at 0.62 has labels people must see: the axis reaches it.
    assert charts.confidence_axis_start(_bins([0.62, 0.95, 0.99]), hist) == pytest.approx(0.58)


@pytest.mark.parametrize("confidences", [[0.15, 0.5, 0.9], [0.3, 0.99]])
def test_confidences_spread_over_the_range_keep_the_whole_axis(confidences: list[float]) -> None:
    figure = charts.reliability_diagram(_bins(confidences))
    assert tuple(figure.layout.xaxis.range) == (0.0, pytest.approx(1.01))
    assert figure.layout.xaxis2.title.text == "stated confidence"


def test_no_bins_and_no_histogram_draw_the_whole_axis() -> None:
    assert charts.confidence_axis_start(_bins([])) == 0.0
