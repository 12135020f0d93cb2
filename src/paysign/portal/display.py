"""How the portal writes values for people: times, networks, secrets. Template filters."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup, escape

from paysign.protocol.networks import BASE_MAINNET, BASE_SEPOLIA

NETWORK_NAMES = {BASE_MAINNET.caip2: "Base", BASE_SEPOLIA.caip2: "Base Sepolia"}


def network_name(network: str | None) -> str:
    """A network as a person knows it; an unknown one as it was written.

    >>> network_name("eip155:8453"), network_name("eip155:84532"), network_name("eip155:1")
    ('Base', 'Base Sepolia', 'eip155:1')
    """
    if network is None:
        return ""
    return NETWORK_NAMES.get(network, network)


def when(value: int | str | None) -> Markup:
    """A moment for reading (UTC, to the minute), with the exact ISO value for machines and a
    hover; Unix seconds or an ISO 8601 string.

    >>> print(when(1_790_000_000))
    <time datetime="2026-09-21T14:13:20Z" title="2026-09-21T14:13:20Z">21 Sep 2026, 14:13 UTC</time>
    >>> when("2026-01-02T03:04:05Z").striptags()
    '2 Jan 2026, 03:04 UTC'
    >>> str(when(None))
    ''
    """
    if value is None or value == "":
        return Markup("")
    if isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(int(value), tz=UTC)
    exact = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = f"{moment.day} {moment:%b %Y, %H:%M} UTC"
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(exact, escape(shown))


def grouped(secret: str, size: int = 4) -> str:
    """A secret typed by hand, in groups of ``size`` so the eye keeps its place.

    >>> grouped("JBSWY3DPEHPK3PXPJBSW")
    'JBSW Y3DP EHPK 3PXP JBSW'
    """
    return " ".join(secret[i : i + size] for i in range(0, len(secret), size))


# Why a payment was refused, as the holder would put it (the slug stays beside it).
REFUSAL_REASONS = {
    "allow-pending": "seller waiting for your approval",
    "pending-approvals-full": "approvals queue full",
    "seller-denied": "seller on your deny list",
    "payee-denied": "payee on your deny list",
    "ecosystem-disabled": "ecosystem switched off",
    "spend-cap-exceeded": "over a spend cap",
    "spending-frozen": "spending frozen",
    "price-above-listing": "price above the catalog's",
    "payee-mismatch": "pays someone other than the listing's payee",
}


def refusal_reason(slug: str) -> str:
    """A refusal's reason in words; an unknown slug as it is.

    >>> refusal_reason("spend-cap-exceeded"), refusal_reason("something-new")
    ('over a spend cap', 'something-new')
    """
    return REFUSAL_REASONS.get(slug, slug)
