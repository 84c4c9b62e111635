"""What the demo model wrote for each row, beside what the page really says."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fieldtrust.demo.mistakes import Mistake, make_mistake, unclear_mistake
from fieldtrust.demo.values import Documents, excerpt

#: Which document attribute holds each field's true value.
SOURCE = {
    "invoice_number": "number",
    "po_number": "number",
    "date": "date",
    "delivery_date": "delivery_date",
    "vendor": "party",
    "merchant": "party",
    "buyer": "party",
    "currency": "currency",
    "total": "total",
    "tax": "tax",
    "payment_method": "payment",
}
#: Share of rows whose source text is kept for reviewers.
EXCERPT_SHARE = 0.9
#: Share of conflicting rows, among the wrong ones, where the other source is right.
CONFLICT_RIGHT = 0.7


def read_rows(
    rng: np.random.Generator,
    docs: Documents,
    doc: npt.NDArray[np.int64],
    field: npt.NDArray[np.object_],
    correct: npt.NDArray[np.bool_],
    unclear: npt.NDArray[np.bool_],
    conflict: npt.NDArray[np.bool_],
) -> dict[str, list[str | None]]:
    """Columns value, status, true_value, error_type, error_detail, conflict_value, excerpt."""
    n = len(doc)
    truth = np.empty(n, dtype=object)
    for name, attr in SOURCE.items():
        rows = field == name
        truth[rows] = getattr(docs, attr)[doc[rows]]
    status = np.where(truth == None, "null", "present").astype(object)  # noqa: E711
    status[(field == "payment_method") & docs.payment_other[doc]] = "other"

    # Plain lists from here: indexing numpy arrays item by item is slow.
    out = {
        "value": truth.tolist(),
        "status": status.tolist(),
        "true_value": truth.tolist(),
        "error_type": [None] * n,
        "error_detail": [None] * n,
        "conflict_value": [None] * n,
        "excerpt": [None] * n,
    }
    fields, docs_of, types = field.tolist(), doc.tolist(), docs.doc_type[doc].tolist()
    u, v, w = rng.random(n).tolist(), rng.random(n).tolist(), rng.random(n).tolist()
    for i in np.flatnonzero(unclear).tolist():
        out["value"][i], out["status"][i] = None, "unclear"
        if correct[i]:
            out["true_value"][i] = None  # the page really is unreadable
        else:
            _record(out, i, unclear_mistake(truth[i]))
    for i in np.flatnonzero(~correct & ~unclear).tolist():
        mistake = make_mistake(fields[i], types[i], docs, docs_of[i], u[i], v[i])
        out["value"][i], out["status"][i] = mistake.value, mistake.status
        _record(out, i, mistake)

    for i in np.flatnonzero(conflict).tolist():
        if not correct[i] and w[i] < CONFLICT_RIGHT:
            out["conflict_value"][i] = truth[i]
        else:  # the other source misread it, differently from us when we are wrong too
            other = make_mistake(fields[i], types[i], docs, docs_of[i], w[i], 1 - v[i])
            out["conflict_value"][i] = other.value if other.value != out["value"][i] else truth[i]

    illegible = unclear & correct
    for i in np.flatnonzero(rng.random(n) < EXCERPT_SHARE).tolist():
        out["excerpt"][i] = (
            "[illegible: smudged or torn]"
            if illegible[i]
            else excerpt(types[i], fields[i], docs, docs_of[i])
        )
    return out


def _record(out: dict[str, list[str | None]], i: int, mistake: Mistake) -> None:
    out["error_type"][i], out["error_detail"][i] = mistake.error_type, mistake.detail
