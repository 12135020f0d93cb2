"""The overview's balance on Base, read from the operator's mainnet RPC endpoint: a real anvil
with Base's chain id and the USDC code at Circle's address, the wallet's balance written into
the token's storage. Unset or unreachable, the page says so and still renders."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from anvil_support import base_mainnet_chain, set_usdc_balance
from conftest import FrozenClock, LiveServer, free_port
from paysign.bootstrap import Runtime
from paysign.chain.balances import LiveUsdc
from paysign.config import BASE_MAINNET_USDC
from paysign.protocol import parse_address
from paysign.services import accounts

from .conftest import signed_in


@pytest.fixture(scope="module")
def base_chain(dev_chain: Any) -> Iterator[str]:
    with base_mainnet_chain(dev_chain.rpc_url) as url:
        yield url


def overview_of(runtime: Runtime, holder: accounts.CreatedAccount) -> str:
    from paysign.app import create_app

    with (
        LiveServer(create_app(runtime)) as server,
        httpx.Client(base_url=server.url, timeout=10) as browser,
    ):
        page = signed_in(browser, holder, runtime.clock)  # type: ignore[arg-type]
    assert page.status_code == 200, page.text
    found = re.search(r'<td id="live-balance">(.*?)</td>', page.text, re.S)
    assert found, page.text
    return re.sub(r"<[^>]+>", "", found.group(1))


def test_the_balance_on_base_is_read_from_the_chain(
    runtime: Runtime, holder: accounts.CreatedAccount, base_chain: str
) -> None:
    owner = parse_address(holder.wallet_address)
    amount = 12_345_678  # 12.345678 USDC
    set_usdc_balance(base_chain, owner, amount)
    live = dataclasses.replace(
        runtime, live_usdc=LiveUsdc(base_chain, usdc=parse_address(BASE_MAINNET_USDC))
    )
    assert "12.345678 USDC" in overview_of(live, holder)


def test_an_unreachable_endpoint_is_said_and_the_page_renders(
    runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    down = dataclasses.replace(
        runtime, live_usdc=LiveUsdc(nowhere, usdc=parse_address(BASE_MAINNET_USDC))
    )
    assert "balance unavailable" in overview_of(down, holder)


def test_without_an_endpoint_the_page_says_none_is_configured(
    runtime: Runtime, holder: accounts.CreatedAccount, clock: FrozenClock
) -> None:
    assert runtime.live_usdc is None
    assert "not configured" in overview_of(runtime, holder)
