"""Withdrawals on Base mainnet, on both databases, against a real anvil with Base's chain id and
the USDC code at Circle's Base address: the configured relayer key submits the wallet's signed
transferWithAuthorization and pays the gas, a wrong code moves nothing, an amount over the
balance is refused before any code is spent, and a transfer the token refuses is recorded as
failed with nothing sent."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from withdrawal_support import fresh_address, fresh_code, new_holder, stored_withdrawals

from anvil_support import base_mainnet_chain, rpc, set_usdc_balance
from paysign.bootstrap import Runtime
from paysign.chain.relay import MainnetRelay
from paysign.config import BASE_MAINNET_USDC, Settings
from paysign.errors import WithdrawalRefused, WithdrawalUnavailable
from paysign.protocol import address_of, checksum_address, parse_address
from paysign.services import accounts, withdrawals
from paysign.services.portal_deps import PortalDeps, portal_deps
from paysign.services.sign_in import CredentialsRefused

BASE = "eip155:8453"
ONE_USDC = 1_000_000
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
NAME_SELECTOR = "0x06fdde03"  # name()
RELAYER_GAS_MONEY = 10**18


@pytest.fixture(scope="module")
def base_chain(dev_chain: Any) -> Iterator[str]:
    with base_mainnet_chain(dev_chain.rpc_url) as url:
        yield url


@dataclasses.dataclass(frozen=True)
class Mainnet:
    url: str
    relay: MainnetRelay
    relayer: str  # checksummed

    def usdc(self, address: str) -> int:
        return self.relay.usdc_balance(parse_address(address))

    def eth(self, address: str) -> int:
        return int(rpc(self.url, "eth_getBalance", [address, "latest"]), 16)


def token_name(url: str) -> str:
    """The EIP-712 domain name the token at Base's USDC address signs under."""
    answer = bytes.fromhex(
        rpc(url, "eth_call", [{"to": BASE_MAINNET_USDC, "data": NAME_SELECTOR}, "latest"])[2:]
    )
    length = int.from_bytes(answer[32:64], "big")
    return answer[64 : 64 + length].decode()


def give_usdc(url: str, owner: str, amount: int) -> None:
    set_usdc_balance(url, parse_address(owner), amount)


def mainnet_runtime(runtime: Runtime, url: str, *, usdc_name: str) -> Runtime:
    """The runtime as ``build_runtime`` wires it when the operator sets the mainnet RPC URL and
    a relayer key: a fresh key, given gas money on the chain."""
    relayer_key = secrets.token_bytes(32)
    rpc(url, "anvil_setBalance", [checksum_address(address_of(relayer_key)), RELAYER_GAS_MONEY])
    settings = Settings(
        data_dir=runtime.settings.data_dir,
        database_url=runtime.settings.database_url,
        mainnet_rpc_url=url,
        mainnet_relayer_key="0x" + relayer_key.hex(),
        usdc_mainnet_name=usdc_name,
    )
    relay = MainnetRelay.from_settings(settings)
    assert relay is not None
    return dataclasses.replace(runtime, settings=settings, mainnet_relay=relay)


@pytest.fixture
def mainnet(runtime: Runtime, base_chain: str) -> Iterator[Runtime]:
    # The copied test token signs under its own name; Circle's Base USDC under "USD Coin".
    wired = mainnet_runtime(runtime, base_chain, usdc_name=token_name(base_chain))
    yield wired
    assert wired.mainnet_relay is not None
    wired.mainnet_relay.close()


@pytest.fixture
def chain(mainnet: Runtime, base_chain: str) -> Mainnet:
    relay = mainnet.mainnet_relay
    assert relay is not None
    return Mainnet(base_chain, relay, relay.relayer.address_hex)


@pytest.fixture
def deps(mainnet: Runtime) -> PortalDeps:
    return portal_deps(mainnet)


@pytest.fixture
def holder(mainnet: Runtime, base_chain: str) -> accounts.CreatedAccount:
    created = new_holder(mainnet)
    give_usdc(base_chain, created.wallet_address, 5 * ONE_USDC)
    return created


