"""X-Forwarded-For is a client's word unless it comes from a proxy the operator named: the
per-address sign-in limit must hold against a client that rotates the header (real
``paysign serve`` processes, real HTTP)."""

from __future__ import annotations

import re

import httpx
import pytest

from conftest import ServeProcess
from paysign.config import Settings

# Both databases behave alike here; one is enough for a process-level check.
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

LIMIT = 3


def _failed_sign_ins(url: str, forwarded_for: list[str]) -> list[int]:
    """One failed portal sign-in per entry (a different email each time, so only the
    per-address limit can trip), each claiming to come from that address."""
    statuses = []
    with httpx.Client(base_url=url, timeout=30) as browser:
        page = browser.get("/portal/sign-in")
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text
        for n, address in enumerate(forwarded_for):
            response = browser.post(
                "/portal/sign-in",
                data={
                    "csrf": found.group(1),
                    "email": f"nobody-{n}@example.com",
                    "password": "not the password",
                    "totp": "000000",
                },
                headers={"X-Forwarded-For": address, "X-Forwarded-Proto": "https"},
            )
            statuses.append(response.status_code)
    return statuses


def _serve(env: dict[str, str], **extra: str) -> ServeProcess:
    return ServeProcess(
        {**env, "PAYSIGN_OAUTH_MAX_FAILURES_PER_ADDRESS": str(LIMIT), **extra},
    )


@pytest.fixture
def rotating() -> list[str]:
    return [f"203.0.113.{n}" for n in range(1, LIMIT + 3)]


@pytest.mark.slow
@SQLITE_ONLY
def test_rotating_forwarded_for_does_not_dodge_the_address_limit(
    env: dict[str, str], rotating: list[str]
) -> None:
    # uvicorn's own FORWARDED_ALLOW_IPS must not turn trust back on behind our back.
    with _serve(env, FORWARDED_ALLOW_IPS="*") as url:
        statuses = _failed_sign_ins(url, rotating)
    assert statuses == [401] * LIMIT + [429] * (len(rotating) - LIMIT)


@pytest.mark.slow
@SQLITE_ONLY
def test_a_trusted_proxy_names_the_client(env: dict[str, str], rotating: list[str]) -> None:
    with _serve(env, PAYSIGN_TRUSTED_PROXIES="127.0.0.1") as url:
        # Each forwarded client has its own budget...
        assert _failed_sign_ins(url, rotating) == [401] * len(rotating)
        # ...and one client behind the proxy still runs out of it.
        repeated = ["198.51.100.7"] * (LIMIT + 1)
        assert _failed_sign_ins(url, repeated) == [401] * LIMIT + [429]


def test_trusted_proxies_setting() -> None:
    assert Settings().trusted_proxy_list == []
    settings = Settings(trusted_proxies=" 10.0.0.1, 10.1.2.3/8 ,, ::1 ")
    assert settings.trusted_proxy_list == ["10.0.0.1", "10.0.0.0/8", "::1"]
    assert settings.uvicorn_proxy_options() == {
        "proxy_headers": True,
        "forwarded_allow_ips": ["10.0.0.1", "10.0.0.0/8", "::1"],
    }
    assert Settings().uvicorn_proxy_options() == {
        "proxy_headers": False,
        "forwarded_allow_ips": [],
    }
    for bad in ("*", "proxy.internal", "10.0.0.300"):
        with pytest.raises(ValueError, match="PAYSIGN_TRUSTED_PROXIES"):
            Settings(trusted_proxies=bad)
