"""The monitoring tables of docs/statistics.md, computed by the Brook-Evans chain.

Run with ``-s`` to print them: mean weeks to an alarm by true accuracy, and
the labels a week a segment needs for a drop to be caught in time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration import run_length as rl

TARGET = 0.95
ACCURACIES = (0.975, 0.97, 0.965, 0.96, 0.955, 0.95, 0.94, 0.93)


@pytest.mark.parametrize("labels", [60, 120, 200])
def test_mean_weeks_to_an_alarm_by_true_accuracy(labels: int) -> None:
    h = rl.alarm_threshold(200, in_control=0.97, target=TARGET, labels_per_week=labels)
    runs = np.array([rl.average_run_length(h, in_control=0.97, target=TARGET,
                                           labels_per_week=labels, accuracy=a)
                     for a in ACCURACIES])
    print(f"| {labels} | {h:.2f} | {math.exp(h):.0f} | "
          + " | ".join(f"{r:.1f}" for r in runs) + " |")
    assert np.all(np.diff(runs) < 0)  # worse weeks, sooner alarms
    assert 200 <= runs[1] < 220  # ARL0 at the approval's level, the lattice's next step up
    assert math.exp(h) < 200  # the guarantee at any weekly sizes is weaker
    assert runs[ACCURACIES.index(TARGET)] < 10  # a segment at the target loses its approval


@pytest.mark.slow
@pytest.mark.parametrize("in_control", [0.96, 0.97, 0.98])
def test_labels_a_week_that_catch_a_drop_within_four_weeks(in_control: float) -> None:
    needed = {
        (drop, arl0): rl.weekly_labels_needed(in_control=in_control, target=TARGET,
                                              drop_to=in_control - drop, within_weeks=4,
                                              power=0.9, arl0=arl0)
        for drop in (0.02, 0.03, 0.04) for arl0 in (200, 400)
    }
    print(f"| {in_control} | " + " | ".join(
        f"{needed[d, 200]} ({needed[d, 400]})" for d in (0.02, 0.03, 0.04)) + " |")
    counts = {key: value for key, value in needed.items() if value is not None}
    assert len(counts) == len(needed)
    for arl0 in (200, 400):
        assert counts[0.02, arl0] > counts[0.03, arl0] > counts[0.04, arl0]
    for drop in (0.02, 0.03, 0.04):
        assert counts[drop, 400] > counts[drop, 200]
