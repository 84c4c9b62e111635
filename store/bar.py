"""The bar: every setting an estimate, a certificate, a candidacy or an approval is held to.

:class:`Bar` is one frozen value, declared once here: each setting with its
default, its help line, the values it allows and which way is stricter. The
store keeps the policy's bar (table ``policy_settings``: a chained row per
change, the newest in force, only an admin writes one through
:func:`fieldtrust.governance.bar_admin.set_policy_settings`); a store without a
row holds :data:`DEFAULT_POLICY`.

:func:`resolve_bar` is the one resolver. It lays a caller's :class:`Criteria`
(the bar settings asked for by flags, ``FIELDTRUST_*`` variables or the TOML
file, each with where it came from) over the store's policy and returns the
bar whole. An ask that is stricter than the policy is honoured; one that is
looser (or, for a setting that must be the policy's, different) is kept too,
so a view shows what it was asked, but recorded in :attr:`Bar.loosened`: a
bar with anything loosened is *not approvable*. Passing it makes no
candidate, only "at these settings, not approvable"; an approval refuses it
(:meth:`Bar.for_approval`). Every caller (the CLI, the dashboard, governance,
revocation) goes through :func:`resolve_bar`, and every computation takes the
bar whole, never its values one by one.

Adding a setting: a field of :class:`Bar` (default, help line, rule,
direction), a column of ``policy_settings`` (a migration), its row in
docs/settings.md. The ``policy settings`` options, the settings file and the
environment, the evidence and the dashboard read the fields.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import duckdb
from fieldtrust.store.scope import MAX_WEEKS

from fieldtrust.errors import InputError, Refused

#: Which way a setting is stricter: a higher value, a lower one, or only the policy's own.
Direction = Literal["higher", "lower", "same"]

Value = float | int | str


@dataclass(frozen=True)
class Range:
    """The values a setting allows: a number between two ends, each open or closed."""

    low: float
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    unit: str = ""

    def allows(self, value: float) -> bool:
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    @property
    def text(self) -> str:
        """The rule in words, as messages end: ``strictly between 0 and 1``."""
        unit = f" {self.unit}" if self.unit else ""
        if math.isinf(self.high):
            return f"at least {_number(self.low)}{unit}"
        if self.open_low and self.open_high:
            return f"strictly between {_number(self.low)} and {_number(self.high)}{unit}"
        if not self.open_low and not self.open_high:
            return f"between {_number(self.low)} and {_number(self.high)}{unit}"
        left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"


@dataclass(frozen=True)
class Choice:
    """The values a text setting allows: one of a closed set."""

    options: tuple[str, ...]

    def allows(self, value: object) -> bool:
        return value in self.options

    @property
    def text(self) -> str:
        """The rule in words: ``one of 'fixed', 'anytime'``."""
        return "one of " + ", ".join(repr(o) for o in self.options)


Rule = Range | Choice


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _setting(default: Value, help: str, rule: Rule, stricter: Direction) -> Any:
    return field(default=default, metadata={"help": help, "rule": rule, "stricter": stricter})


_FRACTION = Range(0, 1, open_low=True, open_high=True)
_COUNT = Range(1)
_WEEKS = Range(1, MAX_WEEKS, unit="weeks")


@dataclass(frozen=True)
class Loosened:
    """One setting a bar asks for that the store's policy does not allow an approval."""

    name: str
    asked: Value
    policy: Value
    source: str  # where the ask came from: a flag, an environment variable, a file

    def text(self) -> str:
        """``target 0.9 (from --target) is looser than the store's policy (0.95)``."""
        same = setting_direction(self.name) == "same"
        relation = "is not the store's policy" if same else "is looser than the store's policy"
        return f"{self.name} {self.asked} (from {self.source}) {relation} ({self.policy})"


