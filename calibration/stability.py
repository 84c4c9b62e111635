"""Checks a certified threshold must pass before automation (STATS.md sections 6 and 7).

* Weeks: each of the last K weeks of the window must hold at least
  ``min_week_labels`` design-based labels above the threshold and its
  accuracy there must not be significantly below the target (one-sided test
  at level delta: the design-based lower bound on the week's error rate
  above the threshold against ``1 - target``). A week without that evidence
  fails ("no evidence in 2026-W45"); it never passes by having nothing to test.
* Form versions: every form version with extractions above the threshold is
  certified on its own design-based labels there (the same bound as the
  stratum's, on the version's share of each audited week). A version that
  certifies is *covered*; one that does not goes to a human. A *material*
  version (at least ``version_share`` of the stratum above the threshold)
  that does not certify is named in the candidacy's reasons. A new form
  version is never covered until its own labels certify it.

Both checks can only remove candidates or versions, so running them on weeks
inside the certification window cannot raise the chance of a wrong
certification of the stratum as a whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.design import N_GRID, error_bound, grid_index
from fieldtrust.calibration.population import StratumData, build_design
from fieldtrust.store.bar import Bar


@dataclass(frozen=True)
class WeekCheck:
    """One week's accuracy above the threshold, tested against the target."""

    week: str
    labels_above: int  # design-based labels above the threshold
    accuracy: float  # design-weighted, NaN without labels above
    error_lower_bound: float  # lower (1 - delta) bound on the error rate above
    below_target: bool  # significantly below target at level delta
    enough_evidence: bool = True  # at least min_week_labels labels above

    @property
    def passes(self) -> bool:
        return self.enough_evidence and not self.below_target

    @property
    def reason(self) -> str | None:
        if not self.enough_evidence:
            return f"no evidence in {self.week}"
        if self.below_target:
            return f"{self.week} is significantly below the target"
        return None

    def as_dict(self) -> dict[str, object]:
        return {**vars(self), "passes": self.passes, "reason": self.reason}


@dataclass(frozen=True)
class VersionCheck:
    """One form version's own evidence above the threshold."""

    form_version: str
    n_population_above: int
    share_above: float  # of the stratum's extractions above the threshold
    material: bool  # share_above >= version_share
    labels_above: int  # the version's design-based labels above the threshold
    accuracy: float
    accuracy_low: float  # 1 - the upper (1 - delta) bound on its error rate there
    covered: bool  # certified on its own labels: may be automated

    @property
    def enough_labels(self) -> bool:
        return self.covered

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))


def _weighted_mean(correct: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]) -> float:
    return float(np.sum(weight * correct) / np.sum(weight)) if correct.size else float("nan")


def week_checks(
    data: StratumData,
    threshold: float,
    bar: Bar,
    *,
    window: tuple[str, ...] | None = None,
) -> list[WeekCheck]:
    """The stability test in each of the bar's last ``stability_weeks`` weeks of the window.

    Each needs the bar's ``min_week_labels`` above the threshold and must not
    be significantly below its ``target`` at level ``1 - confidence``.
    ``window`` is the certification window (default: the weeks with
    extractions of the stratum). Weeks without extractions of the stratum
    have nothing to automate and are not among them.

    References
    ----------
    Clopper & Pearson (1934) for the one-sided bound; STATS.md section 7.
    """
    k = int(grid_index(threshold))
    present = sorted(w for w in (window or tuple(data.week_hist)) if w in data.week_hist)
    recent = present[-bar.stability_weeks:]
    checks = []
    for week in recent:
        design, labels = build_design(data, (week,))
        above = (labels.k >= k) & (labels.cell >= 0)
        bound = error_bound(design, labels, k, delta=1.0 - bar.confidence, side="lower")
        lower = 0.0 if np.isnan(bound.value) else bound.value
        n_above = int(above.sum())
        checks.append(
            WeekCheck(
                week=week,
                labels_above=n_above,
                accuracy=_weighted_mean(labels.correct[above], labels.weight[above]),
                error_lower_bound=float(lower),
                below_target=bool(lower > 1.0 - bar.target),
                enough_evidence=n_above >= bar.min_week_labels,
            )
        )
    return checks


def version_data(data: StratumData, version: str) -> StratumData:
    """The stratum restricted to one form version: its population, cells and labels.

    A week's cells are kept only where the version has design-based labels,
    each capped at the version's extractions that week; the version's
    extractions elsewhere count as unaccounted (errors, in an upper bound).
    """
    mine = data.form_version == version
    week_hist = {w: h for (w, v), h in data.week_version_hist.items() if v == version}
    cells_with_labels = {(str(w), str(c)) for w, c in zip(data.week[mine], data.cell[mine],
                                                         strict=True)}
    cells = tuple(
        dataclasses.replace(c, n_population=min(c.n_population, int(week_hist[c.week].sum())))
        for c in data.cells if (c.week, c.cell) in cells_with_labels and c.week in week_hist
    )
    return dataclasses.replace(
        data,
        n_population=int(sum(h.sum() for h in week_hist.values())),
        week_hist=week_hist,
        version_hist={version: data.version_hist.get(version, np.zeros(N_GRID, np.int64))},
        cells=cells,
        **data.label_arrays(mine),
        week_version_hist={(w, version): h for w, h in week_hist.items()},
        other_confidence=np.zeros(0),
        other_correct=np.zeros(0),
    )


def version_checks(data: StratumData, threshold: float, bar: Bar) -> list[VersionCheck]:
    """Each form version above the threshold, certified on its own labels there.

    At the bar's ``target`` and ``confidence``; a version holding at least its
    ``version_share`` of the stratum above the threshold is material.

    References
    ----------
    STATS.md sections 6 and 7; the bound is :func:`fieldtrust.calibration.design.error_bound`.
    """
    k = int(grid_index(threshold))
    total_above = int(sum(int(h[k:].sum()) for h in data.version_hist.values()))
    checks = []
    for version, hist in sorted(data.version_hist.items()):
        volume = int(hist[k:].sum())
        if volume == 0:
            continue
        own = version_data(data, version)
        design, labels = own.design, own.labels
        above = (labels.k >= k) & (labels.cell >= 0)
        bound = error_bound(design, labels, k, delta=1.0 - bar.confidence)
        upper = 1.0 if np.isnan(bound.value) else bound.value
        accuracy = _weighted_mean(labels.correct[above], labels.weight[above])
        share = volume / total_above if total_above else 0.0
        checks.append(
            VersionCheck(
                form_version=version,
                n_population_above=volume,
                share_above=share,
                material=share >= bar.version_share,
                labels_above=int(above.sum()),
                accuracy=accuracy,
                accuracy_low=float(min(1.0 - upper, accuracy)) if above.any() else 0.0,
                covered=bool(upper <= 1.0 - bar.target and above.any()
                             and accuracy >= bar.target),
            )
        )
    return checks
