"""Checks a certified threshold must pass before automation (STATS.md section 7).

* Weeks: in each of the last K weeks with labels, accuracy above the
  threshold is not significantly below the target (one-sided test at level
  delta, the design-based lower bound on the week's error rate above the
  threshold against ``1 - target``).
* Form versions: every form version with extractions above the threshold has
  at least ``n_min`` labels of its own there (or all of them, when it has
  fewer extractions than that): a new version is unseen territory, and only
  audits count there.

Both checks can only remove candidates, so running them on weeks inside the
certification window cannot raise the chance of a wrong certification.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.design import error_bound, grid_index
from fieldtrust.calibration.population import StratumData, build_design


@dataclass(frozen=True)
class WeekCheck:
    """One week's accuracy above the threshold, tested against the target."""

    week: str
    labels_above: int
    accuracy: float  # design-weighted, NaN without labels above
    error_lower_bound: float  # lower (1 - delta) bound on the error rate above
    below_target: bool  # significantly below target at level delta

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))


@dataclass(frozen=True)
class VersionCheck:
    """One form version's evidence above the threshold."""

    form_version: str
    n_population_above: int
    labels_above: int
    labels_required: int
    accuracy: float
    enough_labels: bool

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))


def _weighted_mean(correct: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]) -> float:
    return float(np.sum(weight * correct) / np.sum(weight)) if correct.size else float("nan")


def week_checks(
    data: StratumData,
    threshold: float,
    *,
    target: float,
    confidence: float,
    weeks: int,
) -> list[WeekCheck]:
    """The stability test in each of the last ``weeks`` weeks with labels.

    References
    ----------
    Clopper & Pearson (1934) for the one-sided bound; STATS.md section 7.
    """
    k = int(grid_index(threshold))
    labelled_weeks = sorted(set(data.week.tolist()))[-weeks:] if weeks > 0 else []
    checks = []
    for week in labelled_weeks:
        design, labels = build_design(data, (week,))
        above = labels.k >= k
        bound = error_bound(design, labels, k, delta=1.0 - confidence, side="lower")
        lower = 0.0 if np.isnan(bound.value) else bound.value
        checks.append(
            WeekCheck(
                week=week,
                labels_above=int(above.sum()),
                accuracy=_weighted_mean(labels.correct[above], labels.weight[above]),
                error_lower_bound=float(lower),
                below_target=bool(lower > 1.0 - target),
            )
        )
    return checks


def version_checks(data: StratumData, threshold: float, *, n_min: int) -> list[VersionCheck]:
    """Labels per form version above the threshold, against ``min(n_min, volume)``."""
    k = int(grid_index(threshold))
    label_k = grid_index(data.confidence)
    checks = []
    for version, hist in sorted(data.version_hist.items()):
        volume = int(hist[k:].sum())
        if volume == 0:
            continue
        mine = (data.form_version == version) & (label_k >= k)
        required = min(n_min, volume)
        checks.append(
            VersionCheck(
                form_version=version,
                n_population_above=volume,
                labels_above=int(mine.sum()),
                labels_required=required,
                accuracy=_weighted_mean(data.correct[mine], data.weight[mine]),
                enough_labels=int(mine.sum()) >= required,
            )
        )
    return checks
