"""The error taxonomy: why an extraction was wrong, in a few words a reviewer picks.

Small on purpose: a reviewer decides in seconds, and the error report
(:mod:`fieldtrust.labels.errors_report`) counts these per (doc_type, field,
form_version), so a systematic pattern such as "tax filled from the total on
form v3" stands out. Anything that fits none of them is ``other`` with a
detail line, which the QA lead reads to decide whether a new type is due.
"""

from __future__ import annotations

from types import MappingProxyType

#: Error type -> what it means (shown to reviewers and in docs/review.md).
ERROR_TYPES: MappingProxyType[str, str] = MappingProxyType(
    {
        "misread_characters": "The right spot was read, but characters are wrong"
        " (OCR-like: 8 for B, a dropped digit, a swapped letter).",
        "wrong_field": "The value belongs to another field of the document"
        " (the due date given as the invoice date).",
        "value_not_in_document": "The value appears nowhere in the document (made up).",
        "total_copied_into_tax": "The document total (or another amount) was copied"
        " into the tax field.",
        "normalisation": "The right value, badly normalised (date order, decimal"
        " separator, currency, units, case).",
        "missing_value": "The field is filled in the document, but the extraction"
        " said it was absent or unreadable.",
        "other": "None of the above; say what in the detail.",
    }
)

#: The error type of an 'incorrect' label given without one (key 2 alone, a QA
#: sheet of verdicts only): :mod:`fieldtrust.labels.verdict_rule`. Never a
#: guess; the error report shows it as it is, so nobody reads it as a known cause.
NOT_RECORDED = "not_recorded"

#: What the corrected value is, mirroring extractions.value_status.
CORRECTED_STATUSES: MappingProxyType[str, str] = MappingProxyType(
    {
        "present": "The document holds this value (corrected_value).",
        "null": "The field is absent from the document (corrected_value is empty).",
        "unclear": "The field is there but cannot be read (corrected_value is empty).",
        "other": "Something else, described in corrected_value (e.g. 'see attachment').",
    }
)
