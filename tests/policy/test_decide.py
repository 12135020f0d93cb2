"""decide(): deny → ecosystem switch → allow list / pending, with the rule and reason reported."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paysign.policy.caps import Caps
from paysign.policy.decide import (
    Approval,
    Decision,
    Grant,
    Outcome,
    PolicySettings,
    Tier,
    decide,
)
from paysign.policy.rules import parse_rule
from paysign.policy.seller import seller_location

WHERE = seller_location("https://api.example.com/v1/quote?x=1")


def policy(
    approval: Approval = Approval.OPEN_ECOSYSTEM,
    *,
    premium: bool = True,
    standard: bool = True,
    open_ecosystem: bool = True,
) -> PolicySettings:
    return PolicySettings(approval, premium, standard, open_ecosystem, Caps.defaults())


def allow(text: str) -> Grant:
    return Grant("allow", parse_rule(text))


def deny(text: str) -> Grant:
    return Grant("deny", parse_rule(text))


def judge(
    settings: PolicySettings, grants: list[Grant], tier: Tier = Tier.OPEN_ECOSYSTEM
) -> Decision:
    return decide(settings, grants, WHERE, tier)


def test_defaults() -> None:
    defaults = PolicySettings.defaults()
    assert defaults == policy()
    assert defaults.caps == Caps(1_000_000, 10_000_000, 100_000_000)


# --- each outcome, with its rule and reason ---------------------------------------------------


def test_denied_names_the_rule() -> None:
    decision = judge(policy(), [deny("api.example.com/v1")])
    assert decision == Decision(
        Outcome.DENIED,
        "api.example.com/v1/quote matches deny rule api.example.com/v1",
        "api.example.com/v1",
        Tier.OPEN_ECOSYSTEM,
    )
    assert not decision.allowed


@pytest.mark.parametrize(
    ("tier", "switch"),
    [
        (Tier.PREMIUM, "premium"),
        (Tier.STANDARD, "standard"),
        (Tier.OPEN_ECOSYSTEM, "openEcosystem"),
    ],
)
def test_ecosystem_disabled_names_the_switch(tier: Tier, switch: str) -> None:
    off = {"premium": True, "standard": True, "open_ecosystem": True}
    off["open_ecosystem" if switch == "openEcosystem" else switch] = False
    decision = judge(policy(Approval.NONE, **off), [], tier)
    assert decision == Decision(
        Outcome.ECOSYSTEM_DISABLED,
        f"api.example.com/v1/quote is a {tier.value} seller and the {switch} switch is off",
        f"ecosystems.{switch}",
        tier,
    )
    # only that tier's switch matters
    for other in Tier:
        if other is not tier:
            assert judge(policy(Approval.NONE, **off), [], other).allowed


def test_allowed_by_rule_names_the_rule() -> None:
    decision = judge(policy(), [allow("api.example.com")])
    assert decision == Decision(
        Outcome.ALLOWED,
        "api.example.com/v1/quote matches allow rule api.example.com",
        "api.example.com",
        Tier.OPEN_ECOSYSTEM,
    )
    assert decision.allowed


def test_pending_names_the_approval_setting() -> None:
    decision = judge(policy(), [])
    assert decision == Decision(
        Outcome.PENDING,
        "api.example.com/v1/quote needs approval (approval: openEcosystem) and is not allowed yet",
        "approval.openEcosystem",
        Tier.OPEN_ECOSYSTEM,
    )


def test_allowed_without_approval_names_the_approval_setting() -> None:
    decision = judge(policy(Approval.NONE), [])
    assert decision == Decision(
        Outcome.ALLOWED,
        "api.example.com/v1/quote needs no approval (approval: none)",
        "approval.none",
        Tier.OPEN_ECOSYSTEM,
    )


# --- approval modes by tier -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("approval", "tier", "outcome"),
    [
        (Approval.NONE, Tier.PREMIUM, Outcome.ALLOWED),
        (Approval.NONE, Tier.STANDARD, Outcome.ALLOWED),
        (Approval.NONE, Tier.OPEN_ECOSYSTEM, Outcome.ALLOWED),
        (Approval.OPEN_ECOSYSTEM, Tier.PREMIUM, Outcome.ALLOWED),
        (Approval.OPEN_ECOSYSTEM, Tier.STANDARD, Outcome.ALLOWED),
        (Approval.OPEN_ECOSYSTEM, Tier.OPEN_ECOSYSTEM, Outcome.PENDING),
        (Approval.ALL, Tier.PREMIUM, Outcome.PENDING),
        (Approval.ALL, Tier.STANDARD, Outcome.PENDING),
        (Approval.ALL, Tier.OPEN_ECOSYSTEM, Outcome.PENDING),
    ],
)
def test_approval_modes(approval: Approval, tier: Tier, outcome: Outcome) -> None:
    decision = judge(policy(approval), [], tier)
    assert decision.outcome is outcome
    assert decision.rule == f"approval.{approval.value}"
    assert decision.tier is tier
    # an allow rule always settles it
    approved = judge(policy(approval), [allow("api.example.com/v1")], tier)
    assert (approved.outcome, approved.rule) == (Outcome.ALLOWED, "api.example.com/v1")


def test_needs_approval() -> None:
    assert not policy(Approval.NONE).needs_approval(Tier.OPEN_ECOSYSTEM)
    assert policy(Approval.OPEN_ECOSYSTEM).needs_approval(Tier.OPEN_ECOSYSTEM)
    assert not policy(Approval.OPEN_ECOSYSTEM).needs_approval(Tier.STANDARD)
    assert all(policy(Approval.ALL).needs_approval(t) for t in Tier)


def test_tier_switch_names() -> None:
    assert [t.switch_name for t in Tier] == ["premium", "standard", "openEcosystem"]


# --- the order ----------------------------------------------------------------------------


def test_deny_beats_allow_whatever_the_specificity() -> None:
    grants = [allow("api.example.com/v1/quote"), deny("*.example.com")]
    decision = judge(policy(Approval.NONE), grants, Tier.PREMIUM)
    assert (decision.outcome, decision.rule) == (Outcome.DENIED, "*.example.com")


def test_deny_beats_a_disabled_switch() -> None:
    decision = judge(policy(open_ecosystem=False), [deny("api.example.com")])
    assert decision.outcome is Outcome.DENIED


def test_disabled_switch_beats_allow() -> None:
    decision = judge(policy(open_ecosystem=False), [allow("api.example.com")])
    assert (decision.outcome, decision.rule) == (
        Outcome.ECOSYSTEM_DISABLED,
        "ecosystems.openEcosystem",
    )


def test_unrelated_rules_are_ignored() -> None:
    grants = [
        deny("api.example.com/v2"),
        deny("example.com"),
        deny("api.example.com:8443"),
        deny("*.api.example.com"),
        allow("other.example.com"),
    ]
    assert judge(policy(), grants).outcome is Outcome.PENDING
    assert judge(policy(Approval.NONE), grants).outcome is Outcome.ALLOWED


def test_grants_may_be_any_iterable() -> None:
    decision = decide(policy(), iter([allow("api.example.com")]), WHERE, Tier.OPEN_ECOSYSTEM)
    assert decision.allowed


# --- the most specific matching rule is reported --------------------------------------------


@pytest.mark.parametrize("kind", ["allow", "deny"])
@pytest.mark.parametrize(
    ("rules", "reported"),
    [
        (["*.example.com", "api.example.com"], "api.example.com"),
        (["api.example.com", "*.example.com/v1/quote"], "api.example.com"),
        (["api.example.com", "api.example.com/v1"], "api.example.com/v1"),
        (["api.example.com/v1", "api.example.com/v1/quote"], "api.example.com/v1/quote"),
        (["*.example.com", "*.example.com/v1"], "*.example.com/v1"),
    ],
)
def test_most_specific_rule_is_reported(
    kind: Literal["allow", "deny"], rules: list[str], reported: str
) -> None:
    for ordering in (rules, rules[::-1]):
        grants = [Grant(kind, parse_rule(r)) for r in ordering]
        assert judge(policy(), grants).rule == reported


def test_most_specific_wildcard_is_reported() -> None:
    where = seller_location("https://a.b.example.com/x")
    grants = [deny("*.example.com"), deny("*.b.example.com")]
    for ordering in (grants, grants[::-1]):
        assert decide(policy(), ordering, where, Tier.PREMIUM).rule == "*.b.example.com"


def test_port_rule_is_more_specific_than_the_host() -> None:
    where = seller_location("https://api.example.com:8443/x")
    grants = [allow("api.example.com"), allow("api.example.com:8443")]
    for ordering in (grants, grants[::-1]):
        assert decide(policy(), ordering, where, Tier.PREMIUM).rule == "api.example.com:8443"


# --- properties -------------------------------------------------------------------------------

RULES = st.sampled_from(
    [
        "api.example.com",
        "api.example.com/v1",
        "api.example.com/v1/quote",
        "api.example.com/v2",
        "*.example.com",
        "example.com",
        "api.example.com:8443",
    ]
)
GRANTS = st.lists(st.builds(Grant, st.sampled_from(["allow", "deny"]), RULES.map(parse_rule)))
SETTINGS = st.builds(
    PolicySettings,
    st.sampled_from(Approval),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.just(Caps.defaults()),
)


@given(SETTINGS, GRANTS, st.sampled_from(Tier))
def test_decision_follows_the_documented_order(
    settings: PolicySettings, grants: list[Grant], tier: Tier
) -> None:
    decision = decide(settings, grants, WHERE, tier)
    matching = [g for g in grants if g.rule.matches(WHERE)]
    denies = {str(g.rule) for g in matching if g.kind == "deny"}
    allows = {str(g.rule) for g in matching if g.kind == "allow"}
    assert decision.tier is tier
    if denies:
        assert decision.outcome is Outcome.DENIED and decision.rule in denies
    elif not settings.ecosystem_enabled(tier):
        assert decision.outcome is Outcome.ECOSYSTEM_DISABLED
        assert decision.rule == f"ecosystems.{tier.switch_name}"
    elif allows:
        assert decision.outcome is Outcome.ALLOWED and decision.rule in allows
    elif settings.needs_approval(tier):
        assert decision.outcome is Outcome.PENDING
    else:
        assert decision.outcome is Outcome.ALLOWED
    assert decision == decide(settings, grants[::-1], WHERE, tier)  # order of grants is moot
