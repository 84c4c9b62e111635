"""Tool definitions: strict-mode shape, per-field confidence, nullable values, categories."""

from __future__ import annotations

from typing import Any

import pytest
from claude_fake import invoice_input, receipt_input
from fieldtrust.extraction.schemas import (
    CATEGORIES,
    INVOICE,
    MAX_STRICT_UNIONS,
    RECEIPT,
    SCHEMAS,
    UNCLEAR,
    schema_for_tool,
    schemas_for,
    union_count,
)
from fieldtrust.extraction.validate import format_problems

from fieldtrust.errors import InputError

#: Keywords strict tool use does not support (they would be ignored or rejected).
UNSUPPORTED = {"minimum", "maximum", "minLength", "maxLength", "pattern", "multipleOf",
               "exclusiveMinimum", "exclusiveMaximum", "maxItems", "uniqueItems"}


def walk(schema: Any, path: str = "$"):
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from walk(value, f"{path}[{index}]")


@pytest.mark.parametrize("schema", list(SCHEMAS.values()), ids=list(SCHEMAS))
def test_tools_follow_strict_mode_rules(schema) -> None:
    tool = schema.tool()
    assert tool["strict"] is True
    assert tool["name"] == f"record_{schema.doc_type}"
    for path, node in walk(tool["input_schema"]):
        assert not UNSUPPORTED & set(node), f"{path} uses {UNSUPPORTED & set(node)}"
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path


@pytest.mark.parametrize("schema", list(SCHEMAS.values()), ids=list(SCHEMAS))
def test_every_field_has_its_own_confidence_and_all_but_category_are_nullable(schema) -> None:
    properties = schema.tool()["input_schema"]["properties"]
    assert list(properties) == list(schema.field_names)
    for name, node in properties.items():
        assert node["properties"]["confidence"]["type"] == "number", name
        if name == "category":
            continue
        key = "items" if name == "line_items" else "value"
        assert {"type": "null"} in node["properties"][key]["anyOf"], name


@pytest.mark.parametrize(
    ("doc_type", "unions"), [("invoice", 7), ("receipt", 8), ("auto", 15)]
)
def test_strict_requests_stay_within_the_union_type_cap(doc_type: str, unions: int) -> None:
    tools = [s.tool() for s in schemas_for(doc_type)]

    assert union_count(tools) == unions <= MAX_STRICT_UNIONS


def test_union_count_sees_anyof_and_type_lists() -> None:
    tool = {"input_schema": {"type": "object", "properties": {
        "a": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "b": {"type": ["string", "null"]},
        "c": {"type": "object", "properties": {"d": {"anyOf": [{"type": "number"}]}}},
    }}}

    assert union_count([tool]) == 3


def test_category_is_an_enum_with_other_and_a_detail() -> None:
    node = INVOICE.tool()["input_schema"]["properties"]["category"]
    enum = node["properties"]["value"]["enum"]
    assert enum == [*CATEGORIES, UNCLEAR]
    assert "other" in enum
    assert "detail" in node["required"]


def test_non_strict_tools_leave_out_the_flag() -> None:
    assert "strict" not in RECEIPT.tool(strict=False)


def test_the_sample_inputs_are_valid_for_their_schema() -> None:
    assert format_problems(INVOICE, invoice_input()) == []
    assert format_problems(RECEIPT, receipt_input()) == []


def test_schemas_for_auto_offers_every_type_and_rejects_unknown_types() -> None:
    assert schemas_for("auto") == (INVOICE, RECEIPT)
    assert schemas_for("receipt") == (RECEIPT,)
    assert schema_for_tool("record_invoice") is INVOICE
    assert schema_for_tool("record_purchase_order") is None
    with pytest.raises(InputError, match="'purchase_order' is not one of invoice"):
        schemas_for("purchase_order")
