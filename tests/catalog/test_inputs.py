"""A listing's inputs as tool arguments: the optional type members an import checks, the schema
a model reads and the check a call passes before anything is signed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from paysign.catalog.inputs import InvalidArgument, ListingInputs
from paysign.catalog.listing import parse_catalog_entries
from paysign.errors import InvalidCatalog
from paysign.services.catalog import demo_catalog

DEMO = demo_catalog("http://127.0.0.1:8403")["catalog"]
FILINGS, WEATHER, TRANSLATE = 1, 2, 3


def with_input(index: int, kind: str, position: int, **members: Any) -> list[dict[str, Any]]:
    entries = copy.deepcopy(DEMO)
    entries[index]["inputs"][kind][position].update(members)
    return entries


@pytest.mark.parametrize(
    ("entries", "pointer"),
    [
        (with_input(WEATHER, "query", 0, type="text"), "/catalog/2/inputs/query/0/type"),
        (with_input(WEATHER, "query", 0, enum=[]), "/catalog/2/inputs/query/0/enum"),
        (with_input(WEATHER, "query", 0, enum=["metric", 3]), "/catalog/2/inputs/query/0/enum"),
        (with_input(WEATHER, "query", 0, minimum=1), "/catalog/2/inputs/query/0/minimum"),
        (with_input(FILINGS, "query", 1, maximum="20"), "/catalog/1/inputs/query/1/maximum"),
        (with_input(TRANSLATE, "body", 0, required="yes"), "/catalog/3/inputs/body/0/required"),
        (with_input(TRANSLATE, "body", 1, key="text"), "/catalog/3/inputs/body/1/key"),
    ],
)
def test_an_invalid_input_member_is_named(entries: list[dict[str, Any]], pointer: str) -> None:
    with pytest.raises(InvalidCatalog) as refused:
        parse_catalog_entries(entries)
    assert refused.value.extensions["pointer"] == pointer


def test_a_body_in_another_shape_stays_one_object_argument() -> None:
    entries = copy.deepcopy(DEMO)
    entries[TRANSLATE]["inputs"]["body"] = {"type": "object"}
    listing = parse_catalog_entries(entries)[TRANSLATE]
    schema = ListingInputs.of(listing.document).schema(sandbox=True)
    assert schema["properties"]["body"]["type"] == "object"
    assert "text" not in schema["properties"]


def test_a_clashing_key_is_prefixed_with_its_kind() -> None:
    document = {
        "method": "POST",
        "inputs": {
            "path": [],
            "query": [{"key": "text", "description": "", "required": False}],
            "header": [],
            "body": [{"key": "text", "description": "", "required": True}],
        },
    }
    inputs = ListingInputs.of(document)
    assert [(a.name, a.kind, a.key) for a in inputs.arguments] == [
        ("text", "query", "text"),
        ("body_text", "body", "text"),
    ]
    assert inputs.schema(sandbox=False)["required"] == ["body_text"]


@pytest.mark.parametrize(
    ("arguments", "argument", "reason"),
    [
        ({}, "company", "is required"),
        ({"company": "ACME", "limit": 0}, "limit", "must be at least 1"),
        ({"company": "ACME", "limit": 2.5}, "limit", "must be a whole number"),
        ({"company": "ACME", "limit": True}, "limit", "must be a whole number"),
        ({"company": 7}, "company", "must be a string"),
        ({"company": "ACME", "pages": 2}, "pages", "is not an argument of this tool"),
    ],
)
def test_a_call_is_checked_argument_by_argument(
    arguments: dict[str, Any], argument: str, reason: str
) -> None:
    inputs = ListingInputs.of(parse_catalog_entries(DEMO)[FILINGS].document)
    with pytest.raises(InvalidArgument) as refused:
        inputs.check(arguments)
    assert refused.value.argument == argument
    assert refused.value.reason.startswith(reason)


def test_a_valid_call_passes_unchanged() -> None:
    inputs = ListingInputs.of(parse_catalog_entries(DEMO)[FILINGS].document)
    assert inputs.check({"company": "ACME", "limit": 5, "sandbox": False}) == {
        "company": "ACME",
        "limit": 5,
    }
