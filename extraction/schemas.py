"""What the model fills in: one extraction tool per document type.

Each field the model reads is an object ``{value, confidence, source_text,
page}`` so every value carries its own stated confidence, and the verbatim
text and page it was read from (:mod:`fieldtrust.extraction.locate` finds
that text on a PDF's page for the reviewer's highlight). The schemas follow the
rules of strict tool use (Anthropic, "Structured outputs"): every object has
``additionalProperties: false`` and lists all its keys as required; nullable
values are ``anyOf [..., null]``; numeric bounds and patterns are not
supported there, so they are stated in the descriptions and checked by
:mod:`fieldtrust.extraction.validate`.

Strict tool use also caps the parameters with union types (``anyOf``,
nullable) at 16 per request, across all tools. So only the values a
document can lack are nullable (one per field); ``source_text`` and the
category ``detail`` are plain strings, empty when there is nothing; the
category is never null (a spending always has one, "unclear" at worst); line
items carry just description and amount, the two the total check needs.
Even ``--doc-type auto`` (both tools) stays within the cap;
:func:`union_count` lets the loop check it before asking for strict.

Three states of a value stay distinct:

* ``null``: the document does not have it (no tax line). Never a copied value.
* ``"unclear"``: the document has it but it cannot be read. Never ``""``.
* a category of ``"other"`` with a free-text ``detail``.

Every key is required even for fields a document may lack, so the model says
``null`` out loud instead of leaving a key out: an omitted key would be
indistinguishable from a forgotten one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fieldtrust.errors import InputError

#: The explicit value of a field that is on the document but unreadable.
UNCLEAR = "unclear"

#: Spending categories; "other" comes with a detail string.
CATEGORIES: tuple[str, ...] = (
    "office_supplies",
    "software",
    "hardware",
    "professional_services",
    "travel",
    "lodging",
    "meals",
    "fuel",
    "utilities",
    "telecom",
    "rent",
    "shipping",
    "marketing",
    "insurance",
    "other",
)

FieldKind = Literal["text", "date", "amount", "currency", "category", "line_items"]

_CONFIDENCE = {
    "type": "number",
    "description": (
        "Your confidence, between 0 and 1, that the value is exactly what the"
        " document says (1 = certain). Also for null: how sure you are the"
        " document has no such value."
    ),
}
_SOURCE_TEXT = {
    "type": "string",
    "description": "The value exactly as printed, verbatim, character for character"
    " (e.g. '令和6年4月1日', '¥1,000'), so it can be found on the page; empty when the"
    " value is null.",
}
_PAGE = {
    "type": "integer",
    "description": "The page the value is printed on, 1 for the first page; 0 when the"
    " value is null.",
}

#: Most parameters with union types strict tool use accepts in one request.
MAX_STRICT_UNIONS = 16
_VALUE_RULES: dict[FieldKind, str] = {
    "text": "As printed, trimmed.",
    "date": "ISO date yyyy-mm-dd (convert Japanese era and other calendars).",
    "amount": "Decimal string with '.' as the decimal point, no currency sign or"
    " thousands separator, e.g. '1234.50'.",
    "currency": "ISO 4217 code in capitals, e.g. 'EUR', 'JPY'.",
    "category": "One of the listed categories.",
    "line_items": "",
}


@dataclass(frozen=True)
class FieldSpec:
    """One field of a document type: its name, kind and what it means."""

    name: str
    kind: FieldKind
    description: str

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of this field's object in the tool input."""
        if self.kind == "line_items":
            return _line_items_schema(self.description)
        if self.kind == "category":
            return _category_schema(self.description)
        value = {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": (
                f"{_VALUE_RULES[self.kind]} null if the document has no such value;"
                f" '{UNCLEAR}' if it is there but unreadable. Never an empty string."
            ),
        }
        return _field_object(
            self.description,
            {"value": value, "confidence": _CONFIDENCE, "source_text": _SOURCE_TEXT,
             "page": _PAGE},
        )


