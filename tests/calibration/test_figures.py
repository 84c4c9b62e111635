"""How a share is written: with n and interval, or a note where the interval says nothing."""

from __future__ import annotations

import math

import pytest
from fieldtrust.calibration.figures import cell_text, interval_note, share_text
from fieldtrust.calibration.survey import effective_size, korn_graubard_interval


def test_a_usable_interval_is_written_with_its_n() -> None:
    assert share_text(0.9712, 0.9651, 0.9763, 1204) == "97.1% [96.5%, 97.6%] (n = 1,204)"
    assert cell_text(0.9712, 0.9651, 0.9763, 1204) == "97.1 [96.5-97.6] n=1,204"
    assert interval_note(0.9651, 0.9763, 1204, 1100.0) is None


def test_uneven_weights_get_a_note_instead_of_0_2_to_100_percent() -> None:
    # The figure: 0.997 [0.002, 1.000] on 39 labels. A design where one cell of
    # a single label (variance 1/4) carries almost all the weight: n_eff about 1.
    estimate, n = 0.997, 39
    variance = 0.25 * 0.98 ** 2  # that cell's share of the weight, squared, times 1/4
    n_eff = float(effective_size(estimate, variance, n))
    low, high = korn_graubard_interval(estimate, variance, n)
    assert n_eff == pytest.approx(estimate * (1 - estimate) / variance) and n_eff < 1
    assert high - low > 0.9  # what was printed before
    assert interval_note(low, high, n, n_eff) == (
        f"no usable interval: the 39 labels' design weights are so uneven that they count"
        f" as {n_eff:.1f} (effective n)")
    assert share_text(estimate, low, high, n, n_eff) == (
        f"99.7% (n = 39; no usable interval: the 39 labels' design weights are so uneven"
        f" that they count as {n_eff:.1f} (effective n))")
    assert cell_text(estimate, low, high, n, n_eff) == "99.7 [*] n=39"


def test_few_labels_get_their_own_note_and_no_labels_no_figure() -> None:
    # Three labels, all right: Clopper-Pearson [0.292, 1]; the labels are not down-weighted.
    assert interval_note(0.292, 1.0, 3, 3.0) == "no usable interval on 3 labels"
    assert interval_note(0.292, 1.0, 1, None) == "no usable interval on 1 label"
    # Exactly half of [0, 1] is still shown; a hair more is not.
    assert interval_note(0.5, 1.0, 10, 10.0) is None
    assert interval_note(0.49, 1.0, 10, 10.0) is not None
    assert share_text(math.nan, math.nan, math.nan, 0) == "no labels"
    assert cell_text(None, None, None, 0) == ""
    assert interval_note(math.nan, math.nan, 0) is None


def test_what_a_figure_covers_reads_runs_of_weeks_as_one() -> None:
    from fieldtrust.calibration.population import Coverage

    eight = tuple(f"2026-W{w}" for w in range(41, 49))
    assert Coverage((*eight, "2026-W50"), (), 32_000, 30_000).text() == (
        "covers W41..W48, W50: 30,000 of 32,000 extractions")
    # Across a new year (2026 has a week 53) the weeks keep their year.
    assert Coverage(("2026-W52", "2026-W53", "2027-W01"), (), 9, 9).text() == (
        "covers 2026-W52..2027-W01: 9 of 9 extractions")
    assert Coverage((), ("2026-W48",), 500, 0).text() == (
        "covers no week: 0 of 500 extractions have an audit")
