"""Monitoring after approval: a weekly CUSUM on one segment's design-based errors.

An approved stratum is automated above its threshold on the evidence of its
approval. From the approval's own week on, each *segment* of it (one
covered form version x one extractor version, above the approved
threshold; never pooled, STATS.md section 15) is watched by a one-sided
CUSUM (Page 1954) on its weekly audit evidence:

``S_0 = 0``, ``S_w = max(0, S_{w-1} + x_w log(e1 / e0) + (n_w - x_w) log((1 - e1) / (1 - e0)))``

with ``n_w`` the week's effective labels, ``x_w`` its effective errors,
``e0 = 1 - in_control`` the approval's error rate and ``e1 = 1 - target``
the target's allowance: each week adds the log likelihood ratio of "the
segment is at the target" against "it is where the approval found it".
The chart alarms in the first week with ``S_w >= h``; ``h`` is set for a
stated average run length ``arl0`` between false alarms at the in-control
accuracy (:func:`fieldtrust.calibration.run_length.alarm_threshold`).

What the false-alarm rate means (STATS.md section 11 asks for it stated):

* at the in-control accuracy with the planned weekly labels: one false
  alarm per ``arl0`` weeks on average (Brook-Evans, checked by simulation);
* at any accuracy at or above the in-control one, with any weekly sizes: at
  least ``exp(h)`` weeks on average (Lorden 1971; the e-detector argument of
  Shin, Ramdas & Rinaldo: ``exp(S_w)`` is at most the Shiryaev-Roberts
  e-detector, whose mean alarm time is at least its threshold);
* between the in-control accuracy and the target, alarms come sooner, and
  at the target within a few dozen weeks: the chart is built to notice that
  a segment has left the level it was approved at. ``docs/statistics.md``
  tabulates these run lengths.

Design weights: a week's labels above the threshold enter as the *thinned
size* ``n = sum(w) / max(w)`` (the population they speak for times the
lowest inclusion probability among them) with ``x = n (1 - acc)``, ``acc``
the Hajek accuracy (STATS.md section 2). With one inclusion probability
that is the plain count of labels and errors. With several, ``n`` is the
size of the simple random sample the labels could be thinned to (as the
certificate's bound does, :mod:`fieldtrust.calibration.design`), and when
every error sits in the most heavily weighted cell, ``x`` is that cell's
raw error count: a week is never credited with finer evidence than its
sparsest cell gives. Kish's effective size ``(sum w)^2 / sum w^2`` matches
the variance when the cells share an error rate, but when the errors sit in
the lightly sampled cells each one moves the chart by more than a label's
worth, and the false alarms came a quarter sooner (ARL0 154 weeks against
200 in tests/calibration/test_monitoring_simulation.py). Both sizes depend
on the weights only, never on the verdicts.

References
----------
Page (1954), Biometrika 41:100. Lorden (1971), Annals of Mathematical
Statistics 42:1897. Shin, Ramdas & Rinaldo (2024), "E-detectors: a
nonparametric framework for sequential change detection", New England
Journal of Statistics in Data Science 2:229. Kish (1965), Survey Sampling, 11.7.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.run_length import alarm_threshold, check_levels, llr_weights

from fieldtrust.errors import InputError

#: Weeks between false alarms a stratum is promised (the issue's "at least 200").
STRATUM_ARL0 = 200.0


@dataclass(frozen=True)
class WeekEvidence:
    """One week's design-based evidence on one segment above the approved threshold.

    ``labels`` is the effective number of labels (the thinned size ``sum(w) /
    max(w)``), ``errors`` the effective number of errors among them, ``n_labels`` the labels behind
    both. A week without labels (``labels == 0``) is no evidence: it adds
    nothing to the chart and is listed in
    :attr:`DetectorState.weeks_without_evidence`.
    """

    week: str
    labels: float
    errors: float
    n_labels: int

    def __post_init__(self) -> None:
        if not (self.labels >= 0 and 0 <= self.errors <= self.labels + 1e-9):
            raise InputError(
                f"week {self.week}: need 0 <= errors <= labels, got errors={self.errors!r},"
                f" labels={self.labels!r}"
            )
        if self.n_labels < 0 or (self.labels > 0 and self.n_labels < self.labels - 1e-9):
            raise InputError(f"week {self.week}: {self.n_labels} labels cannot have an"
                             f" effective size of {self.labels!r}")

    @property
    def error_rate(self) -> float:
        """The design-based error rate (NaN without labels)."""
        return self.errors / self.labels if self.labels > 0 else float("nan")

    @classmethod
    def from_labels(cls, week: str, correct: npt.ArrayLike, weight: npt.ArrayLike) -> WeekEvidence:
        """The evidence of labels (1 correct, 0 wrong) with their design weights ``1 / pi``."""
        y = np.asarray(correct, dtype=np.float64)
        w = np.asarray(weight, dtype=np.float64)
        if y.shape != w.shape:
            raise InputError(f"week {week}: {y.size} verdicts but {w.size} weights")
        if np.any((y != 0) & (y != 1)):
            raise InputError(f"week {week}: verdicts must be 0 or 1")
        if np.any(~(w > 0)) or np.any(~np.isfinite(w)):
            raise InputError(f"week {week}: design weights must be finite and positive")
        if y.size == 0:
            return cls(week, 0.0, 0.0, 0)
        labels = float(w.sum() / w.max())
        accuracy = float(np.sum(w * y) / w.sum())
        return cls(week, labels, labels * (1 - accuracy), int(y.size))

    @classmethod
    def from_cells(
        cls,
        week: str,
        *,
        n_population: npt.ArrayLike,
        n_labelled: npt.ArrayLike,
        n_domain: npt.ArrayLike,
        n_correct: npt.ArrayLike,
    ) -> WeekEvidence:
        """The evidence from per-cell counts of one week's audit.

        As :func:`fieldtrust.calibration.survey.domain_estimates`, one entry
        per audit cell: ``N_h`` extractions, ``m_h`` design-based labels (its
        labelled prefix), ``m_hd`` of them in the segment above the threshold,
        ``k_hd`` of those correct. A label of cell ``h`` weighs ``N_h / m_h``.
        """
        big_n, m, m_d, k = (np.asarray(a, dtype=np.float64)
                            for a in (n_population, n_labelled, n_domain, n_correct))
        if not big_n.shape == m.shape == m_d.shape == k.shape:
            raise InputError(f"week {week}: the per-cell counts must have one shape")
        if np.any(m_d > m) or np.any(k > m_d) or np.any(k < 0) or np.any(m > big_n):
            raise InputError(f"week {week}: need 0 <= n_correct <= n_domain <= n_labelled"
                             " <= n_population in every cell")
        weight = np.divide(big_n, m, out=np.zeros_like(big_n), where=m > 0)
        total = float(np.sum(weight * m_d))
        if total == 0:
            return cls(week, 0.0, 0.0, 0)
        labels = total / float(weight[m_d > 0].max())
        accuracy = float(np.sum(weight * k)) / total
        return cls(week, labels, labels * (1 - accuracy), int(m_d.sum()))

    @classmethod
    def from_estimate(cls, week: str, *, error_rate: float, effective_labels: float,
                      n_labels: int) -> WeekEvidence:
        """The evidence of a design-based error rate and its effective size."""
        if not 0.0 <= error_rate <= 1.0:
            raise InputError(f"week {week}: error_rate {error_rate!r} is outside [0, 1]")
        return cls(week, float(effective_labels), float(effective_labels) * error_rate, n_labels)


def cusum_path(errors: npt.ArrayLike, labels: npt.ArrayLike, *, in_control: float,
               target: float) -> FloatArray:
    """The chart's statistic after each week, along the last axis.

    ``errors`` and ``labels`` are effective counts (broadcast together; any
    leading axes are independent charts, as in a simulation). The statistic
    starts at 0 before the first week.
    """
    per_error, per_label = llr_weights(in_control, target)
    x = np.asarray(errors, dtype=np.float64)
    n = np.asarray(labels, dtype=np.float64)
    x, n = np.broadcast_arrays(x, n)
    increments = per_error * x + per_label * n
    path = np.empty_like(increments)
    level = np.zeros(increments.shape[:-1])
    for week in range(increments.shape[-1]):
        level = np.maximum(0.0, level + increments[..., week])
        path[..., week] = level
    return path


def first_alarm(path: npt.ArrayLike, threshold: float) -> IntArray:
    """Index of the first week whose statistic reaches ``threshold`` (-1 if none), per chart."""
    above = np.asarray(path) >= threshold
    return np.where(above.any(axis=-1), above.argmax(axis=-1), -1).astype(np.int64)


def segment_arl0(stratum_arl0: float = STRATUM_ARL0, segments: int = 1) -> float:
    """The run length each of a stratum's ``segments`` charts needs for ``stratum_arl0``.

    False alarms of several charts add up: with rates ``1 / ARL_k`` the
    stratum sees about ``sum_k 1 / ARL_k`` a week, so ``segments`` charts at
    ``segments * stratum_arl0`` keep the stratum's spacing at ``stratum_arl0``.
    """
    if segments < 1:
        raise InputError(f"segments must be at least 1, got {segments}")
    if not stratum_arl0 >= 2:
        raise InputError(f"stratum_arl0 must be at least 2 weeks, got {stratum_arl0!r}")
    return float(stratum_arl0) * segments


@dataclass(frozen=True)
class DetectorState:
    """The chart of one segment after its latest week.

    ``statistic[i]`` is the CUSUM after ``weeks[i]`` (the approval's week
    first); ``alarm_week`` the first week it reached ``threshold``;
    ``run_start`` the first week of the excursion that holds the latest
    (or alarming) value, i.e. the evidence the alarm rests on starts there;
    ``run_labels`` and ``run_errors`` the effective labels and errors from
    ``run_start`` to the alarm (or the latest week). ``arl0`` is the
    in-control spacing of false alarms the threshold was set for at
    ``labels_per_week``; :attr:`guaranteed_arl0` the spacing that holds
    whatever the weekly sizes.
    """

    weeks: tuple[str, ...]
    statistic: tuple[float, ...]
    threshold: float
    alarm_week: str | None
    run_start: str | None
    run_labels: float
    run_errors: float
    in_control: float
    target: float
    arl0: float
    labels_per_week: int
    between_week_sd: float
    weeks_without_evidence: tuple[str, ...]

    @property
    def alarm(self) -> bool:
        """True once the chart has alarmed: automation of the segment should be suspended."""
        return self.alarm_week is not None

    @property
    def guaranteed_arl0(self) -> float:
        """``exp(threshold)``: weeks to a false alarm at any accuracy >= in_control, any sizes."""
        return math.exp(self.threshold)

    @property
    def reason(self) -> str | None:
        """Why the segment's automation should be suspended; None without an alarm."""
        if self.alarm_week is None:
            return None
        rate = self.run_errors / self.run_labels if self.run_labels else float("nan")
        return (
            f"slip flagged in {self.alarm_week}: from {self.run_start} on, {self.run_errors:.1f}"
            f" errors in {self.run_labels:.0f} labels ({rate:.1%}) against"
            f" {1 - self.in_control:.1%} at approval; the monitoring statistic reached"
            f" {self.statistic[self.weeks.index(self.alarm_week)]:.2f}, its threshold"
            f" {self.threshold:.2f} (one false alarm in {self.arl0:.0f} weeks at the approved"
            f" accuracy); target {self.target}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form, with ``alarm``, ``guaranteed_arl0`` and ``reason``."""
        return {**{name: getattr(self, name) for name in self.__dataclass_fields__},
                "weeks": list(self.weeks), "statistic": list(self.statistic),
                "weeks_without_evidence": list(self.weeks_without_evidence),
                "alarm": self.alarm, "guaranteed_arl0": self.guaranteed_arl0,
                "reason": self.reason}


def detector_state(
    weekly: Sequence[WeekEvidence],
    *,
    in_control: float,
    target: float,
    arl0: float = STRATUM_ARL0,
    labels_per_week: int | None = None,
    between_week_sd: float = 0.0,
) -> DetectorState:
    """Run the monitoring chart of one segment over its weeks since the approval.

    Parameters
    ----------
    weekly
        The segment's evidence for every closed week from the approval's own
        week on, oldest first, one entry per ISO week (a week without labels
        as ``WeekEvidence(week, 0, 0, 0)``, so its absence shows).
    in_control
        The accuracy the approval found above the threshold for this
        segment (the chart's in-control level).
    target
        The accuracy the automation must keep.
    arl0
        Weeks between false alarms at ``in_control`` (per segment; see
        :func:`segment_arl0` for a stratum of several segments).
    labels_per_week
        Labels a week the threshold is set for: the audit design's planned
        labels of the segment above the threshold. Default: the largest
        effective weekly size seen, rounded up (more labels a week than
        planned shortens the weeks to a false alarm; fewer lengthen them).
    between_week_sd
        Spread of the weeks' true accuracy at the approved level (accuracy
        units) the threshold should allow for; 0 assumes none.

    Returns
    -------
    DetectorState

    References
    ----------
    Page (1954); Brook & Evans (1972); Shin, Ramdas & Rinaldo (2024).
    """
    check_levels(in_control, target)
    weeks = tuple(w.week for w in weekly)
    if any(later <= earlier for earlier, later in itertools.pairwise(weeks)):
        raise InputError(f"weeks must be distinct and in order, oldest first; got {list(weeks)}")
    labels = np.array([w.labels for w in weekly], dtype=np.float64)
    errors = np.array([w.errors for w in weekly], dtype=np.float64)
    if labels_per_week is None:
        labels_per_week = max(1, math.ceil(float(labels.max(initial=0.0)) - 1e-9))
    threshold = alarm_threshold(arl0, in_control=in_control, target=target,
                                labels_per_week=labels_per_week,
                                between_week_sd=between_week_sd)
    path = cusum_path(errors, labels, in_control=in_control, target=target)
    alarm = int(first_alarm(path, threshold)) if weeks else -1
    last = alarm if alarm >= 0 else len(weeks) - 1
    start = _run_start(path, last)
    run = slice(start, last + 1) if start is not None else slice(0, 0)
    return DetectorState(
        weeks=weeks,
        statistic=tuple(float(v) for v in path),
        threshold=threshold,
        alarm_week=weeks[alarm] if alarm >= 0 else None,
        run_start=weeks[start] if start is not None else None,
        run_labels=float(labels[run].sum()),
        run_errors=float(errors[run].sum()),
        in_control=float(in_control),
        target=float(target),
        arl0=float(arl0),
        labels_per_week=int(labels_per_week),
        between_week_sd=float(between_week_sd),
        weeks_without_evidence=tuple(w.week for w in weekly if w.labels == 0),
    )


def _run_start(path: FloatArray, last: int) -> int | None:
    """Index of the first week of the positive excursion holding ``path[last]`` (None at 0)."""
    if last < 0 or path[last] == 0:
        return None
    zeros = np.flatnonzero(path[: last + 1] == 0)
    return int(zeros[-1]) + 1 if zeros.size else 0
