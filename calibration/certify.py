"""Certify one whole stratum from the store at the store's policy settings: what an approval calls.

An approval must rest on evidence fieldtrust computed itself, for the whole
stratum, at settings no flag or environment variable can loosen (STATS.md
sections 6 and 7). :func:`certify_stratum` is that computation: it reads
the policy settings from the store, takes the window of the last
``weeks`` weeks of the store (the only filter), and returns a typed
:class:`Certification` whose ``evidence`` a decision freezes and whose
``form_versions`` the approval and the exported policy name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.calibration.candidates import CandidateAssessment, automation_candidates
from fieldtrust.calibration.errors import CalibrationInputError
from fieldtrust.store.policy_settings import PolicySettings, current_policy_settings
from fieldtrust.store.scope import Scope, last_weeks


@dataclass(frozen=True)
class Certification:
    """The certification of one whole stratum, ready to be frozen by an approval.

    Attributes
    ----------
    doc_type, field
        The stratum.
    settings
        The policy settings it was computed at (from the store).
    window
        The weeks certified on (the last ``settings.weeks`` of the store).
    assessment
        The candidacy with every check.
    evidence
        JSON-ready dict: the assessment's evidence plus ``settings`` and
        ``window``; ``evidence_sha256`` hashes its canonical JSON.
    """

    doc_type: str
    field: str
    settings: PolicySettings
    window: tuple[str, ...]
    assessment: CandidateAssessment
    evidence: dict[str, Any]

    @property
    def candidate(self) -> bool:
        return bool(self.assessment.candidate)

    @property
    def threshold(self) -> float | None:
        """The certified threshold; an approval's threshold must be at or above it."""
        threshold = self.assessment.threshold
        return None if threshold is None else float(threshold)

    @property
    def form_versions(self) -> tuple[str, ...]:
        """Form versions the candidacy covers; production sends any other version to a human."""
        return tuple(str(v) for v in self.assessment.covered_versions)

    @property
    def evidence_sha256(self) -> str:
        return evidence_sha256(self.evidence)


def evidence_sha256(evidence: dict[str, Any]) -> str:
    """SHA-256 of the evidence as canonical JSON (sorted keys, compact)."""
    text = json.dumps(evidence, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def certify_stratum(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    *,
    settings: PolicySettings | None = None,
) -> Certification:
    """Certify the whole (doc_type, field) over the store's window at the store's policy settings.

    Parameters
    ----------
    con
        Store connection (read-only is enough).
    doc_type, field
        The stratum; no other filter (form version, dashboard scope) applies.
    settings
        Default (and what an approval must use): the store's
        :func:`~fieldtrust.store.policy_settings.current_policy_settings`.
        A report may pass stricter settings.

    Raises
    ------
    CalibrationInputError
        The store has no extractions of that stratum.

    References
    ----------
    STATS.md sections 6 and 7.
    """
    policy = settings or current_policy_settings(con)
    window = last_weeks(con, policy.weeks)
    scope = Scope(weeks=window, doc_types=(doc_type,), fields=(field,))
    found = [a for a in automation_candidates(
        con, scope, target=policy.target, confidence=policy.confidence, n_min=policy.n_min,
        stability_weeks=policy.stability_weeks, version_share=policy.version_share,
        min_week_labels=policy.min_week_labels, prior_error=policy.prior_error,
    ) if (a.doc_type, a.field) == (doc_type, field)]
    if not found:
        raise CalibrationInputError(
            f"no extractions for doc_type {doc_type!r}, field {field!r} in the store;"
            " check the names with `fieldtrust calibrate`"
        )
    assessment = found[0]
    evidence = {**assessment.evidence, "settings": policy.values(),
                "settings_set_by": policy.set_by, "window": list(window),
                "certified_by": "fieldtrust.calibration.certify.certify_stratum"}
    return Certification(doc_type, field, policy, window, assessment, evidence)