@dataclass(frozen=True)
class Bar:
    """The bar for automation: every setting a certificate, a candidacy or an approval uses.

    Each field but :attr:`loosened` is a setting (``SETTINGS``); its help line,
    allowed values and direction are the field's metadata
    (:func:`setting_help`, :func:`setting_rule`, :func:`setting_direction`).
    Build one with :func:`resolve_bar` (the store's policy and a caller's asks);
    ``Bar()`` is the default policy.
    """

    target: float = _setting(0.95, "Accuracy an automated stratum must reach above its"
                             " threshold.", _FRACTION, "higher")
    confidence: float = _setting(0.95, "Confidence (1 - delta) of every certificate, test and"
                                 " interval.", _FRACTION, "higher")
    n_min: int = _setting(100, "Labels above a threshold before it is tested.", _COUNT,
                          "higher")
    stability_weeks: int = _setting(4, "Recent weeks of the window each tested on its own.",
                                    _WEEKS, "higher")
    version_share: float = _setting(0.05, "Share above the threshold that makes a form"
                                    " version material.", Range(0, 1, open_low=True), "lower")
    min_week_labels: int = _setting(50, "Design-based labels above the threshold each stable"
                                    " week needs.", _COUNT, "higher")
    prior_error: float = _setting(0.03, "Error rate that chooses where the walk starts (label"
                                  " counts only).", Range(0, 1, open_high=True), "same")
    weeks: int = _setting(8, "The certification window: the store's last N weeks.", _WEEKS,
                          "same")
    horizon_weeks: int = _setting(52, "Weeks over which a certificate's error guarantee holds"
                                  " whatever the weekly looks.", _WEEKS, "higher")
    max_own_label_share: float = _setting(1.0, "Largest share of a stratum's design-based"
                                          " labels its approver may have given (1: any, with"
                                          " a warning when all are theirs).", Range(0, 1),
                                          "lower")
    certificate: str = _setting("anytime", "Which certificate certifies: 'anytime' (valid at"
                                " every weekly look) or 'fixed' (one look, thinned bound).",
                                Choice(("fixed", "anytime")), "same")
    familywise: int = _setting(0, "1: certify each of the K strata shown at delta / K, so the"
                               " chance of any wrong certificate is at most delta.",
                               Range(0, 1), "higher")
    seed_rate: float = _setting(0.0, "Share of each sample seeded with known wrong values; 0:"
                                " reviewer misses are not allowed for.",
                                Range(0, 0.5), "higher")
    #: Not a setting: what this bar asks that the store's policy does not allow an
    #: approval (empty for the policy itself and for a stricter bar).
    loosened: tuple[Loosened, ...] = ()

    def __post_init__(self) -> None:
        for name in SETTINGS:
            problem = setting_problem(name, getattr(self, name))
            if problem:
                raise InputError(f"bar setting {name} = {getattr(self, name)!r} {problem}")

    @property
    def approvable(self) -> bool:
        """Nothing loosened: passing this bar is passing the store's policy (or more)."""
        return not self.loosened

    def values(self) -> dict[str, Value]:
        """The settings by name, in declaration order: what evidence records."""
        return {name: getattr(self, name) for name in SETTINGS}

    def loosened_text(self) -> str:
        """Every loosened setting in one clause (empty when approvable)."""
        return "; ".join(item.text() for item in self.loosened)

    def asking(self, criteria: Criteria | None) -> Bar:
        """This bar (the store's policy) with ``criteria``'s asks laid over it.

        Stricter asks are honoured; looser ones are used too but recorded in
        :attr:`loosened`. An asked ``stability_weeks`` longer than the window
        cannot be met: an :class:`InputError` says so.
        """
        if criteria is None or not criteria.asks:
            return self
        loosened = [
            Loosened(a.name, a.value, getattr(self, a.name), a.source)
            for a in criteria.asks if _looser(a.name, a.value, getattr(self, a.name))
        ]
        asked = self.replaced(criteria.asked(), loosened=tuple(loosened))
        stability = next((a for a in criteria.asks if a.name == "stability_weeks"), None)
        if stability is not None and asked.stability_weeks > asked.weeks:
            raise InputError(
                f"stability_weeks {stability.value} (from {stability.source}) is longer than"
                f" the window ({asked.weeks} weeks); ask for at most {asked.weeks}"
            )
        return asked

    def for_approval(self) -> Bar:
        """This bar, if an approval may use it; else a :class:`Refused` naming what is looser."""
        if self.loosened:
            first = self.loosened[0]
            flag = "--" + first.name.replace("_", "-")
            raise Refused(
                f"{first.text()}: approvals use the store's policy; an admin changes it with"
                f" `fieldtrust policy settings {flag} {first.asked} --as ADMIN`"
                " (see `fieldtrust policy settings`)"
            )
        return self

    def policy_or_stricter(self) -> Bar:
        """This bar with every loosened setting back at the policy's value (revocation's bar)."""
        if not self.loosened:
            return self
        return self.replaced({item.name: item.policy for item in self.loosened}, loosened=())

    def replaced(self, values: Mapping[str, Value], *, loosened: tuple[Loosened, ...] = ()) -> Bar:
        """This bar with some settings replaced (checked, as every bar is)."""
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise InputError(
                f"no bar setting {unknown[0]!r}; the settings are {', '.join(SETTINGS)}"
            )
        changes: dict[str, Any] = dict(values)
        return dataclasses.replace(self, **changes, loosened=loosened)


