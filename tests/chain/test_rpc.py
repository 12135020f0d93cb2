"""The JSON-RPC client, hand-rolled transactions and the treasury's nonce discipline, on anvil."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from paysign.chain.authorizations import ChainUnavailable as AuthorizationsChainUnavailable
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.devchain import ANVIL_DEV_KEYS, USDC_ADDRESS, Devchain
from paysign.chain.errors import (
    ChainUnavailable,
    ExecutionReverted,
    RpcError,
    TreasuryNotConfigured,
)
from paysign.chain.rpc import JsonRpc
from paysign.chain.testnet import SandboxChain
from paysign.chain.transactions import sign_eip1559_transaction
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import transfer_data
from paysign.protocol import PrivateKeySigner

from .conftest import new_address

CLOSED = "http://127.0.0.1:9"  # discard port: nothing listens


@settings(max_examples=60, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32).filter(lambda k: 0 < int.from_bytes(k, "big") < 2**255),
    nonce=st.integers(0, 2**64 - 1),
    fees=st.tuples(st.integers(0, 10**12), st.integers(0, 10**15)),
    gas=st.integers(21_000, 30_000_000),
    to=st.one_of(st.none(), st.binary(min_size=20, max_size=20)),
    value=st.integers(0, 2**128),
    data=st.binary(max_size=300),
)
def test_transactions_are_byte_identical_to_eth_account(
    key: bytes,
    nonce: int,
    fees: tuple[int, int],
    gas: int,
    to: bytes | None,
    value: int,
    data: bytes,
) -> None:
    tip, max_fee = fees
    ours = sign_eip1559_transaction(
        PrivateKeySigner(key),
        chain_id=84532,
        nonce=nonce,
        max_priority_fee_per_gas=tip,
        max_fee_per_gas=max_fee,
        gas=gas,
        to=to,
        value=value,
        data=data,
    )
    tx: dict[str, Any] = {
        "type": 2,
        "chainId": 84532,
        "nonce": nonce,
        "maxPriorityFeePerGas": tip,
        "maxFeePerGas": max_fee,
        "gas": gas,
        "value": value,
        "data": data,
        "accessList": [],
    }
    if to is not None:
        tx["to"] = to
    theirs = Account.sign_transaction(tx, key)
    assert ours.raw == bytes(theirs.raw_transaction)
    assert ours.hash == bytes(theirs.hash)


def test_an_unreachable_node_is_chain_unavailable() -> None:
    with JsonRpc(CLOSED, timeout=2) as rpc, pytest.raises(ChainUnavailable):
        rpc.chain_id()
    states = RpcAuthorizationStates({"eip155:84532": CLOSED})
    with pytest.raises(AuthorizationsChainUnavailable):
        states.is_used("eip155:84532", USDC_ADDRESS, bytes(20), bytes(32))
    states.close()
    assert AuthorizationsChainUnavailable is ChainUnavailable
    chain = SandboxChain(CLOSED, usdc=USDC_ADDRESS, treasury_key=parse_private_key("11" * 32))
    with pytest.raises(ChainUnavailable):
        chain.send_usdc(new_address(), 1)
    chain.close()


def test_json_rpc_errors(chain: SandboxChain) -> None:
    with pytest.raises(RpcError) as caught:
        chain.rpc.request("eth_noSuchMethod")
    assert caught.value.code == -32601
    assert not isinstance(caught.value, ExecutionReverted)


def test_without_a_key_there_is_no_treasury(devchain: Devchain) -> None:
    chain = SandboxChain(devchain.rpc_url, usdc=USDC_ADDRESS, treasury_key=None)
    with pytest.raises(TreasuryNotConfigured):
        chain.send_usdc(new_address(), 1)
    chain.close()


def test_a_send_that_would_revert_sends_nothing(chain: SandboxChain) -> None:
    poor = Treasury(chain.rpc, parse_private_key(ANVIL_DEV_KEYS[3]))  # ETH, no USDC
    nonce = chain.rpc.transaction_count(poor.address)
    with pytest.raises(ExecutionReverted) as caught:
        poor.transfer_token(USDC_ADDRESS, new_address(), 1)
    assert caught.value.reason == "ERC20: transfer amount exceeds balance"
    assert chain.rpc.transaction_count(poor.address) == nonce


def test_receipts_by_polling_where_the_sync_call_is_missing(
    chain: SandboxChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    rpc = JsonRpc(chain.rpc_url)
    real = rpc.request
    calls: list[str] = []

    def without_sync(method: str, params: list[Any] | None = None) -> Any:
        calls.append(method)
        if method == "eth_sendRawTransactionSync":
            raise RpcError(method, -32601, "Method not found")
        return real(method, params)

    monkeypatch.setattr(rpc, "request", without_sync)
    treasury = Treasury(rpc, parse_private_key(ANVIL_DEV_KEYS[0]))
    wallet = new_address()
    # The dev treasury is shared with the module's chain: serialize through the same lock.
    assert chain.treasury is not None
    with chain.treasury._serialized():
        first = treasury.send(USDC_ADDRESS, transfer_data(wallet, 5))
        second = treasury.send(USDC_ADDRESS, transfer_data(wallet, 6))
    assert first.ok and second.ok
    assert calls.count("eth_sendRawTransactionSync") == 1  # remembered after the first refusal
    assert calls.count("eth_sendRawTransaction") == 2
    assert chain.usdc_balance(wallet) == 11
    rpc.close()


def test_concurrent_sends_from_threads_never_share_a_nonce(chain: SandboxChain) -> None:
    assert chain.treasury is not None
    start = chain.rpc.transaction_count(chain.treasury.address)
    wallets = [new_address() for _ in range(24)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        receipts = list(pool.map(lambda w: chain.send_usdc(w, 1_000), wallets))
    assert all(r.ok for r in receipts)
    assert len({r.transaction_hash for r in receipts}) == 24
    assert chain.rpc.transaction_count(chain.treasury.address) == start + 24
    assert chain.treasury.nonce_retries == 0
    assert all(chain.usdc_balance(w) == 1_000 for w in wallets)


_SENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from concurrent.futures import ThreadPoolExecutor
    from paysign.chain.devchain import USDC_ADDRESS
    from paysign.chain.testnet import SandboxChain
    from paysign.chain.treasury import parse_private_key
    url, lock, key, count = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    chain = SandboxChain(url, usdc=USDC_ADDRESS, treasury_key=parse_private_key(key),
                         lock_path=lock)
    chain.rpc.chain_id()
    time.sleep(max(0.0, float(sys.argv[5]) - time.time()))  # all processes start together
    with ThreadPoolExecutor(4) as pool:
        receipts = list(pool.map(lambda i: chain.send_usdc(bytes([i + 1]) * 20, 1), range(count)))
    assert all(r.ok for r in receipts)
    print(len(receipts), chain.treasury.nonce_retries)
    """
)


def test_concurrent_sends_from_processes_never_share_a_nonce(
    chain: SandboxChain, devchain: Devchain
) -> None:
    assert chain.treasury is not None
    start = chain.rpc.transaction_count(chain.treasury.address)
    lock = str(devchain.data_dir / "testnet-treasury.lock")
    start_at = str(time.time() + 1.5)
    args = [chain.rpc_url, lock, "0x" + devchain.treasury_key.hex(), "10", start_at]
    processes = [
        subprocess.Popen([sys.executable, "-c", _SENDER, *args], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    # ... while this process sends too, through its own lock on the same file.
    time.sleep(max(0.0, float(start_at) - time.time()))
    mine = [chain.send_usdc(secrets.token_bytes(20), 1) for _ in range(5)]
    outputs = [p.communicate(timeout=60)[0].strip() for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0]
    assert outputs == ["10 0", "10 0", "10 0"]  # sent, and never had to retry a stale nonce
    assert all(r.ok for r in mine) and chain.treasury.nonce_retries == 0
    assert chain.rpc.transaction_count(chain.treasury.address) == start + 35
