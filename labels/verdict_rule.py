"""The verdict rule: what a verdict means with or without its details, defined once.

Every way a verdict enters the store goes through here: the review page and
the adjudication form (:func:`form_fields`, then
:func:`fieldtrust.labels.verdicts.record_verdict` or
:func:`fieldtrust.labels.agreement.adjudicate`), a labels file and a Label
Studio export (:mod:`fieldtrust.labels.label_import`). So one verdict means
the same thing wherever it was given:

* ``correct``: the extracted value is what the document says. Nothing else.
* ``incorrect``: it is not. The details are optional and never guessed: an
  error type not given is stored as :data:`~fieldtrust.labels.taxonomy.NOT_RECORDED`
  (the error report shows it as such), a correction not given stays unknown
  (no value, no status). "Absent" (status ``null``) and "unreadable"
  (``unclear``) are corrections a reviewer states, never the default.
* ``unclear``: the source cannot be read, so the value is neither right nor
  wrong (left out of every accuracy figure). A detail may note why.

The choices and their words (:data:`VERDICT_CHOICES`, :data:`CORRECTION_CHOICES`,
:func:`error_choices`) are what the dashboard renders and what the messages
here quote, so a refusal reads in the form's own labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from fieldtrust.labels.taxonomy import CORRECTED_STATUSES, ERROR_TYPES, NOT_RECORDED

from fieldtrust.errors import FieldError

#: The verdicts, as stored.
VERDICTS: tuple[str, ...] = ("correct", "incorrect", "unclear")


class VerdictDetails(TypedDict, total=False):
    """What may go with a verdict, as keyword arguments; a key left out is not given.

    ``record_verdict``, ``supersede`` and ``adjudicate`` take these, and
    :func:`form_fields` returns them for a filled form.
    """

    corrected_value: str | None
    corrected_status: str | None
    error_type: str | None
    error_detail: str | None


@dataclass(frozen=True)
class Choice:
    """One choice of a verdict form: the stored value, its label, a key and a help line."""

    value: str | None
    label: str
    help: str
    key: str = ""


#: The verdict buttons, in the order reviewers see them, with their keys.
VERDICT_CHOICES: tuple[Choice, ...] = (
    Choice("correct", "Correct", "The extracted value is what the document says.", "1"),
    Choice("incorrect", "Incorrect", "It is not. Say what the document holds and why, if you"
           " can; both may stay 'not recorded'.", "2"),
    Choice("unclear", "Unreadable", "The source cannot be read: the value is neither right nor"
           " wrong and counts in no accuracy figure.", "3"),
)

#: What an 'incorrect' value should have been (``corrected_status``); None: not recorded.
CORRECTION_CHOICES: tuple[Choice, ...] = (
    Choice(None, "Not recorded", "No correction given: it stays unknown."),
    Choice("present", "The document says", "The right value, typed in the corrected value."),
    Choice("null", "Absent", "The field is not in the document."),
    Choice("unclear", "Unreadable", "The field is in the document but cannot be read."),
    Choice("other", "Something else", "Described in the corrected value (e.g. 'see the"
           " attachment')."),
)

#: The word of the error type a verdict was given without.
NOT_RECORDED_LABEL = "Not recorded"

#: What the form calls each label column, for messages.
FIELD_LABELS = {
    "verdict": "verdict",
    "corrected_value": "corrected value",
    "corrected_status": "correction",
    "error_type": "error type",
    "error_detail": "detail",
}


def error_label(error_type: str | None) -> str:
    """The form's word of an error type: ``misread_characters`` is 'Misread characters'."""
    if error_type is None or error_type == NOT_RECORDED:
        return NOT_RECORDED_LABEL
    return error_type.replace("_", " ").capitalize()


def error_choices() -> tuple[Choice, ...]:
    """The error types a reviewer picks from, 'Not recorded' (None) first."""
    return (
        Choice(None, NOT_RECORDED_LABEL, "No error type given: stored as not_recorded."),
        *(Choice(kind, error_label(kind), meaning) for kind, meaning in ERROR_TYPES.items()),
    )


def verdict_label(verdict: str) -> str:
    """The form's word of a verdict ('unclear' is 'Unreadable')."""
    return next((c.label for c in VERDICT_CHOICES if c.value == verdict), verdict)


def correction_label(status: str | None) -> str:
    """The form's word of a corrected status ('null' is 'Absent')."""
    return next((c.label for c in CORRECTION_CHOICES if c.value == status), str(status))


# --- the rule -----------------------------------------------------------------------


def verdict_fields(
    verdict: str,
    corrected_value: str | None = None,
    corrected_status: str | None = None,
    error_type: str | None = None,
    error_detail: str | None = None,
) -> dict[str, Any]:
    """The label columns of a verdict and its details; the first problem raised.

    Raises
    ------
    FieldError
        The first of :func:`verdict_problems`; ``.column`` names the field.
    """
    fields, problems = _checked(verdict, corrected_value, corrected_status, error_type,
                                error_detail)
    if problems:
        raise problems[0]
    return fields


def verdict_problems(
    verdict: str,
    corrected_value: str | None = None,
    corrected_status: str | None = None,
    error_type: str | None = None,
    error_detail: str | None = None,
) -> list[FieldError]:
    """Every reason :func:`verdict_fields` refuses these fields (empty: none)."""
    return _checked(verdict, corrected_value, corrected_status, error_type, error_detail)[1]


