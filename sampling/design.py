"""The weekly audit sampling design (STATS.md section 8): defaults, files, canonical form.

A :class:`Design` says how many items each sampling cell gets. Cells are
doc_type x field x confidence band x form-version status; the design fixes the
bands, the base rate with its minimum and optional cap, the boost of form
versions first seen recently, an optional weekly label budget, and how the
labels are split over the cells (``allocation``: in proportion to size, or
by Neyman allocation on the bands' expected error variance). The canonical
JSON of the design (sorted keys, no spaces) and its sha256 are stored with
every sample, so a sample can always say how it was drawn and drawing again
with the same design finds it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldtrust.store.files import read_capped

from fieldtrust.errors import InputError

DEFAULT_BANDS: tuple[float, ...] = (0.0, 0.5, 0.8, 0.9, 0.95, 1.0)

#: How a design splits its labels over the cells (see :attr:`Design.allocation`).
ALLOCATIONS: tuple[str, ...] = ("proportional", "neyman")


@dataclass(frozen=True)
class Design:
    """How a week's audit sample is sized.

    Attributes
    ----------
    bands
        Edges of the confidence bands, ascending from 0 to 1. Bands are
        half-open ``[a, b)`` except the last, ``[a, 1]``. No band is exempt:
        the items the model is surest of are where silent errors hide.
    base_rate
        Share of each cell drawn (before minimum and cap).
    minimum
        Items per cell at least (every item when the cell is smaller). At
        least 2, so every cell has a variance estimate.
    cap
        Items per cell at most (None: no cap). Not below ``minimum``.
    new_version_weeks
        A form version is *new* when first seen within this many weeks before
        the end of the sampled week (0: no version is ever new).
    boost
        New-version cells are sampled at ``base_rate * boost`` (and get
        ``boost`` times their Neyman weight under a budget).
    budget
        Weekly label budget. When set, the base rate is not used: the budget
        is spread over the cells by ``allocation``, keeping the minimums.
    allocation
        ``"proportional"``: each cell's labels in proportion to its items
        (the rate rule without a budget). ``"neyman"``: in proportion to
        ``N_h sqrt(p_h (1 - p_h))``, ``p_h`` the band's error rate in past
        labels shrunk towards ``prior_error``; without a budget it spends
        the labels the rate rule would, where they narrow the estimate most.
        Both keep every cell's ``minimum`` (no band goes unaudited) and the
        boost. ``None`` (the default) is ``"neyman"`` with a budget and
        ``"proportional"`` without, as before the key existed; an explicit
        value equal to that default is stored as ``None``, so a design's
        sha256 does not depend on spelling the default out.
    prior_error
        Error rate assumed for a cell's Neyman weight until its band has
        past labels (they are shrunk towards it).
    double_review_share
        Share of each cell marked for a second, blind review.
    """

    bands: tuple[float, ...] = DEFAULT_BANDS
    base_rate: float = 0.01
    minimum: int = 10
    cap: int | None = None
    new_version_weeks: int = 2
    boost: float = 5.0
    budget: int | None = None
    prior_error: float = 0.05
    double_review_share: float = 0.10
    allocation: str | None = None

    def __post_init__(self) -> None:
        for name, value in _validated(self).items():
            object.__setattr__(self, name, value)

    @property
    def band_labels(self) -> tuple[str, ...]:
        """Text labels of the bands, ``'[0.90,0.95)'``, the last one closed."""
        edges = [_edge_text(x) for x in self.bands]
        labels = [f"[{lo},{hi})" for lo, hi in itertools.pairwise(edges)]
        labels[-1] = labels[-1][:-1] + "]"
        return tuple(labels)

    @property
    def allocation_rule(self) -> str:
        """The allocation in force: ``allocation``, or its default for the budget."""
        if self.allocation is not None:
            return self.allocation
        return "neyman" if self.budget is not None else "proportional"

    def rate(self, *, new_version: bool) -> float:
        """Sampling rate of a cell: the base rate, boosted for new form versions."""
        return min(1.0, self.base_rate * self.boost) if new_version else self.base_rate

    def to_dict(self) -> dict[str, Any]:
        """The design as plain JSON-ready values."""
        values = dataclasses.asdict(self)
        values["bands"] = list(self.bands)
        if values["allocation"] is None:  # designs stored before the key keep their sha256
            del values["allocation"]
        return values

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace: equal designs give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        """Hex sha256 of :meth:`canonical_json`; identifies the design of a sample."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "design") -> Design:
        """Build a design from a mapping; keys left out keep their defaults.

        Raises
        ------
        InputError
            An unknown key, a value of the wrong type or outside its range.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(
                f"{source}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}"
            )
        try:
            return cls(**dict(values))
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from exc

    @classmethod
    def from_json(cls, text: str, *, source: str = "design") -> Design:
        """Parse a design stored as JSON (``audit_samples.design_json`` or a file)."""
        values = _parsed(text, "JSON", source=source)
        if not isinstance(values, dict):
            raise InputError(f"{source}: expected a JSON object of design keys")
        return cls.from_mapping(values, source=source)


def load_design(path: str | os.PathLike[str]) -> Design:
    """Read a design from a ``.toml`` or ``.json`` file.

    In TOML the keys may sit at the top level or in a ``[design]`` table::

        [design]
        bands = [0, 0.5, 0.8, 0.9, 0.95, 1]
        base_rate = 0.02
        minimum = 20
        budget = 1500
    """
    file = Path(path)
    if file.suffix.lower() not in (".json", ".toml"):
        raise InputError(f"design file {file}: use a .toml or .json file")
    try:
        text = read_capped(file, what="design file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"design file {file}: cannot be read as UTF-8 text ({exc})") from exc
    if file.suffix.lower() == ".json":
        return Design.from_json(text, source=str(file))
    table = _parsed(text, "TOML", source=f"design file {file}")
    design_table = table.get("design", table)
    if not isinstance(design_table, dict):
        raise InputError(f"design file {file}: [design] must be a table")
    return Design.from_mapping(design_table, source=str(file))


#: The languages a design is written in: how each is read and the error it raises.
_PARSERS: dict[str, tuple[Callable[[str], Any], type[ValueError]]] = {
    "JSON": (json.loads, json.JSONDecodeError),
    "TOML": (tomllib.loads, tomllib.TOMLDecodeError),
}


def _parsed(text: str, language: str, *, source: str) -> Any:
    """``text`` read as ``language``; bad or too deeply nested text: an error naming ``source``."""
    loads, error = _PARSERS[language]
    try:
        return loads(text)
    except error as exc:
        raise InputError(f"{source}: not valid {language} ({exc})") from exc
    except RecursionError as exc:
        raise InputError(f"{source}: nested too deeply to be a design") from exc


def _edge_text(x: float) -> str:
    text = f"{x:.2f}"
    return text if float(text) == x else repr(x)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name} = {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{name} = {value!r} is not a finite number")
    return number


def _integer(name: str, value: Any) -> int:
    number = _number(name, value)
    if number != int(number):
        raise InputError(f"{name} = {value!r} is not a whole number")
    return int(number)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


def _validated(design: Design) -> dict[str, Any]:
    """Every field checked and coerced to its canonical type (floats stay floats)."""
    if isinstance(design.bands, str | bytes) or not hasattr(design.bands, "__iter__"):
        raise InputError(f"bands = {design.bands!r} is not a list of band edges")
    bands = tuple(_number("bands", x) for x in design.bands)
    _check(len(bands) >= 2, "bands needs at least two edges, e.g. [0, 1]")
    _check(
        bands[0] == 0.0 and bands[-1] == 1.0,
        f"bands = {list(bands)} must start at 0 and end at 1 so every confidence has a band",
    )
    _check(
        all(a < b for a, b in itertools.pairwise(bands)),
        f"bands = {list(bands)} must be strictly increasing",
    )
    base_rate = _number("base_rate", design.base_rate)
    _check(0 < base_rate <= 1, f"base_rate = {base_rate} must be in (0, 1]")
    minimum = _integer("minimum", design.minimum)
    _check(minimum >= 2, f"minimum = {minimum}: use at least 2 so every cell has a variance")
    cap = None if design.cap is None else _integer("cap", design.cap)
    _check(
        cap is None or cap >= minimum,
        f"cap = {cap} is below minimum = {minimum}; raise the cap or lower the minimum",
    )
    weeks = _integer("new_version_weeks", design.new_version_weeks)
    _check(weeks >= 0, f"new_version_weeks = {weeks} must be 0 or more")
    boost = _number("boost", design.boost)
    _check(boost >= 1, f"boost = {boost} must be at least 1 (1 = no boost)")
    budget = None if design.budget is None else _integer("budget", design.budget)
    _check(budget is None or budget >= 1, f"budget = {budget} must be at least 1 label")
    prior = _number("prior_error", design.prior_error)
    _check(0 < prior <= 0.5, f"prior_error = {prior} must be in (0, 0.5]")
    share = _number("double_review_share", design.double_review_share)
    _check(0 <= share <= 1, f"double_review_share = {share} must be in [0, 1]")
    allocation = design.allocation
    _check(
        allocation is None or allocation in ALLOCATIONS,
        f"allocation = {allocation!r} is not one of {', '.join(map(repr, ALLOCATIONS))}",
    )
    if allocation == ("neyman" if budget is not None else "proportional"):
        allocation = None  # the default spelled out: one canonical form, one sha256
    return {
        "bands": bands,
        "base_rate": base_rate,
        "minimum": minimum,
        "cap": cap,
        "new_version_weeks": weeks,
        "boost": boost,
        "budget": budget,
        "prior_error": prior,
        "double_review_share": share,
        "allocation": allocation,
    }
