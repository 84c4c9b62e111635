"""The demo world's hidden truth: who reads what, and how well.

Every (doc_type, field) stratum has a stated-confidence distribution and a
*slope* ``m`` tying stated confidence to the real chance of being right::

    P(correct | c) = clip(1 - m * (1 - c), FLOOR, 1)

``m = 1`` is a perfectly calibrated stratum (P = c), ``m > 1`` an
overconfident one (each point of doubt the model admits hides ``m`` points of
error), ``m < 1`` an underconfident one. A form version or a late week can
multiply ``m``: the model keeps stating the same confidence while it gets
worse, which is exactly the trap fieldtrust exists to catch. docs/demo.md
describes the planted problems.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Lowest chance of being right the model ever has (an item is never hopeless).
FLOOR = 0.02


@dataclass(frozen=True)
class FieldProfile:
    """How one field of one document type is read.

    ``conf_a, conf_b``: Beta parameters of stated confidence on a normal
    document; ``slope``: the ``m`` above. What a mistake looks like depends on
    the field (fieldtrust.demo.mistakes).
    """

    conf_a: float
    conf_b: float
    slope: float


@dataclass(frozen=True)
class FormVersion:
    """A layout of a document type.

    An established layout has ``share``, its weight among the established
    layouts of its type. A new one (``new_in_last`` > 0) appears in the last
    ``new_in_last`` weeks of the demo and takes ``ramp[k]`` of its type's
    documents in its k-th week. ``slope_factor`` multiplies every field's slope
    on this layout, or only the ``fields`` named (when given).
    """

    name: str
    share: float = 1.0
    slope_factor: float = 1.0
    new_in_last: int = 0
    ramp: tuple[float, ...] = ()
    fields: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DocType:
    """A document type: its share of documents, its fields and its layouts.

    ``tax_absent``: share of documents with no tax line; ``unclear``: share of
    rows the model reports as unreadable; ``hard_docs``: share of documents
    that are hard to read (bad scan, smudge), on which every field's stated
    confidence comes from a low Beta(4, 2) instead of the field's own.
    """

    name: str
    share: float
    fields: dict[str, FieldProfile]
    versions: tuple[FormVersion, ...]
    tax_absent: float
    unclear: float
    hard_docs: float


DOC_TYPES: tuple[DocType, ...] = (
    DocType(
        "invoice",
        share=0.42,
        fields={
            "invoice_number": FieldProfile(90.0, 1.0, 0.5),
            "date": FieldProfile(80.0, 1.0, 1.4),
            "vendor": FieldProfile(70.0, 1.0, 1.4),
            "currency": FieldProfile(140.0, 1.0, 0.4),
            # The one honest stratum: the model's total confidence means what it says.
            "total": FieldProfile(45.0, 1.0, 1.0),
            "tax": FieldProfile(70.0, 1.0, 1.5),
        },
        versions=(
            FormVersion("v2"),
            # A supplier portal switches layout in the last two weeks; the model has
            # never seen it and does not know it.
            FormVersion(
                "v3-2026",
                slope_factor=3.0,
                new_in_last=2,
                ramp=(0.35, 0.5),
                # The header block and the tax table moved; TOTAL is still TOTAL.
                fields=frozenset({"invoice_number", "date", "vendor", "tax"}),
            ),
        ),
        tax_absent=0.04,
        unclear=0.001,
        hard_docs=0.01,
    ),
    DocType(
        "printed_receipt",
        share=0.30,
        fields={
            "merchant": FieldProfile(70.0, 1.0, 1.4),
            "date": FieldProfile(80.0, 1.0, 1.3),
            "total": FieldProfile(75.0, 1.0, 1.3),
            "tax": FieldProfile(70.0, 1.0, 1.4),
            "payment_method": FieldProfile(80.0, 1.0, 0.8),
        },
        versions=(
            FormVersion("pos-2019", share=0.6),
            FormVersion("pos-2023", share=0.4, slope_factor=1.1),
        ),
        tax_absent=0.08,
        unclear=0.003,
        hard_docs=0.015,
    ),
    DocType(
        "handwritten_receipt",
        share=0.08,
        fields={
            "merchant": FieldProfile(20.0, 1.2, 1.25),
            "date": FieldProfile(25.0, 1.2, 1.25),
            "total": FieldProfile(25.0, 1.0, 1.25),
            # Stated around 0.9, right about 60% of the time: the model copies the
            # total into the tax field and is sure of it.
            "tax": FieldProfile(65.0, 6.0, 4.2),
            "payment_method": FieldProfile(30.0, 1.0, 1.2),
        },
        versions=(
            FormVersion("carbon-pad", share=0.55),
            FormVersion("notebook", share=0.45, slope_factor=1.15),
        ),
        tax_absent=0.15,
        unclear=0.02,
        hard_docs=0.05,
    ),
    DocType(
        "purchase_order",
        share=0.20,
        fields={
            "po_number": FieldProfile(110.0, 1.0, 0.4),
            "date": FieldProfile(80.0, 1.0, 1.3),
            "buyer": FieldProfile(75.0, 1.0, 1.4),
            "total": FieldProfile(75.0, 1.0, 1.3),
            "currency": FieldProfile(140.0, 1.0, 0.4),
            "delivery_date": FieldProfile(55.0, 1.0, 1.6),
        },
        versions=(
            FormVersion("po-2021"),
            FormVersion("po-2026", slope_factor=2.0, new_in_last=1, ramp=(0.3,)),
        ),
        tax_absent=0.0,
        unclear=0.001,
        hard_docs=0.008,
    ),
)

#: Unrecorded drift: (doc_type, field) -> (weeks from the end, slope factor). A
#: point-of-sale software update changes the receipt date format in the last two
#: weeks without any new form version to show for it.
DRIFT: dict[tuple[str, str], tuple[int, float]] = {
    ("printed_receipt", "date"): (2, 5.0),
}

#: Share of a tax field's mistakes of each kind (copied the total / misread a
#: digit / missed the tax line): handwritten receipts, then printed documents.
HANDWRITTEN_TAX_ERRORS = (0.6, 0.25, 0.15)
PRINTED_TAX_ERRORS = (0.1, 0.7, 0.2)

#: Conflicting second source (another OCR pass, an ERP record): chance a row of
#: a field that has one disagrees, when the model is right and when it is wrong.
CONFLICT_IF_RIGHT = 0.01
CONFLICT_IF_WRONG = 0.3

#: Chance an 'unclear' verdict by the model is right (the source really is
#: unreadable): about even, whatever confidence it states.
UNCLEAR_CORRECT = 0.5

#: Extractor name written into every demo row.
MODEL_NAME = "acme-docreader-2.4"


def p_correct(
    confidence: npt.NDArray[np.float64], slope: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Chance each extraction is right, given its stated confidence and slope."""
    return np.clip(1.0 - slope * (1.0 - confidence), FLOOR, 1.0)


def version_shares(doc_type: DocType, week: int, weeks: int) -> list[float]:
    """Share of ``doc_type``'s documents each of its layouts has in week index ``week``."""
    new = [0.0] * len(doc_type.versions)
    for i, version in enumerate(doc_type.versions):
        start = weeks - version.new_in_last
        if version.new_in_last and week >= start:
            new[i] = version.ramp[min(week - start, len(version.ramp) - 1)]
    rest = 1.0 - sum(new)
    established = sum(v.share for v in doc_type.versions if not v.new_in_last)
    return [
        new[i] if v.new_in_last else rest * v.share / established
        for i, v in enumerate(doc_type.versions)
    ]
