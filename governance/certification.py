"""Certification: whether a stratum may be automated, computed from the store.

The one function every decision calls for its evidence
(:func:`fieldtrust.governance.acts.approve` and ``reject``). It certifies the
whole stratum, every form version, over the certification window (the last
``weeks`` ISO weeks of the store, a policy setting), whatever filters a
report or a dashboard page shows, at the store's policy settings
(:func:`fieldtrust.store.policy_settings.current_policy_settings`). A
caller's :class:`Criteria` (flags, environment, TOML) may make it stricter,
never looser: a looser request is refused. The statistics are
:mod:`fieldtrust.calibration.candidates`' (STATS.md sections 6 and 7).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol, cast

import duckdb
from fieldtrust.calibration.candidates import METHOD, REASONS, automation_candidates
from fieldtrust.governance.evidence import Certification
from fieldtrust.store.policy_settings import (
    DEFAULT_POLICY,
    PolicyChanges,
    PolicySettings,
    current_policy_settings,
)
from fieldtrust.store.scope import Scope, last_weeks

from fieldtrust.errors import Refused


class _CriteriaSource(Protocol):
    @property
    def target(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def n_min(self) -> int: ...
    @property
    def stability_weeks(self) -> int: ...
    @property
    def weeks(self) -> int | None: ...


#: Settings a caller may raise (stricter is higher) or, for version_share, lower.
HIGHER_IS_STRICTER: tuple[str, ...] = (
    "target", "confidence", "n_min", "stability_weeks", "min_week_labels",
)
LOWER_IS_STRICTER: tuple[str, ...] = ("version_share",)


@dataclass(frozen=True)
class Criteria:
    """What a caller asks of certification beyond the store's policy; None asks nothing.

    Every value given must be at least as strict as the store's policy
    setting of the same name (higher, or lower for ``version_share``), and
    ``weeks`` must be the policy's window; :func:`certify` refuses anything
    looser, naming the setting.
    """

    target: float | None = None
    confidence: float | None = None
    n_min: int | None = None
    stability_weeks: int | None = None
    version_share: float | None = None
    min_week_labels: int | None = None
    weeks: int | None = None
    source: str = "your settings"  # named in refusals: where the values came from

    @classmethod
    def of(cls, settings: _CriteriaSource, source: str = "your settings") -> Criteria:
        """The criteria a :class:`fieldtrust.settings.Settings` asks for.

        A setting left at its built-in default (the same as the store's
        default policy) asks for nothing: the store's policy decides. One set
        to another value, by a flag, the environment or the TOML file, is a
        request, honoured when stricter and refused when looser.
        """
        asked = {
            name: getattr(settings, name)
            for name in ("target", "confidence", "n_min", "stability_weeks", "weeks")
            if getattr(settings, name) is not None
            and getattr(settings, name) != getattr(DEFAULT_POLICY, name)
        }
        return cls(**asked, source=source)

    def asked(self) -> PolicyChanges:
        """The values given (not None), by setting name."""
        # Every field but source is a policy setting of the same name and type.
        return cast(PolicyChanges, {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if f.name != "source" and getattr(self, f.name) is not None
        })


def held_to(policy: PolicySettings, criteria: Criteria | None) -> PolicySettings:
    """The settings a certification uses: ``policy`` made stricter by ``criteria``.

    Raises
    ------
    Refused
        A value of ``criteria`` is looser than the policy's (or ``weeks`` is
        not the policy's window); the message names the setting, both values
        and how an admin changes the policy.
    """
    if criteria is None:
        return policy
    asked = criteria.asked()
    for name, value in asked.items():
        current = getattr(policy, name)
        if name == "weeks":
            looser = value != current
            relation = "is not the store's policy window"
        elif name in LOWER_IS_STRICTER:
            looser = value > current
            relation = "is looser than the store's policy"
        else:
            looser = value < current
            relation = "is looser than the store's policy"
        if looser:
            flag = "--" + name.replace("_", "-")
            raise Refused(
                f"{name} {value} (from {criteria.source}) {relation} ({current}):"
                " approvals use the store's policy; an admin changes it with"
                f" `fieldtrust policy settings {flag} {value} --as ADMIN`"
                f" (see `fieldtrust policy settings`)"
            )
    stricter = dataclasses.replace(policy, **asked)
    if stricter.stability_weeks > stricter.weeks:
        raise Refused(
            f"stability_weeks {stricter.stability_weeks} (from {criteria.source}) is longer than"
            f" the store's policy window ({stricter.weeks} weeks); ask for at most"
            f" {stricter.weeks}"
        )
    return stricter


def certify(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    criteria: Criteria | None = None,
) -> Certification:
    """Certify the whole (doc_type, field) from the store, as a decision freezes it.

    At the store's policy settings, over its window (the store's last
    ``weeks`` weeks), made stricter by ``criteria`` where it asks.

    Raises
    ------
    Refused
        ``criteria`` asks for something looser than the store's policy, or
        the store has no such stratum.
    """
    policy = current_policy_settings(con)
    held = held_to(policy, criteria)
    window = _window(con, held.weeks)
    scope = Scope(weeks=window, doc_types=(doc_type,), fields=(field,))
    assessments = automation_candidates(
        con, scope, target=held.target, confidence=held.confidence,
        n_min=held.n_min, stability_weeks=held.stability_weeks,
        version_share=held.version_share, min_week_labels=held.min_week_labels,
        prior_error=held.prior_error,
    )
    match = next((a for a in assessments if (a.doc_type, a.field) == (doc_type, field)), None)
    if match is None:
        raise Refused(
            f"no extractions of doc_type {doc_type!r}, field {field!r} in the store;"
            " check the spelling (`fieldtrust info`)"
        )
    point = match.certified
    return Certification(
        candidate=match.candidate,
        reasons=match.reasons,
        threshold=match.threshold,
        target=held.target,
        confidence=held.confidence,
        n_min=held.n_min,
        stability_weeks=held.stability_weeks,
        window=window,
        method=METHOD,
        coverage=point.coverage if point else None,
        labels_above=point.labels_above if point else None,
        accuracy=point.accuracy if point else None,
        accuracy_low=point.accuracy_low if point else None,
        bound_exact_clopper_pearson=point.exact if point else None,
        n_population=match.n_population,
        n_labeled=match.n_labeled,
        weeks=match.weeks,
        audit_weeks=match.audit_weeks,
        weeks_checked=match.weeks_checked,
        form_versions=match.form_versions,
        covered_versions=match.covered_versions,
        policy=policy.as_dict(),
        stricter=criteria.asked() if criteria is not None else {},
        held_to=held.values(),
    )


def reason_text(certification: Certification) -> str:
    """Why a certification is not a candidate, in the words of calibration's reasons."""
    first = certification.reasons[0] if certification.reasons else ""
    return REASONS.get(first, first or "not certified")


def _window(con: duckdb.DuckDBPyConnection, weeks: int) -> tuple[str, ...]:
    # A cursor of its own: store.scope.latest_week leaves a fetchone() result open.
    cursor = con.cursor()
    try:
        return last_weeks(cursor, weeks)
    finally:
        cursor.close()
