"""Realistic values for the demo documents, the mistakes the model makes, and source text.

Numbers are drawn vectorised per document; strings are formatted from them in
one pass. A mistake is always a believable one (a misread digit, day and
month swapped, the bill-to party taken for the vendor, the total copied into
the tax field), and always differs from the true value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
ObjArray = npt.NDArray[np.object_]

VENDORS = (
    "Brightline Office Supply",
    "Kessler Industrietechnik GmbH",
    "Nordic Paper AB",
    "Acme Freight Ltd",
    "Solano Catering SL",
    "Meridian IT Services",
    "Hoffmann & Sohn KG",
    "Bluewater Cleaning Co",
    "Vantage Print Works",
    "Atlas Facility Management",
    "Greenfield Energy plc",
    "Orbit Telecom SA",
    "Castell Legal LLP",
    "Pioneer Packaging",
    "Quartz Consulting Group",
    "Riverbend Security",
    "Summit Staffing Inc",
    "Delta Van Hire",
    "Fabrique Lumière SARL",
    "Oakridge Furniture",
    "Polar Cold Chain BV",
    "Sterling Audit LLP",
)
MERCHANTS = (
    "Café Rosetta",
    "QuickMart 24",
    "City Fuel Station",
    "Bäckerei Vogt",
    "Papeterie du Centre",
    "Hardware Hub",
    "Green Grocer",
    "Metro Parking",
    "Taxi Bleu",
    "Hotel Alder",
    "Noodle Bar Kiko",
    "Pharmacie Centrale",
    "Office Depot 112",
    "Lakeside Diner",
    "Marché Saint-Paul",
    "The Copy Shop",
)
BUYERS = (
    "Procurement Lyon",
    "Facilities Hamburg",
    "IT Purchasing",
    "Warehouse Rotterdam",
    "Marketing Dept.",
    "Fleet Management",
    "Lab Supplies Basel",
    "HR Operations",
)
#: The company the invoices are addressed to: the model's favourite wrong vendor.
OWN_COMPANY = "Lumen Logistics GmbH"
CURRENCIES = ("EUR", "USD", "GBP", "CHF")
CURRENCY_SHARE = (0.7, 0.15, 0.1, 0.05)
PAYMENTS = ("card", "cash", "mobile")
PAYMENT_SHARE = (0.62, 0.25, 0.10)  # the remaining 0.03 is 'other'
OTHER_PAYMENTS = ("voucher", "store credit", "meal ticket")
TAX_RATES = (0.2, 0.19, 0.1, 0.07, 0.055)
#: Characters an OCR engine confuses; every one maps to a different one.
CONFUSABLE = str.maketrans("0123456789", "8771963148")
CONFUSABLE_LETTERS = str.maketrans("aeilnorstu", "ocl1m0n5fv")

#: Per document type (same order as profiles.DOC_TYPES): log-normal total
#: (mu, sigma), days between document date and extraction.
AMOUNT_LOGNORMAL = ((6.0, 1.1), (3.2, 0.8), (3.0, 0.7), (7.5, 1.0))
DAYS_BACK = (25, 6, 6, 10)


@dataclass(frozen=True)
class Documents:
    """One entry per document, in time order; strings are the true values."""

    doc_type: IntArray
    extracted_at: npt.NDArray[np.datetime64]
    date: ObjArray
    delivery_date: ObjArray
    number: ObjArray
    party: ObjArray
    currency: ObjArray
    total: ObjArray
    tax: ObjArray  # None where the document has no tax line
    tax_rate: FloatArray
    payment: ObjArray
    payment_other: npt.NDArray[np.bool_]


def _strings(values: object) -> ObjArray:
    return np.asarray(values, dtype=object)


def _iso_dates(days: npt.NDArray[np.datetime64]) -> ObjArray:
    return _strings(np.datetime_as_string(days.astype("datetime64[D]"), unit="D"))


def make_documents(
    rng: np.random.Generator,
    doc_type: IntArray,
    extracted_at: npt.NDArray[np.datetime64],
    tax_absent: FloatArray,
) -> Documents:
    """Draw every document's true values; ``tax_absent`` is the share per document type."""
    n = len(doc_type)
    day = extracted_at.astype("datetime64[D]")
    back = rng.integers(0, np.asarray(DAYS_BACK)[doc_type] + 1)
    doc_date = day - back.astype("timedelta64[D]")
    delivery = doc_date + rng.integers(5, 61, n).astype("timedelta64[D]")

    mu, sigma = np.asarray(AMOUNT_LOGNORMAL).T
    total = np.maximum(np.round(rng.lognormal(mu[doc_type], sigma[doc_type]), 2), 0.5)
    rate = np.asarray(TAX_RATES)[rng.integers(0, len(TAX_RATES), n)]
    tax = np.round(total * rate / (1 + rate), 2)
    absent = rng.random(n) < tax_absent[doc_type]

    party_pick = rng.random(n)
    parties = (VENDORS, MERCHANTS, MERCHANTS, BUYERS)
    party = _strings(
        [parties[t][int(u * len(parties[t]))] for t, u in zip(doc_type, party_pick, strict=True)]
    )

    serial = rng.integers(1, 99_999, n)
    layout = rng.integers(0, 3, n)
    years = doc_date.astype("datetime64[Y]").astype(int) + 1970
    number = _strings(
        [
            f"PO-{4_500_000 + i:07d}" if t == 3 else _invoice_number(int(k), int(s), int(y))
            for i, (t, k, s, y) in enumerate(zip(doc_type, layout, serial, years, strict=True))
        ]
    )

    currency = _strings(np.asarray(CURRENCIES)[rng.choice(len(CURRENCIES), n, p=CURRENCY_SHARE)])
    pay_u = rng.random(n)
    pay_idx = np.searchsorted(np.cumsum(PAYMENT_SHARE), pay_u)
    other = pay_idx >= len(PAYMENTS)
    payment = _strings(
        [
            OTHER_PAYMENTS[i % len(OTHER_PAYMENTS)] if o else PAYMENTS[p]
            for i, (p, o) in enumerate(zip(pay_idx, other, strict=True))
        ]
    )
    return Documents(
        doc_type=doc_type,
        extracted_at=extracted_at,
        date=_iso_dates(doc_date),
        delivery_date=_iso_dates(delivery),
        number=number,
        party=party,
        currency=currency,
        total=_strings([f"{x:.2f}" for x in total]),
        tax=_strings([None if a else f"{x:.2f}" for x, a in zip(tax, absent, strict=True)]),
        tax_rate=rate,
        payment=payment,
        payment_other=other,
    )