def lacks_details(fields: dict[str, Any]) -> bool:
    """Whether an 'incorrect' label's error type or correction was not recorded."""
    return fields.get("verdict") == "incorrect" and (
        fields.get("error_type") == NOT_RECORDED or fields.get("corrected_status") is None
    )


def _checked(
    verdict: str,
    corrected_value: str | None,
    corrected_status: str | None,
    error_type: str | None,
    error_detail: str | None,
) -> tuple[dict[str, Any], list[FieldError]]:
    """The cleaned label columns and the problems found (no columns when there are some)."""
    if verdict not in VERDICTS:
        return {}, [FieldError(
            "verdict", f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}"
        )]
    if verdict == "incorrect":
        return _incorrect(corrected_value, corrected_status, error_type, error_detail)
    given = [name for name, value in (
        ("corrected_value", corrected_value), ("corrected_status", corrected_status),
        ("error_type", error_type),
        *((("error_detail", error_detail),) if verdict == "correct" else ()),
    ) if value is not None]
    if given:
        named = ", ".join(FIELD_LABELS[name] for name in given)
        return {}, [FieldError(
            given[0],
            f"'{verdict_label(verdict)}' takes no {named} ({', '.join(given)}): those describe"
            " an 'Incorrect' verdict",
        )]
    note = error_detail.strip() if error_detail else None
    return {
        "verdict": verdict, "corrected_value": None, "corrected_status": None,
        "error_type": None, "error_detail": note or None,
    }, []


def _incorrect(
    corrected_value: str | None,
    corrected_status: str | None,
    error_type: str | None,
    error_detail: str | None,
) -> tuple[dict[str, Any], list[FieldError]]:
    problems: list[FieldError] = []
    value, status = corrected_value, corrected_status
    try:
        value, status = _correction(corrected_value, corrected_status)
    except FieldError as exc:
        problems.append(exc)
    kind, detail = NOT_RECORDED, (error_detail.strip() or None) if error_detail else None
    if error_type is not None and error_type != NOT_RECORDED:  # an export says not_recorded
        try:
            kind, detail = _error(error_type, error_detail)
        except FieldError as exc:
            problems.append(exc)
    if problems:
        return {}, problems
    return {
        "verdict": "incorrect", "corrected_value": value, "corrected_status": status,
        "error_type": kind, "error_detail": detail,
    }, []


def _error(error_type: str, error_detail: str | None) -> tuple[str, str | None]:
    """A type from the taxonomy; 'Other' with a detail."""
    if error_type not in ERROR_TYPES:
        raise FieldError(
            "error_type",
            f"error_type {error_type!r} is not in the taxonomy; pick one of"
            f" {', '.join(ERROR_TYPES)} (or leave it empty: not recorded)",
        )
    detail = error_detail.strip() if error_detail else None
    if error_type == "other" and not detail:
        raise FieldError(
            "error_detail",
            f"error type '{error_label('other')}' needs a detail (error_detail): say in a few"
            " words what was wrong",
        )
    return error_type, detail or None


def _correction(
    corrected_value: str | None, corrected_status: str | None
) -> tuple[str | None, str | None]:
    """(value, status) of a correction; (None, None) when none was recorded.

    A value alone means 'The document says' (``present``). 'Absent' and
    'Unreadable' carry no value, 'The document says' and 'Something else' need one.
    """
    if corrected_status is None:
        return corrected_value, None if corrected_value is None else "present"
    if corrected_status not in CORRECTED_STATUSES:
        raise FieldError(
            "corrected_status",
            f"corrected_status {corrected_status!r} is not one of"
            f" {', '.join(CORRECTED_STATUSES)}",
        )
    label = correction_label(corrected_status)
    if corrected_status in ("null", "unclear") and corrected_value is not None:
        raise FieldError(
            "corrected_value",
            f"'{label}' (corrected_status {corrected_status}) means there is no value, but the"
            f" corrected value is {corrected_value!r}: drop one of them",
        )
    if corrected_status in ("present", "other") and corrected_value is None:
        raise FieldError(
            "corrected_value",
            f"'{label}' (corrected_status {corrected_status}) needs the corrected value",
        )
    return corrected_value, corrected_status


# --- a form ---------------------------------------------------------------------------


def form_fields(
    verdict: str,
    *,
    corrected_value: str | None = "",
    corrected_status: str | None = None,
    error_type: str | None = None,
    error_detail: str | None = "",
) -> VerdictDetails:
    """The keyword arguments ``record_verdict`` / ``adjudicate`` take for a filled form.

    Only an ``incorrect`` verdict carries a correction and an error type; for
    the others the form's other widgets are ignored (they may be left from a
    previous item). Blank text counts as not given; ``corrected_status`` and
    ``error_type`` are the picked choices' values (None: 'Not recorded'). A
    value typed with 'Absent' picked is passed on as it is, so the rule
    refuses the contradiction in its own words rather than dropping one.
    """
    if verdict != "incorrect":
        return {}
    value = (corrected_value or "").strip()
    detail = (error_detail or "").strip()
    return {
        "corrected_value": value or None,
        "corrected_status": corrected_status,
        "error_type": error_type,
        "error_detail": detail or None,
    }
