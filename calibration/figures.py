"""How an estimated share is written for people: with its n and its interval, or why not.

Every accuracy fieldtrust prints or draws carries the labels it rests on and
its interval (STATS.md section 3). One interval is not worth printing: with
few labels, or with design weights so uneven that dozens of labels weigh as
one or two (a boosted cell beside a cell of one label), the Korn-Graubard
interval spans most of [0, 1] (``99.7% [0.2%, 100.0%]`` on 39 labels). Such an
interval looks like information and is none; :func:`interval_note` says why
instead, and :func:`share_text` writes the figure either way. The CLI tables,
``fieldtrust report`` and the dashboard all write figures through here, so a
figure reads the same wherever it is shown.
"""

from __future__ import annotations

import math

#: An interval wider than this spans over half of [0, 1]: it is replaced by a note.
UNINFORMATIVE_WIDTH = 0.5

#: Labels whose effective size is under this share of their count are "uneven weights".
_UNEVEN = 0.5


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def interval_note(
    lower: float | None, upper: float | None, n: int | None, n_eff: float | None = None
) -> str | None:
    """Why the interval ``[lower, upper]`` on ``n`` labels is not worth showing, or None.

    ``n_eff`` is the Korn-Graubard effective size
    (:func:`fieldtrust.calibration.survey.effective_size`); when it is well
    under ``n`` the note blames the design's uneven weights, else the label
    count. None when the interval is narrower than :data:`UNINFORMATIVE_WIDTH`
    or there is none (no labels).
    """
    if not n or _missing(lower) or _missing(upper):
        return None
    assert lower is not None and upper is not None
    if upper - lower <= UNINFORMATIVE_WIDTH:
        return None
    labels = "label" if n == 1 else "labels"
    if n_eff is not None and not _missing(n_eff) and n_eff < _UNEVEN * n:
        return (
            f"no usable interval: the {n:,} {labels}' design weights are so uneven that they"
            f" count as {n_eff:.1f} (effective n)"
        )
    return f"no usable interval on {n:,} {labels}"


def interval_text(lower: float | None, upper: float | None, *, digits: int = 1) -> str | None:
    """``[96.5%, 97.6%]``; None without an interval."""
    if _missing(lower) or _missing(upper):
        return None
    return f"[{lower:.{digits}%}, {upper:.{digits}%}]"


def share_text(
    estimate: float | None,
    lower: float | None,
    upper: float | None,
    n: int | None,
    n_eff: float | None = None,
    *,
    digits: int = 1,
) -> str:
    """An estimated share for prose: ``97.1% [96.5%, 97.6%] (n = 1,204)``.

    With an uninformative interval, the note replaces it:
    ``99.7% (n = 39; no usable interval: ...)``. Without labels: ``no labels``.
    """
    if not n or _missing(estimate):
        return "no labels"
    assert estimate is not None
    note = interval_note(lower, upper, n, n_eff)
    if note:
        return f"{estimate:.{digits}%} (n = {n:,}; {note})"
    shown = interval_text(lower, upper, digits=digits)
    return f"{estimate:.{digits}%}" + (f" {shown}" if shown else "") + f" (n = {n:,})"


def cell_text(
    estimate: float | None,
    lower: float | None,
    upper: float | None,
    n: int | None,
    n_eff: float | None = None,
) -> str:
    """A share in a table cell, in percent: ``96.7 [92.2-98.1] n=1,045``.

    An uninformative interval shows as ``99.7 [*] n=39``: a table using this
    says under it what ``[*]`` means (:data:`CELL_LEGEND`). Empty without labels.
    """
    if not n or _missing(estimate):
        return ""
    assert estimate is not None
    if interval_note(lower, upper, n, n_eff) or _missing(lower) or _missing(upper):
        return f"{100 * estimate:.1f} [*] n={n:,}"
    assert lower is not None and upper is not None
    return f"{100 * estimate:.1f} [{100 * lower:.1f}-{100 * upper:.1f}] n={n:,}"


#: What a table of :func:`cell_text` cells says under itself.
CELL_LEGEND = (
    "[*]: no usable interval (it would span over half of 0-100%): too few labels, or design"
    " weights so uneven that the labels count as only a few (the effective n in --json)"
)