def _invoice_number(layout: int, serial: int, year: int) -> str:
    if layout == 0:
        return f"INV-{year}-{serial:05d}"
    if layout == 1:
        return f"{year % 100:02d}{serial:06d}"
    return f"A{year % 100:02d}/{serial:05d}"


# --- mistakes ----------------------------------------------------------------


def misread_digit(text: str, u: float) -> str:
    """Replace one digit (picked by ``u`` in [0, 1)) with one an OCR engine confuses it with."""
    positions = [i for i, ch in enumerate(text) if ch.isdigit()]
    if not positions:
        return text + "1"
    i = positions[int(u * len(positions))]
    return text[:i] + text[i].translate(CONFUSABLE) + text[i + 1 :]


def misread_letter(text: str, u: float) -> str:
    """Replace one letter OCR engines confuse (e -> c, l -> 1, rn -> m...)."""
    positions = [i for i, ch in enumerate(text) if ch in "aeilnorstu"]
    if not positions:
        return text + "."
    i = positions[int(u * len(positions))]
    return text[:i] + text[i].translate(CONFUSABLE_LETTERS) + text[i + 1 :]


def wrong_choice(text: str, options: tuple[str, ...], u: float) -> str:
    """Another option than ``text`` from ``options``."""
    others = [o for o in options if o != text]
    return others[int(u * len(others))]


def dropped_decimal(text: str) -> str:
    """'12.35' read as '1235.00': the decimal point lost in the scan."""
    return f"{int(text.replace('.', '')):d}.00"


# --- source text ---------------------------------------------------------------


def _source_date(iso: str, handwritten: bool) -> str:
    year, month, day = iso.split("-")
    return f"{int(day)}/{int(month)}" if handwritten else f"{day}.{month}.{year}"


def excerpt(doc_type: int, field: str, docs: Documents, d: int) -> str:
    """The text around a field on the page, written from the document's true values."""
    total, tax, cur = docs.total[d], docs.tax[d], docs.currency[d]
    hand = doc_type == 2
    if field in ("invoice_number", "po_number"):
        head = "PURCHASE ORDER" if doc_type == 3 else "INVOICE"
        return f"{head}  No. {docs.number[d]}   Page 1/1"
    if field == "date":
        return f"{'date' if hand else 'Date:'} {_source_date(docs.date[d], hand)}"
    if field == "delivery_date":
        return f"Requested delivery: {_source_date(docs.delivery_date[d], False)}   Incoterms DAP"
    if field == "vendor":
        return f"From: {docs.party[d]}   Bill to: {OWN_COMPANY}, Hafenstr. 12, Hamburg"
    if field == "merchant":
        return f"{docs.party[d].lower()} - thanks!" if hand else f"*** {docs.party[d]} ***"
    if field == "buyer":
        return f"Ordered by: {docs.party[d]}   Approved: J. Weber"
    if field == "currency":
        return f"All amounts in {cur}   Payment terms 30 days net"
    if field == "payment_method":
        return f"paid {docs.payment[d]}" if hand else f"Payment: {docs.payment[d].upper()}"
    if field == "total":
        if hand:
            return f"tot. {total.replace('.', ',')}"
        return f"TOTAL {total} {cur}"
    if field == "tax":
        if tax is None:
            return f"no tax shown   total {total}" if hand else f"VAT exempt   TOTAL {total} {cur}"
        if hand:
            return f"tax {tax.replace('.', ',')}   tot. {total.replace('.', ',')}"
        return f"VAT {docs.tax_rate[d] * 100:g}%  {tax}   TOTAL {total} {cur}"
    raise AssertionError(f"no excerpt template for field {field!r}")  # profiles name no other
