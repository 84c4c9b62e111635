"""Automation candidates: which strata may skip human review above a threshold, and why not.

A stratum is a candidate when (STATS.md sections 6 and 7)

1. it has extractions in the scope (else ``no_coverage``);
2. a threshold is certified (else ``accuracy_below_target`` when no
   candidate threshold even estimates the target, ``too_few_labels``
   otherwise);
3. each of the last K weeks of the window has enough design-based labels
   above it (else ``no_week_evidence``) and is not significantly below the
   target there (else ``unstable_week``);
4. at least one form version certifies on its own labels above it (else
   ``new_form_version_without_evidence``). The candidacy covers only the
   versions that do (``covered_versions``); every other version goes to a human;
5. the bar is approvable: it asks nothing looser than the store's policy
   (else ``not_at_policy``: it passes at these settings, which an approval
   would refuse; :attr:`fieldtrust.store.bar.Bar.loosened` says why).

Every condition is checked at one :class:`~fieldtrust.store.bar.Bar`, passed
whole, so "candidate" means the same thing wherever it is shown.

When the window holds weeks without an audit whose extractions alone exceed
the error allowance, nothing can certify until they are audited or leave the
window (``unaudited_weeks``, ``labels_needed`` None).

The evidence of a candidate is a plain, JSON-ready dict: what a manager's
approval freezes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import duckdb
from fieldtrust.calibration import anytime
from fieldtrust.calibration.certificate import expected_wrong, familywise_delta
from fieldtrust.calibration.closed import ClosedCells, closed_cells, closed_part, store_facts
from fieldtrust.calibration.design import unlabelled_mass
from fieldtrust.calibration.population import StratumData, empty_stratum, load_strata, strata_names
from fieldtrust.calibration.seeds import SeedJudgements, stored_judgements
from fieldtrust.calibration.stability import VersionCheck, WeekCheck, version_checks, week_checks
from fieldtrust.calibration.thresholds import ThresholdPoint, ThresholdResult, select_thresholds
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.provenance import code_version
from fieldtrust.store.rollup import same_extractions
from fieldtrust.store.scope import Scope, last_weeks

#: The closed set of reasons a stratum is not a candidate, with the text shown to people.
REASONS: dict[str, str] = {
    "no_coverage": "no extractions in the selected weeks: nothing to automate",
    "no_labels": (
        "no labels yet: draw an audit sample (fieldtrust sample) and label it"
    ),
    "accuracy_below_target": (
        "accuracy is below the target at every threshold with labels; more labels will not help"
    ),
    "too_few_labels": "too few labels above the best threshold to certify the target",
    "unaudited_weeks": (
        "weeks of the window without an audit hold too many extractions: nothing can certify"
        " until they are audited or leave the window"
    ),
    "no_week_evidence": "a recent week has too few audit labels above the threshold to test",
    "unstable_week": "a recent week is significantly below the target above the threshold",
    "new_form_version_without_evidence": (
        "no form version above the threshold certifies on its own labels"
    ),
    "not_at_policy": "at these settings, not approvable",
    "no_closed_week": (
        "no closed week yet: a week enters the certificate when its sample is drawn"
        " (fieldtrust sample)"
    ),
    "cannot_certify_at_volume": (
        "cannot certify at this volume: even every item above the threshold labelled would not"
        " reach the evidence"
    ),
}


#: How a threshold is certified, as the evidence names it.
METHOD = "learn-then-test, fixed sequence on a 0.005 grid (STATS.md section 6)"


@dataclass(frozen=True)
class CandidateAssessment:
    """Whether one stratum is an automation candidate, the reason if not, and the evidence."""

    doc_type: str
    field: str
    candidate: bool
    reason: str | None  # the first failing condition, a key of REASONS
    reasons: tuple[str, ...]  # every failing condition
    threshold: float | None
    labels_needed: int | None = None  # more labels above `labels_needed_threshold` to certify
    labels_needed_threshold: float | None = None
    weeks_checked: tuple[WeekCheck, ...] = ()
    form_versions: tuple[VersionCheck, ...] = ()
    evidence: dict[str, Any] = dataclass_field(default_factory=dict)
    certified: ThresholdPoint | None = None  # the certified threshold's numbers
    n_population: int = 0
    n_labeled: int = 0
    weeks: tuple[str, ...] = ()  # weeks with extractions (the certification window's)
    audit_weeks: tuple[str, ...] = ()  # weeks of the audit samples behind the labels
    thresholds: ThresholdResult | None = None  # the certificate's walk behind the candidacy

    @property
    def covered_versions(self) -> tuple[str, ...]:
        """The form versions the candidacy covers (certified on their own labels)."""
        if not self.candidate:
            return ()
        return tuple(v.form_version for v in self.form_versions if v.covered)

    @property
    def excluded_versions(self) -> tuple[str, ...]:
        """Material versions above the threshold that did not certify: sent to a human."""
        return tuple(v.form_version for v in self.form_versions if v.material and not v.covered)

    @property
    def reason_text(self) -> str | None:
        if self.reason is None:
            return None
        if self.reason in ("no_week_evidence", "unstable_week"):
            # A week that does not pass has a reason, and only such a week has one.
            failing = [w.reason for w in self.weeks_checked if w.reason is not None]
            return REASONS[self.reason] + (f" ({'; '.join(failing)})" if failing else "")
        if self.reason == "not_at_policy":
            loosened = self.evidence.get("loosened_text") or ""
            return REASONS[self.reason] + (f": {loosened}" if loosened else "")
        if self.reason == "unaudited_weeks":
            uncovered = self.evidence.get("uncovered_weeks") or []
            return REASONS[self.reason] + (f" ({', '.join(uncovered)})" if uncovered else "")
        if self.reason == "cannot_certify_at_volume" and self.evidence.get("labels_needed_reason"):
            return str(self.evidence["labels_needed_reason"])
        return REASONS[self.reason]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: a candidate's evidence, or why a stratum is not one."""
        if self.candidate:
            return dict(self.evidence)
        out = {"doc_type": self.doc_type, "field": self.field, "reason": self.reason,
               "reason_text": self.reason_text, "reasons": list(self.reasons),
               "labels_needed": self.labels_needed,
               "labels_needed_threshold": self.labels_needed_threshold}
        for key in _ANYTIME_NOT_CANDIDATE_KEYS:
            if key in self.evidence:
                out[key] = self.evidence[key]
        return out