def _field_object(description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _category_schema(description: str) -> dict[str, Any]:
    value = {
        "type": "string",
        "enum": [*CATEGORIES, UNCLEAR],
        "description": f"One category; 'other' with a detail when none fits; '{UNCLEAR}'"
        " if you cannot tell.",
    }
    detail = {
        "type": "string",
        "description": "What the spending is, in a few words, when value is 'other'; else empty.",
    }
    return _field_object(
        description,
        {"value": value, "detail": detail, "confidence": _CONFIDENCE, "source_text": _SOURCE_TEXT,
         "page": _PAGE},
    )


def _line_items_schema(description: str) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "description": {
                "type": "string",
                "description": "The line's text as printed, quantity and unit price included.",
            },
            "amount": {
                "type": "string",
                "description": "The line amount as printed, decimal string; negative for"
                f" discounts; '{UNCLEAR}' if unreadable.",
            },
        },
        "required": ["description", "amount"],
        "additionalProperties": False,
    }
    items = {
        "anyOf": [{"type": "array", "items": item}, {"type": "null"}],
        "description": "Every priced line in order, including fees and discounts;"
        " null if the document lists no lines. Do not add a line for tax or the total.",
    }
    return _field_object(description, {"items": items, "confidence": _CONFIDENCE})


@dataclass(frozen=True)
class DocSchema:
    """A document type and the tool the model calls to record one."""

    doc_type: str
    description: str
    fields: tuple[FieldSpec, ...]

    @property
    def tool_name(self) -> str:
        return f"record_{self.doc_type}"

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.fields)

    def field(self, name: str) -> FieldSpec:
        """The spec of field ``name`` (:class:`InputError` if this type has none)."""
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise InputError(
            f"document type {self.doc_type!r} has no field {name!r};"
            f" its fields: {', '.join(self.field_names)}"
        )

    def tool(self, *, strict: bool = True) -> dict[str, Any]:
        """The tool definition sent to the Messages API."""
        properties = {spec.name: spec.json_schema() for spec in self.fields}
        tool: dict[str, Any] = {
            "name": self.tool_name,
            "description": self.description,
            "input_schema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        }
        if strict:
            tool["strict"] = True
        return tool


_COMMON = (
    FieldSpec("date", "date", "Issue date of the document."),
    FieldSpec("vendor", "text", "Name of the seller / issuer."),
    FieldSpec("currency", "currency", "Currency of the amounts."),
    FieldSpec("line_items", "line_items", "The priced lines."),
    FieldSpec("tax", "amount", "Total tax (VAT, consumption tax) as printed; null if no tax line."),
    FieldSpec("total", "amount", "The total amount due / paid, as printed."),
    FieldSpec("category", "category", "What the spending is for."),
)

INVOICE = DocSchema(
    "invoice",
    "Record the fields read from one invoice. Call exactly once.",
    (FieldSpec("invoice_number", "text", "The invoice number as printed."), *_COMMON),
)

RECEIPT = DocSchema(
    "receipt",
    "Record the fields read from one receipt. Call exactly once.",
    (
        FieldSpec("receipt_number", "text", "Receipt / transaction number as printed."),
        *_COMMON,
        FieldSpec("payment_method", "text", "How it was paid (cash, card, ...), as printed."),
    ),
)

#: Every document type fieldtrust can extract, by name.
SCHEMAS: dict[str, DocSchema] = {schema.doc_type: schema for schema in (INVOICE, RECEIPT)}

#: ``--doc-type`` choices: a known type, or ``auto`` to let the model pick the tool.
DOC_TYPE_CHOICES: tuple[str, ...] = (*SCHEMAS, "auto")


def union_count(tools: list[dict[str, Any]]) -> int:
    """Parameters with union types (``anyOf`` or a list of types) across ``tools``."""

    def count(node: Any) -> int:
        if isinstance(node, dict):
            here = int("anyOf" in node or isinstance(node.get("type"), list))
            return here + sum(count(v) for v in node.values())
        if isinstance(node, list):
            return sum(count(v) for v in node)
        return 0

    return sum(count(tool["input_schema"]) for tool in tools)


def schemas_for(doc_type: str) -> tuple[DocSchema, ...]:
    """The schemas offered for ``doc_type`` (all of them for ``"auto"``)."""
    if doc_type == "auto":
        return tuple(SCHEMAS.values())
    if doc_type not in SCHEMAS:
        raise InputError(
            f"doc_type {doc_type!r} is not one of {', '.join(DOC_TYPE_CHOICES)}"
        )
    return (SCHEMAS[doc_type],)


def schema_for_tool(tool_name: str) -> DocSchema | None:
    """The schema whose tool is called ``tool_name``; None when there is none."""
    for schema in SCHEMAS.values():
        if schema.tool_name == tool_name:
            return schema
    return None
