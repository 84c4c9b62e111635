"""What a verdict form holds, turned into the label fields a verdict is recorded with.

The dashboard has two such forms: the review page (a reviewer's verdict) and
the adjudication on the weekly audit page (a QA lead's). Both read the same
widgets (corrected value, "field absent", error type, detail) and pass them
through :func:`form_fields`, so one form means one verdict wherever it is
filled in; :func:`fieldtrust.labels.verdicts.record_verdict` and
:func:`fieldtrust.labels.agreement.adjudicate` then hold it to the same rules.
"""

from __future__ import annotations


def form_fields(
    verdict: str,
    *,
    corrected_value: str | None = "",
    field_absent: bool = False,
    error_type: str | None = None,
    error_detail: str | None = "",
) -> dict[str, str | None]:
    """The keyword arguments ``record_verdict`` / ``adjudicate`` take for a filled form.

    Only an ``incorrect`` verdict carries a correction and an error type; for
    the others the form's other widgets are ignored (they may be left from a
    previous item). Blank text counts as not given. "Field absent" records
    ``corrected_status='null'``; a value typed as well is passed on, so the
    library refuses the contradiction in its own words rather than one of
    the two being dropped silently.
    """
    if verdict != "incorrect":
        return {}
    value = (corrected_value or "").strip()
    detail = (error_detail or "").strip()
    return {
        "corrected_value": value or None,
        "corrected_status": "null" if field_absent else None,
        "error_type": error_type,
        "error_detail": detail or None,
    }