#: What a stratum that is not a candidate also says under the anytime certificate.
_ANYTIME_NOT_CANDIDATE_KEYS = ("certificate", "labels_needed_cells", "labels_needed_reason",
                               "open_weeks", "open_weeks_text", "closed_weeks",
                               "unaudited_closed_weeks", "reviewer_misses", "between_week_text")


def assess(
    data: StratumData, thresholds: ThresholdResult, bar: Bar, *, scope: Scope = Scope()
) -> CandidateAssessment:
    """Decide candidacy of one stratum at ``bar`` from its certified threshold and its checks."""
    reasons: list[str] = []
    certified = thresholds.certified
    weeks: list[WeekCheck] = []
    versions: list[VersionCheck] = []
    labels_needed = thresholds.labels_needed
    if data.n_population == 0:
        reasons.append("no_coverage")
    elif data.n_labeled == 0:
        reasons.append("no_labels")
    elif certified is None:
        if _unaudited_share(data) >= 1.0 - bar.target:
            reasons.append("unaudited_weeks")
            labels_needed = None
        else:
            reasons.append("too_few_labels" if thresholds.point else "accuracy_below_target")
    elif certified.coverage <= 0:
        reasons.append("no_coverage")
    if certified is not None:
        weeks = week_checks(data, certified.threshold, bar, window=scope.weeks or None)
        versions = version_checks(data, certified.threshold, bar)
        if not weeks or any(not w.enough_evidence for w in weeks):
            reasons.append("no_week_evidence")
        if any(w.below_target for w in weeks):
            reasons.append("unstable_week")
        if not any(v.covered for v in versions):
            reasons.append("new_form_version_without_evidence")
    if not bar.approvable:
        reasons.append("not_at_policy")
    evidence = _evidence(data, thresholds, weeks, versions, bar, scope, not reasons)
    return _decided(
        data, thresholds, reasons,
        labels_needed=labels_needed,
        labels_needed_threshold=thresholds.labels_needed_threshold if labels_needed else None,
        weeks_checked=tuple(weeks),
        form_versions=tuple(versions),
        evidence=evidence,
        n_labeled=data.n_labeled,
        weeks=tuple(sorted(data.week_hist)),
        audit_weeks=tuple(sorted({c.week for c in data.cells})),
    )


