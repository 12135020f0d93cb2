"""Withdrawals on the real dev chain, on both databases: a fresh code moves the USDC (the
treasury submits the wallet's signed transferWithAuthorization and pays the gas), a wrong or
replayed code moves nothing, and addresses and amounts that would lose money are refused
before any code is spent."""

from __future__ import annotations

import dataclasses

import pytest
from withdrawal_support import fresh_address, fresh_code, new_holder, stored_withdrawals

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.chain.testnet import SandboxChain
from paysign.errors import WithdrawalRefused, WithdrawalUnavailable
from paysign.protocol import address_of, parse_address
from paysign.services import accounts, withdrawals
from paysign.services.portal_deps import PortalDeps, portal_deps
from paysign.services.sign_in import CredentialsRefused

SANDBOX = "eip155:84532"
ONE_USDC = 1_000_000
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


@pytest.fixture
def holder(chained_runtime: Runtime) -> accounts.CreatedAccount:
    created = new_holder(chained_runtime)
    _chain(chained_runtime).send_usdc(parse_address(created.wallet_address), 3 * ONE_USDC)
    return created


@pytest.fixture
def deps(chained_runtime: Runtime) -> PortalDeps:
    return portal_deps(chained_runtime)


def _chain(runtime: Runtime) -> SandboxChain:
    assert runtime.sandbox_chain is not None
    return runtime.sandbox_chain


def test_a_fresh_code_moves_the_usdc_and_the_treasury_pays_the_gas(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    chain = _chain(chained_runtime)
    wallet = parse_address(holder.wallet_address)
    to = fresh_address()
    before = chain.usdc_balance(wallet)

    sent = withdrawals.withdraw(
        deps, holder.account_id, SANDBOX, to, "1", fresh_code(chained_runtime, holder)
    )

    assert chain.usdc_balance(wallet) == before - ONE_USDC
    assert chain.usdc_balance(parse_address(to)) == ONE_USDC
    receipt = chain.rpc.request("eth_getTransactionReceipt", [sent.transaction_hash])
    assert int(receipt["status"], 16) == 1
    assert chain.treasury is not None
    assert receipt["from"].lower() == chain.treasury.address_hex.lower()
    assert chain.rpc.balance(wallet) == 0  # the wallet holds no ETH: it paid no gas
    transfers = [log for log in receipt["logs"] if log["topics"][0] == TRANSFER_TOPIC]
    assert [t["topics"][1][-40:] for t in transfers] == [holder.wallet_address[2:].lower()]
    assert transfers[0]["topics"][2][-40:] == to[2:].lower()

    [row] = stored_withdrawals(chained_runtime)
    assert row["account_id"] == holder.account_id
    assert (row["to_address"], row["amount"], row["network"]) == (to, ONE_USDC, SANDBOX)
    assert (row["status"], row["transaction_hash"]) == ("sent", sent.transaction_hash)
    assert row["fresh_code"] is True
    assert row["created_at"] == chained_runtime.clock.now()
    assert [r.transaction_hash for r in withdrawals.history(deps, holder.account_id)] == [
        sent.transaction_hash
    ]


def test_a_replayed_or_wrong_code_moves_nothing(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    chain = _chain(chained_runtime)
    wallet = parse_address(holder.wallet_address)
    code = fresh_code(chained_runtime, holder)
    withdrawals.withdraw(deps, holder.account_id, SANDBOX, fresh_address(), "0.5", code)
    after_first = chain.usdc_balance(wallet)

    victim = fresh_address()
    with pytest.raises(CredentialsRefused):  # the same code again: already used
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, victim, "1", code)
    wrong = f"{(int(fresh_code(chained_runtime, holder)) + 1) % 1_000_000:06d}"
    with pytest.raises(CredentialsRefused):
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, victim, "1", wrong)
    with pytest.raises(CredentialsRefused):
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, victim, "1", "")

    assert chain.usdc_balance(wallet) == after_first
    assert chain.usdc_balance(parse_address(victim)) == 0
    assert len(stored_withdrawals(chained_runtime)) == 1


@pytest.mark.parametrize(
    ("to", "amount", "pointer"),
    [
        ("0x" + "00" * 20, "1", "/to"),
        ("wallet", "1", "/to"),
        ("usdc", "1", "/to"),
        ("not an address", "1", "/to"),
        ("mistyped", "1", "/to"),
        ("fresh", "3.000001", "/amount"),  # more than the wallet holds
        ("fresh", "0", "/amount"),
        ("fresh", "-1", "/amount"),
        ("fresh", "0.0000001", "/amount"),
        ("fresh", "NaN", "/amount"),
        # A decimal comma (a phone's keypad in many languages): was read as 3 USDC, not 0.3.
        ("fresh", "0,3", "/amount"),
        ("fresh", "1e0", "/amount"),
    ],
)
def test_refused_withdrawals_spend_no_code_and_move_nothing(
    chained_runtime: Runtime,
    deps: PortalDeps,
    holder: accounts.CreatedAccount,
    to: str,
    amount: str,
    pointer: str,
) -> None:
    chain = _chain(chained_runtime)
    fresh = fresh_address()
    # One letter in the wrong case: the same bytes, a checksum that no longer matches.
    letter = next(i for i, char in enumerate(fresh) if i > 1 and char.isalpha())
    mistyped = fresh[:letter] + fresh[letter].swapcase() + fresh[letter + 1 :]
    address = {
        "wallet": holder.wallet_address,
        "usdc": chain.usdc_hex,
        "fresh": fresh,
        "mistyped": mistyped,
    }.get(to, to)
    wallet = parse_address(holder.wallet_address)
    before = chain.usdc_balance(wallet)
    code = fresh_code(chained_runtime, holder)

    with pytest.raises(WithdrawalRefused) as refused:
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, address, amount, code)
    assert refused.value.extensions["pointer"] == pointer
    assert chain.usdc_balance(wallet) == before
    assert stored_withdrawals(chained_runtime) == []
    # The code was not spent by the refusal: it still carries a real withdrawal.
    withdrawals.withdraw(deps, holder.account_id, SANDBOX, fresh, "0.25", code)
    assert chain.usdc_balance(wallet) == before - 250_000


