"""docs/policy.md says what the code does: its examples are checked here."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from paysign.errors import InvalidPolicy
from paysign.http.problems import error_response
from paysign.policy.caps import day_window
from paysign.policy.decide import PolicySettings, Tier, decide
from paysign.policy.document import parse_policy_document, render_policy_document
from paysign.policy.rules import candidate_hosts, parse_rule
from paysign.policy.seller import seller_location
from paysign.services.refusals import cap_refusal, policy_refusal

DOC = (Path(__file__).parents[2] / "docs" / "policy.md").read_text(encoding="utf-8")


def _table(header: str) -> list[list[str]]:
    lines = DOC.split(header + "\n", 1)[1].splitlines()[1:]  # skip the |---| line
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


MATCH_ROWS = _table("| Rule | Seller URL | Matches? |")


def test_the_match_table_is_there() -> None:
    assert len(MATCH_ROWS) >= 20


@pytest.mark.parametrize(("rule", "url", "answer"), MATCH_ROWS)
def test_match_table(rule: str, url: str, answer: str) -> None:
    assert answer in ("yes", "no")
    parsed, location = parse_rule(rule), seller_location(url)
    assert parsed.matches(location) is (answer == "yes")
    if answer == "yes":
        assert parsed.host in candidate_hosts(location)


def _json_blocks() -> list[dict[str, Any]]:
    return [orjson.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC, flags=re.S)]


def test_policy_document_example_round_trips() -> None:
    (example,) = [b for b in _json_blocks() if "approval" in b]
    rendered = render_policy_document(parse_policy_document(example))
    assert rendered == {**example, "pending": []}  # pending is read-only


def test_refusal_examples_are_what_the_code_sends() -> None:
    examples = {b["type"].rsplit("/", 1)[1]: b for b in _json_blocks() if "type" in b}
    base = "https://paysign.example/problems"
    where = seller_location("https://new.example.net/v1/quote")
    pending = decide(PolicySettings.defaults(), [], where, Tier.OPEN_ECOSYSTEM)
    sent = orjson.loads(error_response(base, policy_refusal(pending, where)).body)
    assert sent == examples["allow-pending"]
    window = day_window(1_790_000_000)
    cap = cap_refusal("daily", 10_000_000, 250_000, 500_000, window.resets_at)
    assert orjson.loads(error_response(base, cap).body) == examples["spend-cap-exceeded"]


def test_refusal_table_lists_each_type_with_its_title() -> None:
    rows = {r[0]: r[1] for r in _table("| Slug | Title | Extra members |")}
    assert rows == {
        "seller-denied": "Seller is on the deny list",
        "ecosystem-disabled": "Payments to this ecosystem are switched off",
        "allow-pending": "Seller approval pending",
        "pending-approvals-full": "Too many sellers waiting for approval",
        "spend-cap-exceeded": "Spend cap exceeded",
        "payee-denied": "Payee is refused by the policy",
        "spending-frozen": "Spending is frozen",
        "payee-mismatch": "Payee differs from the seller's listing",
        "price-above-listing": "Price above the seller's listing",
    }


def test_error_examples_are_what_set_policy_prints() -> None:
    (example,) = [b for b in _json_blocks() if "approval" in b]
    changes = [
        lambda d: d["caps"].update(daily=1.5),
        lambda d: d.update(deny=["a.example.com", "b.example.com", "api.example.com?x=1"]),
        lambda d: d["ecosystems"].update(bazaar=True),
    ]
    for change in changes:
        doc = copy.deepcopy(example)
        change(doc)
        with pytest.raises(InvalidPolicy) as refused:
            parse_policy_document(doc)
        assert f"error: {refused.value.detail}\n" in DOC


def test_defaults_in_the_doc() -> None:
    caps = PolicySettings.defaults().caps
    for cap, amount in (("perPayment", caps.per_payment), ("daily", caps.daily)):
        assert f"| `{cap}` |" in DOC and f"(`{amount}`)" in DOC
    assert f"(`{caps.monthly}`)" in DOC
    assert "`openEcosystem` (default)" in DOC
