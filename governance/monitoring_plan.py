"""The monitoring chart's parameters, fixed when an approval is made and frozen with it.

Every covered segment of an approval (form version x extractor version) is
watched by its own CUSUM (:mod:`fieldtrust.calibration.monitoring`). What
the chart tests is decided before any week after the approval is seen, so
no later label can move it: the in-control level (the segment's accuracy
above the threshold at approval), the alternative (the target), the labels
a week the threshold is set for, the threshold ``h`` and its stated
average run length between false alarms (``200 K`` weeks for a stratum of
``K`` segments, so the stratum sees at most one in 200), and the stated
detection at those labels a week: the chance a drop of
:data:`DETECTION_DROP` is caught within :data:`DETECTION_WEEKS` weeks (the
goal is :data:`DETECTION_POWER`; ``fieldtrust monitor`` says when a segment's
audit falls short of it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fieldtrust.calibration.monitoring import STRATUM_ARL0, segment_arl0
from fieldtrust.calibration.run_length import alarm_probability, alarm_threshold
from fieldtrust.calibration.segments import SegmentCheck

#: The stated detection: a drop of this much accuracy ...
DETECTION_DROP = 0.04
#: ... caught within this many weeks ...
DETECTION_WEEKS = 4
#: ... in this share of runs (the issue's "a model 4 points worse, within 4 weeks, 90%").
DETECTION_POWER = 0.9


@dataclass(frozen=True)
class SegmentPlan:
    """One covered segment's chart, as frozen with the approval."""

    form_version: str
    extractor_version: str
    in_control: float  # the segment's accuracy above the threshold at approval
    target: float  # the alternative: the accuracy automation must keep
    threshold: float  # h, on the log likelihood ratio
    arl0: float  # weeks between false alarms at in_control, this chart
    labels_per_week: int  # the labels a week h is set for (the window's average)
    # The chance a drop of DETECTION_DROP is caught within DETECTION_WEEKS at
    # labels_per_week (the chain, from a statistic of 0: the slowest start).
    detection_rate: float

    @property
    def key(self) -> tuple[str, str]:
        return self.form_version, self.extractor_version


@dataclass(frozen=True)
class MonitoringPlan:
    """Every covered segment's chart, and the false-alarm spacing promised per stratum."""

    stratum_arl0: float
    detection: Mapping[str, float]  # drop, within_weeks, power
    segments: tuple[SegmentPlan, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"stratum_arl0": self.stratum_arl0, "detection": dict(self.detection),
                "segments": [dataclasses.asdict(s) for s in self.segments]}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> MonitoringPlan:
        return cls(float(record["stratum_arl0"]), dict(record["detection"]),
                   tuple(SegmentPlan(**s) for s in record["segments"]))

    def segment(self, form_version: str, extractor_version: str) -> SegmentPlan | None:
        return next((s for s in self.segments if s.key == (form_version, extractor_version)),
                    None)


def plan_monitoring(
    segments: Sequence[SegmentCheck],
    covered: Sequence[tuple[str, str]],
    *,
    target: float,
    weeks: int,
    stratum_arl0: float = STRATUM_ARL0,
) -> MonitoringPlan:
    """The charts of an approval's ``covered`` segments, from their checks at approval.

    ``weeks`` is the number of weeks of the certification window with
    extractions of the stratum: a segment's labels above the threshold over
    them is the labels a week its audit gives it, and the threshold is set
    for that.
    """
    checks = {c.key: c for c in segments}
    arl0 = segment_arl0(stratum_arl0, max(1, len(covered)))
    plans = []
    for key in covered:
        check = checks[key]
        in_control = _in_control(check, target)
        per_week = max(1, math.ceil(check.labels_above / max(1, weeks)))
        h = alarm_threshold(arl0, in_control=in_control, target=target,
                            labels_per_week=per_week)
        plans.append(SegmentPlan(
            form_version=check.form_version,
            extractor_version=check.extractor_version,
            in_control=in_control,
            target=target,
            threshold=h,
            arl0=arl0,
            labels_per_week=per_week,
            detection_rate=alarm_probability(
                h, in_control=in_control, target=target, labels_per_week=per_week,
                accuracies=[max(in_control - DETECTION_DROP, 0.01)] * DETECTION_WEEKS),
        ))
    detection = {"drop": DETECTION_DROP, "within_weeks": DETECTION_WEEKS,
                 "power": DETECTION_POWER}
    return MonitoringPlan(float(stratum_arl0), detection, tuple(plans))


def _in_control(check: SegmentCheck, target: float) -> float:
    """The chart's in-control level: the segment's accuracy, strictly between target and 1.

    A segment without an error in its labels is charted at half an error
    short of perfect (a chart at 1.0 would alarm on the first error); a
    covered segment's accuracy is at or above the target, and the chart
    needs it strictly above.
    """
    labels = max(1, check.labels_above)
    level = min(check.accuracy, 1.0 - 0.5 / labels)
    return float(max(level, target + 1e-3))