def _decided(
    data: StratumData, thresholds: ThresholdResult, reasons: list[str], **rest: Any
) -> CandidateAssessment:
    """The assessment of ``data`` with ``reasons`` against it (none: a candidate)."""
    certified = thresholds.certified
    return CandidateAssessment(
        doc_type=data.doc_type,
        field=data.field,
        candidate=not reasons,
        reason=reasons[0] if reasons else None,
        reasons=tuple(reasons),
        threshold=certified.threshold if certified else None,
        certified=certified,
        n_population=data.n_population,
        thresholds=thresholds,
        **rest,
    )


def _unaudited_share(data: StratumData) -> float:
    """Share of the stratum's extractions no design cell accounts for (at the lowest threshold)."""
    if data.n_population == 0:
        return 0.0
    return unlabelled_mass(data.design, 0) / data.n_population


def _evidence(
    data: StratumData,
    thresholds: ThresholdResult,
    weeks: list[WeekCheck],
    versions: list[VersionCheck],
    bar: Bar,
    scope: Scope,
    candidate: bool,
) -> dict[str, Any]:
    certified = thresholds.certified
    coverage = data.coverage
    return {
        "doc_type": data.doc_type,
        "field": data.field,
        **bar.values(),
        "approvable": bar.approvable,
        "loosened_text": bar.loosened_text(),
        "method": METHOD,
        "threshold": certified.threshold if certified else None,
        "coverage": certified.coverage if certified else None,
        "labels_above": certified.labels_above if certified else None,
        "accuracy": certified.accuracy if certified else None,
        "accuracy_low": certified.accuracy_low if certified else None,
        "bound_exact_clopper_pearson": certified.exact if certified else None,
        "n_population": data.n_population,
        "n_labeled": data.n_labeled,
        "labels_by_provenance": dict(data.labels_by_provenance),
        "weeks": sorted(data.week_hist),  # the certification window (weeks with extractions)
        "covered_weeks": list(coverage.covered_weeks),
        "uncovered_weeks": list(coverage.uncovered_weeks),
        "n_population_covered": coverage.n_population_covered,
        "coverage_text": coverage.text(),
        "audit_weeks": sorted({c.week for c in data.cells}),
        "weeks_checked": [w.as_dict() for w in weeks],
        "form_versions_checked": [v.as_dict() for v in versions],
        "form_versions": [v.form_version for v in versions if v.covered] if candidate else [],
        "excluded_form_versions": [v.form_version for v in versions
                                   if v.material and not v.covered],
        "code_version": code_version(),
        "scope": {
            "weeks": list(scope.weeks),
            "doc_types": list(scope.doc_types),
            "form_versions": list(scope.form_versions),
            "fields": list(scope.fields),
        },
    }


