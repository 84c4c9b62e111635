"""The error taxonomy: why an extraction was wrong, in a few words a reviewer picks.

Small on purpose: a reviewer decides in seconds, and the error report
(:mod:`fieldtrust.labels.errors_report`) counts these per (doc_type, field,
form_version), so a systematic pattern such as "tax filled from the total on
form v3" stands out. Anything that fits none of them is ``other`` with a
detail line, which the QA lead reads to decide whether a new type is due.
"""

from __future__ import annotations

from types import MappingProxyType

from fieldtrust.errors import FieldError

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

#: The error type of an imported 'incorrect' label whose history names none
#: (a QA sheet of verdicts only). Never offered to a reviewer; the error
#: report shows it as it is, so nobody reads it as a known cause.
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


def check_error(error_type: str | None, error_detail: str | None) -> tuple[str, str | None]:
    """Validate an error type and its detail; return them cleaned.

    ``other`` needs a non-empty detail; the others take an optional one.
    """
    if error_type is None:
        raise FieldError(
            "error_type",
            f"error_type is missing: an 'incorrect' verdict needs one of {', '.join(ERROR_TYPES)}",
        )
    if error_type not in ERROR_TYPES:
        raise FieldError(
            "error_type",
            f"error_type {error_type!r} is not in the taxonomy; pick one of"
            f" {', '.join(ERROR_TYPES)}"
        )
    detail = error_detail.strip() if error_detail else None
    if error_type == "other" and not detail:
        raise FieldError(
            "error_detail",
            "error_type 'other' needs error_detail: say in a few words what was wrong",
        )
    return error_type, detail or None


def check_correction(
    corrected_value: str | None, corrected_status: str | None
) -> tuple[str | None, str]:
    """Validate the corrected value of an 'incorrect' verdict; return (value, status).

    A value alone means status ``present``. Without a value the status must say
    which absence it is (``null`` = field absent, ``unclear`` = unreadable), so
    "absent" is never confused with "not filled in by the reviewer".
    """
    if corrected_status is None:
        if corrected_value is None:
            raise FieldError(
                "corrected_status",
                "an 'incorrect' verdict without corrected_value needs corrected_status:"
                " 'null' if the field is absent from the document, 'unclear' if unreadable"
            )
        corrected_status = "present"
    if corrected_status not in CORRECTED_STATUSES:
        raise FieldError(
            "corrected_status",
            f"corrected_status {corrected_status!r} is not one of"
            f" {', '.join(CORRECTED_STATUSES)}"
        )
    if corrected_status in ("null", "unclear") and corrected_value is not None:
        raise FieldError(
            "corrected_value",
            f"corrected_status {corrected_status!r} means there is no value, but corrected_value"
            f" is {corrected_value!r}: drop one of them"
        )
    if corrected_status in ("present", "other") and corrected_value is None:
        raise FieldError(
            "corrected_value", f"corrected_status {corrected_status!r} needs a corrected_value"
        )
    return corrected_value, corrected_status