#: The settings of a :class:`Bar`, in declaration order (the columns of ``policy_settings``).
SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(Bar) if "help" in f.metadata)
_FIELDS = {f.name: f for f in fields(Bar) if f.name in SETTINGS}


def setting_help(name: str) -> str:
    """The help line of a bar setting."""
    return str(_field(name).metadata["help"])


def setting_rule(name: str) -> Rule:
    """The values a bar setting allows."""
    rule: Rule = _field(name).metadata["rule"]
    return rule


def setting_direction(name: str) -> Direction:
    """Which way a bar setting is stricter."""
    direction: Direction = _field(name).metadata["stricter"]
    return direction


def setting_type(name: str) -> type:
    """The Python type of a bar setting's values (``int``, ``float`` or ``str``)."""
    return type(_field(name).default)


def setting_default(name: str) -> Value:
    """The default (the default policy's value) of a bar setting."""
    default: Value = _field(name).default  # type: ignore[assignment]  # every setting has one
    return default


def setting_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` for bar setting ``name`` (``must be at least 1``), or None."""
    kind = setting_type(name)
    rule = setting_rule(name)
    if isinstance(rule, Choice):
        return None if rule.allows(value) else f"must be {rule.text}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number ({kind.__name__})"
    if kind is int and not isinstance(value, int):
        return "must be a whole number"
    return None if rule.allows(value) else f"must be {rule.text}"


def _field(name: str) -> dataclasses.Field[Any]:
    try:
        return _FIELDS[name]
    except KeyError:
        raise InputError(
            f"no bar setting {name!r}; the settings are {', '.join(SETTINGS)}"
        ) from None


def _looser(name: str, asked: Value, policy: Value) -> bool:
    direction = setting_direction(name)
    if isinstance(asked, str) or isinstance(policy, str):
        return asked != policy
    if direction == "higher":
        return asked < policy
    if direction == "lower":
        return asked > policy
    return asked != policy


@dataclass(frozen=True)
class Ask:
    """One bar setting a caller asks for, and where the ask came from (named in messages)."""

    name: str
    value: Value
    source: str


@dataclass(frozen=True)
class Criteria:
    """What a caller asks of the bar beyond the store's policy: some settings, each with its source.

    Built by the settings loader (:mod:`fieldtrust.settings`) from a TOML
    file, ``FIELDTRUST_*`` variables and flags, or in Python with
    :meth:`of`. A setting not asked is the store's policy's.
    """

    asks: tuple[Ask, ...] = ()

    def __post_init__(self) -> None:
        for ask in self.asks:
            problem = setting_problem(ask.name, ask.value)
            if problem:
                raise InputError(
                    f"setting {ask.name} (from {ask.source}): {ask.value!r} {problem}"
                )
        names = [a.name for a in self.asks]
        if len(set(names)) != len(names):
            raise InputError(f"a bar setting is asked twice: {', '.join(names)}")

    @classmethod
    def of(cls, source: str = "your settings", **values: Value) -> Criteria:
        """``Criteria.of(target=0.97)``: these settings asked, from ``source``."""
        return cls(tuple(Ask(name, value, source) for name, value in values.items()))

    def asked(self) -> dict[str, Value]:
        """The values asked, by setting name."""
        return {a.name: a.value for a in self.asks}

    def over(self, below: Criteria) -> Criteria:
        """These asks laid over ``below``'s: an ask here replaces one of the same name."""
        mine = {a.name for a in self.asks}
        return Criteria(tuple(a for a in below.asks if a.name not in mine) + self.asks)

    def to_list(self) -> list[dict[str, Any]]:
        """The JSON form: one ``{"name", "value", "source"}`` per ask."""
        return [dataclasses.asdict(a) for a in self.asks]

    @classmethod
    def from_list(cls, records: list[Mapping[str, Any]]) -> Criteria:
        """Read :meth:`to_list`'s form back."""
        return cls(tuple(Ask(str(r["name"]), r["value"], str(r["source"])) for r in records))


@dataclass(frozen=True)
class PolicyBar:
    """The store's policy: its bar, and who set it and when (None for the defaults)."""

    bar: Bar
    set_by: str | None = None
    set_at: dt.datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """The settings with who set them and when, JSON-ready (what evidence freezes)."""
        return {**self.bar.values(), "set_by": self.set_by,
                "set_at": self.set_at.isoformat() if self.set_at else None}


#: What a store without a ``policy_settings`` row holds.
DEFAULT_POLICY = PolicyBar(Bar())

#: Settings whose default changed after their column was added: what a policy
#: row written before the column held. An admin signed that row when the one-look
#: certificate certified; it keeps certifying so until an admin changes it
#: (a store without any policy row takes today's default).
_DEFAULTS_BEFORE: dict[str, Value] = {"certificate": "fixed"}


def policy_bar(con: duckdb.DuckDBPyConnection) -> PolicyBar:
    """The store's policy in force: the newest ``policy_settings`` row, else :data:`DEFAULT_POLICY`.

    A column that is NULL belongs to a setting added after its row was written:
    that row held the setting's default of the time (:data:`_DEFAULTS_BEFORE`
    where the default has changed since, else today's).
    """
    columns = ", ".join(SETTINGS)
    rows = con.execute(
        f"SELECT {columns}, set_by, set_at FROM policy_settings"
        " ORDER BY set_at DESC, setting_id DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return DEFAULT_POLICY
    *values, set_by, set_at = rows[0]
    given: dict[str, Any] = {}  # each value checked by the Bar
    for name, value in zip(SETTINGS, values, strict=True):
        if value is None:
            value = _DEFAULTS_BEFORE.get(name)
        if value is not None:
            given[name] = value
    return PolicyBar(Bar(**given), set_by, set_at)


def resolve_bar(con: duckdb.DuckDBPyConnection, criteria: Criteria | None = None) -> Bar:
    """The bar a view, a certificate or an approval is held to: the store's policy, then the asks.

    Parameters
    ----------
    criteria
        What the caller asks (flags, environment, TOML); None asks nothing.

    Returns
    -------
    Bar
        The store's policy with the asks laid over it; ``loosened`` names the
        asks looser than the policy (then the bar is not approvable).

    Raises
    ------
    InputError
        An asked ``stability_weeks`` is longer than the window.
    """
    return policy_bar(con).bar.asking(criteria)