def automation_candidates(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    bar: Bar | None = None,
    *,
    seeds: Mapping[tuple[str, str], SeedJudgements] | None = None,
    loaded: list[StratumData] | None = None,
) -> list[CandidateAssessment]:
    """Assess every stratum of the store; candidates first, then by (doc_type, field).

    Parameters
    ----------
    scope
        Weeks and filters; certification uses the labels of these weeks. Under
        ``certificate = "anytime"`` the weeks are the horizon's (the store's
        last ``horizon_weeks`` weeks) whatever ``scope`` says: the evidence
        is cumulative over the horizon, never a window that slides.
    bar
        Every setting the certificate and the checks use (STATS.md sections 6
        and 7); None is the store's policy (:func:`fieldtrust.store.bar.resolve_bar`).
    seeds
        Judged and missed seeds per (doc_type, field), for the anytime
        certificate when the bar's ``seed_rate`` is above 0; None reads the
        store's seed verdicts (every caller's path: a policy that seeds its
        samples certifies on its reviewers' measured misses).
    loaded
        The strata with extractions the certificate reads, when the caller
        has read them already (:func:`certificate_jobs`).

    Returns
    -------
    list of CandidateAssessment
        One per (doc_type, field) in the store matching the scope's filters,
        including strata with no extractions in the scope's weeks
        (``no_coverage``). ``evidence`` is JSON-ready.
    """
    bar = resolve_bar(con) if bar is None else bar
    if bar.certificate == "anytime":
        assessments = [assess_anytime(job.data, job.certify(), bar, scope=job.scope)
                       for job in certificate_jobs(con, scope, bar, seeds=seeds, loaded=loaded)]
    else:
        assessments = []
        for data in _strata(con, scope)[1]:
            thresholds = select_thresholds(data.design, data.labels, bar)
            assessments.append(assess(data, thresholds, bar, scope=scope))
    return sorted(assessments, key=lambda a: (not a.candidate, a.doc_type, a.field))


@dataclass(frozen=True)
class CertificateJob:
    """One stratum's anytime certificate, read from the store and not yet computed."""

    data: StratumData
    closed: ClosedCells
    bar: Bar
    delta: float
    seeds: SeedJudgements | None
    scope: Scope  # the horizon's weeks, with the caller's filters

    def certify(self) -> anytime.AnytimeResult:
        """The certificate, kept by its content (:func:`anytime.anytime_certificate`)."""
        return anytime.anytime_certificate(self.closed, self.bar, delta=self.delta,
                                           seeds=self.seeds)


def certificate_jobs(
    con: duckdb.DuckDBPyConnection,
    scope: Scope,
    bar: Bar,
    *,
    seeds: Mapping[tuple[str, str], SeedJudgements] | None = None,
    loaded: list[StratumData] | None = None,
) -> list[CertificateJob]:
    """Every stratum's anytime certificate, ready to compute, by (doc_type, field).

    All of the store is read here: the certificates themselves need no
    connection, so a caller may compute them after closing it (the dashboard's
    server does, at its start, leaving the store to the pages meanwhile).
    ``scope`` and ``seeds`` are :func:`automation_candidates`' own. ``loaded``:
    the caller's strata read in ``scope``, used when they hold what the
    horizon holds (a store younger than the horizon), so the rows are read once.
    """
    window = scope
    scope = horizon_scope(con, bar, window)
    if loaded is not None and not same_extractions(con, window, scope):
        loaded = None
    loaded, strata = _strata(con, scope, loaded)
    facts = store_facts(con, loaded)
    delta = stratum_delta(bar, len(loaded))  # the strata with extractions share it
    if seeds is None and bar.seed_rate > 0:
        seeds = stored_judgements(con)
    return [CertificateJob(data, closed_cells(data, facts), bar, delta,
                           (seeds or {}).get((data.doc_type, data.field)), scope)
            for data in strata]


def horizon_scope(con: duckdb.DuckDBPyConnection, bar: Bar, scope: Scope) -> Scope:
    """The anytime certificate's weeks (the store's last ``horizon_weeks``), ``scope``'s filters."""
    return Scope(weeks=last_weeks(con, bar.horizon_weeks), doc_types=scope.doc_types,
                 form_versions=scope.form_versions, fields=scope.fields)


def _strata(con: duckdb.DuckDBPyConnection, scope: Scope,
            read: list[StratumData] | None = None) -> tuple[list[StratumData], list[StratumData]]:
    """The strata with extractions in the scope (``read`` when given), and every stratum it
    selects by (doc_type, field): an empty one where it has none in its weeks (``no_coverage``)."""
    loaded = {(s.doc_type, s.field): s for s in (load_strata(con, scope) if read is None
                                                  else read)}
    # Without a weeks filter every stratum the filters select has extractions.
    names = set(strata_names(con, scope)) | set(loaded) if scope.weeks else set(loaded)
    return list(loaded.values()), [loaded.get(name) or empty_stratum(*name)
                                   for name in sorted(names)]


