"""The big state's policy: thousands of made-up rules, none refusing the benchmarked seller."""

from __future__ import annotations

from typing import Any

from bench.accounts import BENCH_POLICY
from bench.made_up_hosts import SUBDOMAINS, TLDS, WORDS
from bench.request import REQUEST_BODY

# Rules on the benchmarked seller's own host and its parents: the candidate lookup for
# api.example.com (api.example.com, *.example.com, *.com) returns the 8 without a port, none of
# which refuses /weather (``/weatherx`` does not cover ``/weather``: prefixes end on segments).
OWN_HOST_RULES: dict[str, list[str]] = {
    "allow": [
        "api.example.com",
        "api.example.com/weather/v2",
        "*.example.com/status",
        "api.example.com:8443/weather",
    ],
    "deny": [
        "api.example.com/admin",
        "api.example.com/weatherx",
        "api.example.com/v1",
        "*.example.com/internal",
        "api.example.com/weather-archive",
        "example.com",
        "api.example.com:8443",
    ],
}
_PREFIXES = ["/v1", "/v2", "/v3", "/api", "/api/v1", "/beta", "/premium", "/v1/quotes", "/graphql"]


def big_policy(rules: int, rng: Any) -> dict[str, Any]:
    """BENCH_POLICY's switches and caps with ``rules`` rules, about half allow, half deny, as a
    user would write them (some with a scheme or a trailing slash; ``set-policy`` normalises)."""
    from paysign.policy.rules import parse_rule, seller_location

    lists: dict[str, list[str]] = {k: list(v) for k, v in OWN_HOST_RULES.items()}
    seen = {parse_rule(t) for v in lists.values() for t in v}
    want = {"allow": rules // 2, "deny": rules - rules // 2}
    while any(len(lists[k]) < want[k] for k in want):
        kind = "allow" if len(lists["allow"]) < want["allow"] else "deny"
        if len(lists["deny"]) < want["deny"] and rng.random() < 0.5:
            kind = "deny"
        domain = f"{rng.choice(WORDS)}{rng.randrange(4000)}.{rng.choice(TLDS)}"
        wildcard = rng.random() < 0.2
        if wildcard:
            host = "*." + domain
        else:
            sub = rng.choice(SUBDOMAINS)
            host = f"{sub}.{domain}" if sub else domain
            if rng.random() < 0.03:
                host += f":{rng.choice((8080, 8443, 9000))}"
        text = host + (rng.choice(_PREFIXES) if rng.random() < 0.35 else "")
        if rng.random() < 0.05 and not wildcard:
            text = "https://" + text + "/"
        rule = parse_rule(text)
        if rule in seen:
            continue
        seen.add(rule)
        lists[kind].append(text)
    where = seller_location(str(REQUEST_BODY["sellerUrl"]))
    refusing = [t for t in lists["deny"] if parse_rule(t).matches(where)]
    if refusing or not any(parse_rule(t).matches(where) for t in lists["allow"]):
        raise SystemExit(f"big policy would refuse the benchmarked seller: {refusing[:3]}")
    return {**BENCH_POLICY, "allow": lists["allow"], "deny": lists["deny"]}
