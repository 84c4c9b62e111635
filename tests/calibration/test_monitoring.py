"""The monitoring chart of one segment: its evidence, its statistic, its alarm."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fieldtrust.calibration import run_length as rl
from fieldtrust.calibration.monitoring import (
    WeekEvidence,
    cusum_path,
    detector_state,
    first_alarm,
    segment_arl0,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldtrust.errors import InputError


def test_equal_weights_give_the_plain_counts() -> None:
    evidence = WeekEvidence.from_labels("2026-W10", [1] * 57 + [0] * 3, [40.0] * 60)
    assert (evidence.labels, evidence.errors, evidence.n_labels) == pytest.approx((60, 3, 60))
    assert evidence.error_rate == pytest.approx(0.05)


def test_unequal_weights_give_the_thinned_size_and_the_hajek_error() -> None:
    # 80 labels of weight 100 (2 wrong), 40 of weight 50 (3 wrong), by hand:
    # thinned size sum(w) / max(w) = 10000 / 100 = 100 (Kish's would be 111.1);
    # Hajek error (2 * 100 + 3 * 50) / 10000 = 0.035.
    correct = [1] * 78 + [0] * 2 + [1] * 37 + [0] * 3
    weight = [100.0] * 80 + [50.0] * 40
    evidence = WeekEvidence.from_labels("2026-W10", correct, weight)
    assert evidence.labels == pytest.approx(100)
    assert evidence.error_rate == pytest.approx(0.035)
    assert evidence.n_labels == 120


def test_cells_and_labels_give_the_same_evidence() -> None:
    # Two cells: 8,000 extractions with 80 labels, 2,000 with 40; the segment
    # above the threshold holds 70 and 25 of them, 67 and 22 correct.
    by_cells = WeekEvidence.from_cells("2026-W10", n_population=[8000, 2000],
                                       n_labelled=[80, 40], n_domain=[70, 25],
                                       n_correct=[67, 22])
    correct = [1] * 67 + [0] * 3 + [1] * 22 + [0] * 3
    weight = [100.0] * 70 + [50.0] * 25
    by_labels = WeekEvidence.from_labels("2026-W10", correct, weight)
    assert (by_cells.labels, by_cells.errors, by_cells.n_labels) == pytest.approx(
        (by_labels.labels, by_labels.errors, by_labels.n_labels))


def test_an_estimate_and_its_effective_size_are_evidence_too() -> None:
    evidence = WeekEvidence.from_estimate("2026-W10", error_rate=0.04, effective_labels=90.5,
                                          n_labels=120)
    assert (evidence.labels, evidence.errors) == pytest.approx((90.5, 3.62))


def test_a_week_without_labels_is_no_evidence() -> None:
    assert WeekEvidence.from_labels("2026-W10", [], []).labels == 0
    assert WeekEvidence.from_cells("2026-W10", n_population=[500], n_labelled=[20],
                                   n_domain=[0], n_correct=[0]).labels == 0
    assert math.isnan(WeekEvidence("2026-W10", 0, 0, 0).error_rate)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: WeekEvidence("W1", 10, 11, 10), "need 0 <= errors <= labels"),
        (lambda: WeekEvidence("W1", 10, 1, 5), "5 labels cannot have an effective size of 10"),
        (lambda: WeekEvidence.from_labels("W1", [1, 2], [1, 1]), "verdicts must be 0 or 1"),
        (lambda: WeekEvidence.from_labels("W1", [1, 0], [1, 0]), "weights must be finite"),
        (lambda: WeekEvidence.from_cells("W1", n_population=[10], n_labelled=[5],
                                         n_domain=[6], n_correct=[1]), "n_domain <= n_labelled"),
        (lambda: WeekEvidence.from_estimate("W1", error_rate=1.2, effective_labels=10,
                                            n_labels=10), "error_rate 1.2 is outside"),
    ],
)
def test_impossible_evidence_is_refused(make: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        make()  # type: ignore[operator]


def test_the_statistic_is_pages_cusum_of_the_likelihood_ratio() -> None:
    # By hand: e0 = 0.03, e1 = 0.05; each week adds x log(5/3) + (n - x) log(95/97).
    errors, labels = [1, 9, 0, 6], [60, 60, 60, 60]
    step = [x * math.log(0.05 / 0.03) + (n - x) * math.log(0.95 / 0.97)
            for x, n in zip(errors, labels, strict=True)]
    expected, level = [], 0.0
    for s in step:
        level = max(0.0, level + s)
        expected.append(level)
    path = cusum_path(errors, labels, in_control=0.97, target=0.95)
    assert path == pytest.approx(expected)
    assert expected[0] == 0 and expected[1] > 0  # one error in 60 is below the reference


def test_charts_along_leading_axes_are_independent() -> None:
    errors = np.array([[0, 5, 5], [5, 0, 0]])
    both = cusum_path(errors, 60, in_control=0.97, target=0.95)
    for row in range(2):
        assert both[row] == pytest.approx(cusum_path(errors[row], 60, in_control=0.97,
                                                     target=0.95))
    assert list(first_alarm(both, 1.0)) == [1, 0]
    assert list(first_alarm(both, 100.0)) == [-1, -1]


def weeks_of(errors: list[int], labels: int = 120) -> list[WeekEvidence]:
    return [WeekEvidence(f"2026-W{10 + i:02d}", labels, x, labels) for i, x in enumerate(errors)]


def test_the_approval_week_itself_can_raise_the_alarm() -> None:
    # 15 errors in 120 labels in the approval's own week: far beyond any threshold.
    state = detector_state(weeks_of([15, 3, 3]), in_control=0.97, target=0.95)
    assert state.alarm and state.alarm_week == "2026-W10" == state.run_start
    assert state.statistic[0] > state.threshold


def test_a_slip_is_flagged_with_the_week_its_evidence_starts() -> None:
    state = detector_state(weeks_of([3, 2, 4, 7, 8, 9, 3]), in_control=0.97, target=0.95)
    h = rl.alarm_threshold(200, in_control=0.97, target=0.95, labels_per_week=120)
    assert state.threshold == h and state.labels_per_week == 120
    path = cusum_path([3, 2, 4, 7, 8, 9, 3], 120, in_control=0.97, target=0.95)
    alarm = int(np.argmax(path >= h))
    assert state.alarm_week == f"2026-W{10 + alarm:02d}"
    # The excursion that alarmed started after the last week at 0.
    last_zero = max(i for i in range(alarm) if path[i] == 0)
    assert state.run_start == f"2026-W{10 + last_zero + 1:02d}"
    run = [3, 2, 4, 7, 8, 9, 3][last_zero + 1 : alarm + 1]
    assert (state.run_errors, state.run_labels) == (sum(run), 120 * len(run))
    assert state.reason is not None
    assert state.reason.startswith(f"slip flagged in {state.alarm_week}: from {state.run_start}"
                                   f" on, {sum(run):.1f} errors in {120 * len(run)} labels")


def test_good_weeks_raise_no_alarm_and_missing_weeks_are_listed() -> None:
    weekly = weeks_of([3, 4, 2, 3])
    weekly[2] = WeekEvidence("2026-W12", 0, 0, 0)  # closed, but nothing labelled
    state = detector_state(weekly, in_control=0.97, target=0.95)
    assert not state.alarm and state.alarm_week is None
    assert state.weeks_without_evidence == ("2026-W12",)
    assert state.statistic[2] == state.statistic[1]  # no evidence moves nothing
    record = json.loads(json.dumps(state.to_dict()))
    assert record["alarm"] is False and record["reason"] is None
    assert record["guaranteed_arl0"] == pytest.approx(
        math.exp(state.threshold))


def test_the_threshold_follows_the_stated_arl0_and_labels() -> None:
    weekly = weeks_of([3, 4], labels=60)
    default = detector_state(weekly, in_control=0.97, target=0.95)
    assert default.labels_per_week == 60 and default.arl0 == 200
    planned = detector_state(weekly, in_control=0.97, target=0.95, labels_per_week=120,
                             arl0=segment_arl0(200, 2))
    assert planned.arl0 == 400
    assert planned.threshold == rl.alarm_threshold(400, in_control=0.97, target=0.95,
                                                   labels_per_week=120)
    assert planned.threshold > default.threshold
    assert 200 <= rl.average_run_length(default.threshold, in_control=0.97, target=0.95,
                                        labels_per_week=60) < 220


def test_weeks_out_of_order_are_refused() -> None:
    weekly = weeks_of([3, 4])[::-1]
    with pytest.raises(InputError, match="weeks must be distinct and in order, oldest first"):
        detector_state(weekly, in_control=0.97, target=0.95)


def test_an_approval_at_or_below_the_target_has_nothing_to_monitor() -> None:
    with pytest.raises(InputError, match=r"in_control 0\.95 must be above target 0\.95"):
        detector_state(weeks_of([3]), in_control=0.95, target=0.95)


def test_segment_arl0_spreads_the_strata_promise_over_its_charts() -> None:
    assert segment_arl0(200, 3) == 600
    with pytest.raises(InputError, match="segments must be at least 1, got 0"):
        segment_arl0(200, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(30, 200)), min_size=1, max_size=20),
       st.floats(0.96, 0.995), st.floats(0.5, 0.95))
def test_the_statistic_never_falls_below_zero_nor_grows_on_fewer_errors(
    weeks: list[tuple[int, int]], in_control: float, target: float
) -> None:
    if not target < in_control:
        return
    errors = np.array([min(x, n) for x, n in weeks], dtype=float)
    labels = np.array([n for _, n in weeks], dtype=float)
    path = cusum_path(errors, labels, in_control=in_control, target=target)
    assert np.all(path >= 0)
    fewer = cusum_path(np.maximum(errors - 1, 0), labels, in_control=in_control, target=target)
    assert np.all(fewer <= path + 1e-12)