def stratum_delta(bar: Bar, n_strata: int) -> float:
    """Each stratum's ``delta``: the bar's, or its share of it under ``familywise = 1``."""
    delta = 1.0 - bar.confidence
    return familywise_delta(delta, n_strata) if bar.familywise and n_strata else delta


def assess_anytime(
    data: StratumData, result: anytime.AnytimeResult, bar: Bar, *, scope: Scope = Scope()
) -> CandidateAssessment:
    """Candidacy of one stratum under the anytime certificate (its closed weeks only)."""
    closed = result.closed
    thresholds = result.thresholds
    certified = thresholds.certified
    reasons: list[str] = []
    versions: list[VersionCheck] = []
    reason = result.labels_needed_reason or ""
    if data.n_population == 0:
        reasons.append("no_coverage")
    elif closed.n_population == 0:
        reasons.append("no_closed_week")
    elif closed.n_labels == 0:
        reasons.append("no_labels")
    elif certified is None:
        if "no audit accounts for" in reason:
            reasons.append("unaudited_weeks")
        elif reason.startswith("cannot certify"):
            reasons.append("cannot_certify_at_volume")
        else:
            reasons.append("too_few_labels" if thresholds.point else "accuracy_below_target")
    if certified is not None:
        # Each form version on its own labels, on the closed weeks only (the open
        # week is nobody's evidence): a check that can only remove versions.
        versions = version_checks(closed_part(data, closed.weeks), certified.threshold, bar)
        if not result.enough_evidence:
            reasons.append("no_week_evidence")
        if result.unstable:
            reasons.append("unstable_week")
        if not any(v.covered for v in versions):
            reasons.append("new_form_version_without_evidence")
    if not bar.approvable:
        reasons.append("not_at_policy")
    evidence = _evidence(data, thresholds, list(result.weeks_checked), versions, bar, scope,
                         not reasons)
    evidence.update(result.evidence())
    evidence.update(method=anytime.METHOD, uncovered_weeks=list(closed.unaudited_weeks),
                    bound_exact_clopper_pearson=None)
    return _decided(
        data, thresholds, reasons,
        labels_needed=thresholds.labels_needed,
        labels_needed_threshold=thresholds.labels_needed_threshold,
        weeks_checked=result.weeks_checked,
        form_versions=tuple(versions),
        evidence=evidence,
        n_labeled=closed.n_labels,
        weeks=closed.weeks,
        audit_weeks=tuple(sorted({c.week for c in closed.cells})),
    )


def across_strata(assessments: list[CandidateAssessment], bar: Bar) -> dict[str, Any]:
    """What is promised across the strata shown: per stratum, and wrong certificates expected.

    Each certified stratum is wrong with probability at most its ``delta``
    (at every look of the horizon under the anytime certificate, at this one
    look under the fixed one); among those shown the expected number of wrong
    certificates is at most the sum of their deltas (:func:`expected_wrong`).
    Under ``familywise = 1`` each is certified at ``delta / K``, so the chance
    of any wrong one is at most ``delta``.
    """
    shown = [a for a in assessments if a.n_population > 0]
    delta = stratum_delta(bar, len(shown)) if bar.certificate == "anytime" else (
        1.0 - bar.confidence)
    certified = [a for a in shown if a.threshold is not None]
    wrong = expected_wrong([delta] * len(certified))
    looks = ("at every weekly look over the horizon of"
             f" {bar.horizon_weeks} weeks") if bar.certificate == "anytime" else "at this look"
    text = (f"each certified stratum: accuracy above its threshold at least {bar.target:.0%}"
            f" with probability at least {1.0 - delta:.2%}, {looks}; among the"
            f" {len(certified)} certified of {len(shown)} strata shown, at most {wrong:.2f}"
            " wrong certificates expected")
    if bar.certificate == "anytime" and bar.familywise:
        text += f"; the chance of any wrong one is at most {1.0 - bar.confidence:.0%}"
    return {"certificate": bar.certificate, "familywise": bool(bar.familywise),
            "delta_per_stratum": delta, "strata_shown": len(shown),
            "certified_shown": len(certified), "expected_wrong_certificates": wrong,
            "text": text}