def test_mainnet_without_a_relayer_is_refused_clearly(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    with pytest.raises(WithdrawalUnavailable) as refused:
        withdrawals.review(deps, holder.account_id, "eip155:8453", fresh_address(), "1")
    assert "PAYSIGN_MAINNET_RELAYER_KEY" in refused.value.detail
    with pytest.raises(WithdrawalRefused):
        withdrawals.review(deps, holder.account_id, "eip155:1", fresh_address(), "1")


def test_no_sandbox_chain_is_refused_clearly(
    chained_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    chainless = portal_deps(dataclasses.replace(chained_runtime, sandbox_chain=None))
    with pytest.raises(WithdrawalUnavailable) as refused:
        withdrawals.review(chainless, holder.account_id, SANDBOX, fresh_address(), "1")
    assert "no sandbox chain" in refused.value.detail


def test_a_withdrawal_is_in_the_activity_and_its_export(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    from paysign.services import activity

    to = fresh_address()
    sent = withdrawals.withdraw(
        deps, holder.account_id, SANDBOX, to, "1.5", fresh_code(chained_runtime, holder)
    )
    everything = activity.page_of(
        chained_runtime.db, holder.account_id, activity.ActivityFilters(), size=10
    )
    [row] = everything.rows
    entry = activity.entry_of(row)
    assert entry["decision"] == "withdrawn"
    assert (entry["payTo"], entry["amount"], entry["network"]) == (to, 1_500_000, SANDBOX)
    assert (entry["status"], entry["transaction"]) == ("sent", sent.transaction_hash)
    assert entry["sandbox"] is True
    assert entry["detail"] == "confirmed with a fresh authenticator code"
    assert entry["at"].startswith("2026-")
    assert activity.Cursor.parse(row.cursor.token()) == row.cursor

    def count(**filters: object) -> int:
        found = activity.page_of(
            chained_runtime.db,
            holder.account_id,
            activity.ActivityFilters(**filters),  # type: ignore[arg-type]
            size=10,
        )
        return len(found.rows)

    assert count(decision="withdrawn") == 1
    assert count(decision="signed") == 0
    assert count(seller_contains="example") == 0  # a withdrawal has no seller
    assert count(status="settled") == 0
    assert count(sandbox=False) == 0
    assert count(network="eip155:8453") == 0

    text = "".join(
        activity.csv_chunks(
            activity.all_rows(chained_runtime.db, holder.account_id, activity.ActivityFilters())
        )
    )
    header, line = text.strip().split("\r\n")
    cells = dict(zip(header.split(","), line.split(","), strict=True))
    assert cells["decision"] == "withdrawn"
    assert cells["amount_usdc"] == "1.500000"
    assert (cells["pay_to"], cells["transaction"]) == (to, sent.transaction_hash)
    assert cells["status"] == "sent"
    assert cells["detail"] == "confirmed with a fresh authenticator code"


def test_the_wallet_key_appears_in_no_log_record_or_row(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    from structlog.testing import capture_logs

    from paysign.custody import SealedSecret
    from paysign.services.accounts import wallet_context
    from paysign.store import portal_repo

    with chained_runtime.db.read() as conn:
        keyed = portal_repo.wallet_holder(conn, holder.account_id)
    assert keyed is not None
    key = chained_runtime.vault.open(
        wallet_context(keyed.wallet_id), SealedSecret.from_bytes(keyed.sealed_wallet_key)
    )
    assert address_of(key) == parse_address(holder.wallet_address)
    with capture_logs() as records:
        sent = withdrawals.withdraw(
            deps,
            holder.account_id,
            SANDBOX,
            fresh_address(),
            "1",
            fresh_code(chained_runtime, holder),
        )
    assert any(record["event"] == "withdrawal_sent" for record in records)
    written = repr(records) + repr(sent) + repr(stored_withdrawals(chained_runtime))
    assert key.hex() not in written.lower()
    assert key.hex() not in repr(deps).lower()


class _IdleChain:
    """The sandbox chain as it is after a quiet spell: it mines only when asked, so its newest
    block is long past (here 700 s) while the next one will be stamped now."""

    def __init__(self, chain: SandboxChain) -> None:
        self._chain = chain

    def __getattr__(self, name: str) -> object:
        return getattr(self._chain, name)

    def block_time(self) -> int:
        return self._chain.block_time() - 700


def test_a_withdrawal_after_the_chain_was_idle_is_still_valid_when_mined(
    chained_runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    chain = _chain(chained_runtime)
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    clock.current = chain.block_time()  # the service's clock is the chain's wall clock
    idle = dataclasses.replace(deps, sandbox_chain=_IdleChain(chain))
    wallet = parse_address(holder.wallet_address)
    before = chain.usdc_balance(wallet)
    code = fresh_code(chained_runtime, holder)
    withdrawals.withdraw(idle, holder.account_id, SANDBOX, fresh_address(), "1", code)
    assert chain.usdc_balance(wallet) == before - ONE_USDC
    [row] = stored_withdrawals(chained_runtime)
    assert row["valid_before"] > clock.now()
