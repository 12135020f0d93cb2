"""The policy JSON document: round trip, and one refusal (with its JSON pointer) per rule."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.errors import InvalidPolicy
from paysign.policy.caps import Caps
from paysign.policy.decide import Approval, PolicySettings
from paysign.policy.document import (
    MAX_RULES_PER_LIST,
    PolicyDocument,
    parse_policy_document,
    render_policy_document,
)
from paysign.policy.rules import parse_rule

# The example of DESIGN 7.6, verbatim.
EXAMPLE: dict[str, Any] = orjson.loads(
    """{"approval": "openEcosystem", "ecosystems": {"premium": true,
   "standard": true, "openEcosystem": true}, "caps": {"perPayment": 1000000, "daily": 10000000,
   "monthly": 100000000}, "allow": ["api.example.com/weather", "*.example.org"], "deny":
   ["evil.example.com"], "pending": ["new.example.net/v1/quote"]}"""
)
DELETE = object()


def with_change(pointer: str, value: object) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE)
    *parents, last = pointer.strip("/").split("/")
    target = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


def refusal(doc: object) -> InvalidPolicy:
    with pytest.raises(InvalidPolicy) as raised:
        parse_policy_document(doc)
    error = raised.value
    assert error.slug == "invalid-policy"
    assert error.detail.startswith(f"{error.extensions['pointer'] or '/'}: ")
    return error


# --- round trip -----------------------------------------------------------------------------


def test_example_parses() -> None:
    doc = parse_policy_document(EXAMPLE)
    assert doc.settings == PolicySettings(
        Approval.OPEN_ECOSYSTEM, True, True, True, Caps(1_000_000, 10_000_000, 100_000_000)
    )
    assert doc.allow == (parse_rule("api.example.com/weather"), parse_rule("*.example.org"))
    assert doc.deny == (parse_rule("evil.example.com"),)
    assert doc.pending == ()  # read-only: ignored on input


NO_PAYEES = {"allow": [], "deny": []}


def test_round_trip() -> None:
    rendered = render_policy_document(parse_policy_document(EXAMPLE))
    caps = {**EXAMPLE["caps"], "hourly": None}
    assert rendered == {
        **EXAMPLE,
        "caps": caps,
        "payTo": NO_PAYEES,
        "frozen": False,
        "pending": [],
    }
    assert list(rendered) == [
        "approval",
        "ecosystems",
        "caps",
        "allow",
        "deny",
        "payTo",
        "frozen",
        "pending",
    ]
    assert render_policy_document(parse_policy_document(rendered)) == rendered


def test_a_document_from_before_the_newer_fields_keeps_its_meaning() -> None:
    # DESIGN 7.6's example has no payTo, frozen or hourly cap: none of them applies.
    doc = parse_policy_document(EXAMPLE)
    assert doc.settings.frozen is False
    assert not doc.settings.payees
    assert doc.settings.payees.refusal(bytes.fromhex("ab" * 20)) is None
    assert doc.settings.caps.hourly is None
    caps = {**EXAMPLE["caps"], "hourly": None}
    explicit = parse_policy_document({**EXAMPLE, "caps": caps, "payTo": NO_PAYEES, "frozen": False})
    assert explicit == doc


def test_an_hourly_cap_is_read_and_checked_like_the_others() -> None:
    doc = parse_policy_document({**EXAMPLE, "caps": {**EXAMPLE["caps"], "hourly": 250_000}})
    assert doc.settings.caps.hourly == 250_000
    assert render_policy_document(doc)["caps"]["hourly"] == 250_000
    for bad in (-1, 1.5, "1", True, 2**63):
        error = refusal({**EXAMPLE, "caps": {**EXAMPLE["caps"], "hourly": bad}})
        assert error.extensions["pointer"] == "/caps/hourly"


def test_payee_rules_are_read_in_any_letter_case_and_rendered_checksummed() -> None:
    checksummed = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
    for spelling in (checksummed, checksummed.lower(), "0x" + checksummed[2:].upper()):
        doc = parse_policy_document({**EXAMPLE, "payTo": {"deny": [spelling, checksummed]}})
        assert render_policy_document(doc)["payTo"] == {"allow": [], "deny": [checksummed]}
        assert doc.settings.payees.refusal(bytes.fromhex(checksummed[2:])) == "deny"


@pytest.mark.parametrize(
    ("pay_to", "pointer", "says"),
    [
        ([], "/payTo", "must be an object"),
        ({"allow": "0x" + "ab" * 20}, "/payTo/allow", "must be an array"),
        ({"allow": ["0xab"]}, "/payTo/allow/0", "20-byte hex"),
        ({"deny": ["0x" + "zz" * 20]}, "/payTo/deny/0", "20-byte hex"),
        ({"deny": [5]}, "/payTo/deny/0", "20-byte hex"),
        ({"deny": ["0x209693Bc6afc0C5328bA36FaF03C514EF312287c"]}, "/payTo/deny/0", "checksum"),
        ({"allow": ["0x" + "ab" * 20], "deny": ["0x" + "AB" * 20]}, "/payTo/allow", "both"),
        ({"block": []}, "/payTo/block", "unknown list"),
        ({"allow": ["0x" + "ab" * 20] * 1001}, "/payTo/allow", "at most 1000"),
    ],
)
def test_bad_payee_rules_are_refused_with_their_place(
    pay_to: object, pointer: str, says: str
) -> None:
    error = refusal({**EXAMPLE, "payTo": pay_to})
    assert error.extensions["pointer"] == pointer
    assert says in error.detail


def test_frozen_must_be_a_boolean() -> None:
    for value in (1, "true", None):
        assert refusal({**EXAMPLE, "frozen": value}).extensions["pointer"] == "/frozen"
    assert parse_policy_document({**EXAMPLE, "frozen": True}).settings.frozen is True


def test_defaults_render() -> None:
    assert render_policy_document(PolicyDocument.defaults()) == {
        "approval": "openEcosystem",
        "ecosystems": {"premium": True, "standard": True, "openEcosystem": True},
        "caps": {
            "perPayment": 1_000_000,
            "daily": 10_000_000,
            "monthly": 100_000_000,
            "hourly": None,
        },
        "allow": [],
        "deny": [],
        "payTo": NO_PAYEES,
        "frozen": False,
        "pending": [],
    }


def test_pending_is_rendered_but_ignored_on_input() -> None:
    doc = PolicyDocument(PolicySettings.defaults(), (), (), ("new.example.net/v1/quote",))
    rendered = render_policy_document(doc)
    assert rendered["pending"] == ["new.example.net/v1/quote"]
    assert parse_policy_document(rendered).pending == ()
    for junk in (None, 5, "x", [1, 2], {"a": 1}):
        assert parse_policy_document(with_change("/pending", junk)).pending == ()
    assert parse_policy_document(with_change("/pending", DELETE)).pending == ()


def test_rules_are_normalised_and_deduplicated_in_order() -> None:
    doc = with_change("/allow", ["B.example.com/v1/", "a.example.com", "b.example.com/v1"])
    doc["deny"] = []
    parsed = parse_policy_document(doc)
    assert [str(r) for r in parsed.allow] == ["b.example.com/v1", "a.example.com"]


def test_null_caps_mean_no_cap() -> None:
    doc = with_change("/caps", {"perPayment": None, "daily": None, "monthly": None})
    parsed = parse_policy_document(doc)
    assert parsed.settings.caps == Caps(None, None, None)
    assert render_policy_document(parsed)["caps"] == {
        "perPayment": None,
        "daily": None,
        "monthly": None,
        "hourly": None,
    }


@pytest.mark.parametrize("amount", [0, 1, 2**63 - 1])
def test_cap_bounds_accepted(amount: int) -> None:
    assert parse_policy_document(with_change("/caps/daily", amount)).settings.caps.daily == amount


CAP = st.none() | st.integers(0, 2**63 - 1)
RULE = st.sampled_from(
    ["api.example.com", "api.example.com/v1", "*.example.org", "[::1]:8443/x", "x.example.net:9000"]
)


@given(
    approval=st.sampled_from(["none", "openEcosystem", "all"]),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    caps=st.tuples(CAP, CAP, CAP),
    rules=st.lists(RULE, unique=True),
    split=st.integers(0, 5),
)
def test_round_trip_property(
    approval: str,
    flags: tuple[bool, bool, bool],
    caps: tuple[int | None, ...],
    rules: list[str],
    split: int,
) -> None:
    document = {
        "approval": approval,
        "ecosystems": dict(zip(["premium", "standard", "openEcosystem"], flags, strict=True)),
        "caps": dict(zip(["perPayment", "daily", "monthly"], caps, strict=True)),
        "allow": rules[:split],
        "deny": rules[split:],
    }
    rendered = render_policy_document(parse_policy_document(document))
    expected_caps = {**document["caps"], "hourly": None}
    assert rendered == {
        **document,
        "caps": expected_caps,
        "payTo": NO_PAYEES,
        "frozen": False,
        "pending": [],
    }
    # and through JSON, as the CLI does it
    assert render_policy_document(parse_policy_document(orjson.loads(orjson.dumps(rendered)))) == (
        rendered
    )


# --- refusals and their pointers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "pointer"),
    [
        # not an object
        ([], ""),
        ("policy", ""),
        (None, ""),
        # unknown fields, at any level (RFC 6901 escapes in member names)
        ({**EXAMPLE, "extra": 1}, "/extra"),
        ({**EXAMPLE, "a/b": 1}, "/a~1b"),
        ({**EXAMPLE, "a~b": 1}, "/a~0b"),
        (with_change("/ecosystems/bazaar", True), "/ecosystems/bazaar"),
        ({**EXAMPLE, "ecosystems": {**EXAMPLE["ecosystems"], "x/y": 1}}, "/ecosystems/x~1y"),
        ({**EXAMPLE, "caps": {**EXAMPLE["caps"], "~": 1}}, "/caps/~0"),
        (with_change("/caps/weekly", 5), "/caps/weekly"),
        # missing fields
        (with_change("/approval", DELETE), "/approval"),
        (with_change("/ecosystems", DELETE), "/ecosystems"),
        (with_change("/caps", DELETE), "/caps"),
        (with_change("/allow", DELETE), "/allow"),
        (with_change("/deny", DELETE), "/deny"),
        (with_change("/ecosystems/standard", DELETE), "/ecosystems/standard"),
        (with_change("/caps/monthly", DELETE), "/caps/monthly"),
        ({}, "/approval"),  # the first missing field, every time
        ({"deny": [], "allow": []}, "/approval"),
        # approval
        (with_change("/approval", "some"), "/approval"),
        (with_change("/approval", "OpenEcosystem"), "/approval"),
        (with_change("/approval", None), "/approval"),
        (with_change("/approval", ["all"]), "/approval"),
        (with_change("/approval", True), "/approval"),
        # switches
        (with_change("/ecosystems", True), "/ecosystems"),
        (with_change("/ecosystems", [True, True, True]), "/ecosystems"),
        (with_change("/ecosystems/premium", 1), "/ecosystems/premium"),
        (with_change("/ecosystems/standard", "true"), "/ecosystems/standard"),
        (with_change("/ecosystems/openEcosystem", None), "/ecosystems/openEcosystem"),
        # caps
        (with_change("/caps", None), "/caps"),
        (with_change("/caps", [1, 2, 3]), "/caps"),
        (with_change("/caps/perPayment", -1), "/caps/perPayment"),
        (with_change("/caps/daily", 1.5), "/caps/daily"),
        (with_change("/caps/daily", 1.0), "/caps/daily"),
        (with_change("/caps/monthly", True), "/caps/monthly"),
        (with_change("/caps/monthly", False), "/caps/monthly"),
        (with_change("/caps/monthly", 2**63), "/caps/monthly"),
        (with_change("/caps/monthly", 10**30), "/caps/monthly"),
        (with_change("/caps/perPayment", "1000000"), "/caps/perPayment"),
        (with_change("/caps/perPayment", {"usdc": 1}), "/caps/perPayment"),
        # rule lists
        (with_change("/allow", "api.example.com"), "/allow"),
        (with_change("/deny", None), "/deny"),
        (with_change("/allow/1", "not a host"), "/allow/1"),
        (with_change("/allow/0", ""), "/allow/0"),
        (with_change("/allow/0", 7), "/allow/0"),
        (with_change("/allow/0", None), "/allow/0"),
        (with_change("/allow/1", "*.com"), "/allow/1"),
        (with_change("/deny/0", "evil.example.com?x=1"), "/deny/0"),
        (with_change("/deny/0", "ftp://evil.example.com"), "/deny/0"),
        (with_change("/deny/0", "evil.example.com:99999"), "/deny/0"),
        # the same rule on both lists, however it is spelled
        (with_change("/deny/0", "api.example.com/weather"), "/allow"),
        (with_change("/deny/0", "HTTPS://API.example.com:443/weather/"), "/allow"),
    ],
)
def test_refusal_pointer(doc: object, pointer: str) -> None:
    assert refusal(doc).extensions["pointer"] == pointer


def test_both_lists_names_the_rule() -> None:
    error = refusal(with_change("/deny/0", "*.Example.org/"))
    assert "*.example.org" in error.detail and "both" in error.detail


def test_cap_refusal_says_base_units() -> None:
    assert "base units" in refusal(with_change("/caps/daily", 0.5)).detail


def test_too_many_rules() -> None:
    doc = with_change("/deny", ["evil.example.com"] * (MAX_RULES_PER_LIST + 1))
    assert refusal(doc).extensions["pointer"] == "/deny"


# --- budgets per seller on allow rules -------------------------------------------------------


def test_an_allow_entry_may_carry_a_budget_and_round_trips() -> None:
    allow = [
        {"seller": "API.example.com/weather/", "daily": 2_000_000},
        "*.example.org",
        {"seller": "b.example.net", "daily": None, "monthly": 5_000_000},
    ]
    doc = parse_policy_document({**EXAMPLE, "allow": allow})
    rendered = render_policy_document(doc)
    assert rendered["allow"] == [
        {"seller": "api.example.com/weather", "daily": 2_000_000, "monthly": None},
        "*.example.org",
        {"seller": "b.example.net", "daily": None, "monthly": 5_000_000},
    ]
    assert parse_policy_document(rendered) == doc
    # An object with neither cap is the plain rule.
    plain = parse_policy_document({**EXAMPLE, "allow": [{"seller": "a.example.com"}]})
    assert render_policy_document(plain)["allow"] == ["a.example.com"]


@pytest.mark.parametrize(
    ("entry", "pointer"),
    [
        ({"daily": 1}, "/allow/0/seller"),
        ({"seller": "a.example.com", "weekly": 1}, "/allow/0/weekly"),
        ({"seller": "a.example.com", "daily": -1}, "/allow/0/daily"),
        ({"seller": "a.example.com", "monthly": 1.5}, "/allow/0/monthly"),
        ({"seller": "*.com"}, "/allow/0/seller"),
        ({"seller": 5}, "/allow/0/seller"),
        (7, "/allow/0"),
    ],
)
def test_a_bad_allow_entry_is_refused_with_its_place(entry: object, pointer: str) -> None:
    assert refusal({**EXAMPLE, "allow": [entry]}).extensions["pointer"] == pointer