def test_the_relayer_sends_the_usdc_and_pays_the_gas(
    mainnet: Runtime, deps: PortalDeps, chain: Mainnet, holder: accounts.CreatedAccount
) -> None:
    wallet = holder.wallet_address
    to = fresh_address()
    wallet_eth = chain.eth(wallet)
    relayer_eth = chain.eth(chain.relayer)

    sent = withdrawals.withdraw(deps, holder.account_id, BASE, to, "1", fresh_code(mainnet, holder))

    assert (sent.network, sent.to_address, sent.amount) == (BASE, to, ONE_USDC)
    [row] = stored_withdrawals(mainnet)
    assert (row["network"], row["to_address"], row["amount"]) == (BASE, to, ONE_USDC)
    assert (row["status"], row["transaction_hash"]) == ("sent", sent.transaction_hash)
    assert (row["from_address"], row["sandbox"], row["fresh_code"]) == (wallet, False, True)

    receipt = rpc(chain.url, "eth_getTransactionReceipt", [sent.transaction_hash])
    assert int(receipt["status"], 16) == 1
    assert receipt["from"].lower() == chain.relayer.lower()
    assert receipt["to"].lower() == BASE_MAINNET_USDC.lower()
    transfers = [log for log in receipt["logs"] if log["topics"][0] == TRANSFER_TOPIC]
    assert [(t["topics"][1][-40:], t["topics"][2][-40:]) for t in transfers] == [
        (wallet[2:].lower(), to[2:].lower())
    ]
    assert int(transfers[0]["data"], 16) == ONE_USDC
    assert transfers[0]["address"].lower() == BASE_MAINNET_USDC.lower()

    assert (chain.usdc(wallet), chain.usdc(to)) == (4 * ONE_USDC, ONE_USDC)
    assert chain.eth(wallet) == wallet_eth == 0  # the wallet holds no ETH and paid none
    gas_paid = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert gas_paid > 0
    assert chain.eth(chain.relayer) == relayer_eth - gas_paid


def test_a_wrong_code_moves_nothing(
    mainnet: Runtime, deps: PortalDeps, chain: Mainnet, holder: accounts.CreatedAccount
) -> None:
    to = fresh_address()
    relayer_eth = chain.eth(chain.relayer)
    wrong = f"{(int(fresh_code(mainnet, holder)) + 1) % 1_000_000:06d}"

    with pytest.raises(CredentialsRefused):
        withdrawals.withdraw(deps, holder.account_id, BASE, to, "1", wrong)

    assert (chain.usdc(holder.wallet_address), chain.usdc(to)) == (5 * ONE_USDC, 0)
    assert chain.eth(chain.relayer) == relayer_eth  # no transaction was sent
    assert stored_withdrawals(mainnet) == []


def test_more_than_the_balance_is_refused_before_the_code_is_spent(
    mainnet: Runtime, deps: PortalDeps, chain: Mainnet, holder: accounts.CreatedAccount
) -> None:
    to = fresh_address()
    code = fresh_code(mainnet, holder)

    with pytest.raises(WithdrawalRefused) as refused:
        withdrawals.withdraw(deps, holder.account_id, BASE, to, "5.000001", code)
    assert refused.value.extensions["pointer"] == "/amount"
    assert "holds 5 USDC" in refused.value.detail
    assert (chain.usdc(holder.wallet_address), chain.usdc(to)) == (5 * ONE_USDC, 0)
    assert stored_withdrawals(mainnet) == []

    # The refusal spent no code: the same one still carries the whole balance.
    withdrawals.withdraw(deps, holder.account_id, BASE, to, "5", code)
    assert (chain.usdc(holder.wallet_address), chain.usdc(to)) == (0, 5 * ONE_USDC)


def test_a_transfer_the_token_refuses_is_recorded_failed_and_sends_nothing(
    runtime: Runtime, base_chain: str
) -> None:
    # Signed under a domain name the token does not use: the signature cannot verify.
    misnamed = mainnet_runtime(runtime, base_chain, usdc_name="Not This Token")
    relay = misnamed.mainnet_relay
    assert relay is not None
    holder = accounts.create_account(
        misnamed.db,
        misnamed.vault,
        misnamed.clock,
        email=f"holder-{secrets.token_hex(4)}@example.com",
        password="correct horse battery staple",
    )
    give_usdc(base_chain, holder.wallet_address, 5 * ONE_USDC)
    chain = Mainnet(base_chain, relay, relay.relayer.address_hex)
    relayer_eth = chain.eth(chain.relayer)
    to = fresh_address()

    try:
        with pytest.raises(WithdrawalUnavailable) as refused:
            withdrawals.withdraw(
                portal_deps(misnamed),
                holder.account_id,
                BASE,
                to,
                "1",
                fresh_code(misnamed, holder),
            )
    finally:
        relay.close()

    assert "nothing was sent" in refused.value.detail
    assert (chain.usdc(holder.wallet_address), chain.usdc(to)) == (5 * ONE_USDC, 0)
    assert chain.eth(chain.relayer) == relayer_eth
    [row] = stored_withdrawals(misnamed)
    assert (row["status"], row["transaction_hash"]) == ("failed", None)
