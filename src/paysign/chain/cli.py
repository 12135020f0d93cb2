"""``paysign devchain``: look at and reset the sandbox dev chain.

paysign devchain info     {"rpcUrl", "chainId", "usdc", "treasury"} of the running chain
paysign devchain reset    forget the saved chain; the next ``paysign serve`` starts afresh
"""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from paysign.chain.devchain_files import DevchainRunning, reset_devchain, running_devchain
from paysign.chain.errors import ChainError
from paysign.chain.rpc import JsonRpc
from paysign.chain.treasury import parse_private_key
from paysign.config import Settings
from paysign.protocol import address_of, checksum_address, parse_address


def _emit(obj: dict[str, Any]) -> None:
    click.echo(orjson.dumps(obj).decode())


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@click.group()
def devchain() -> None:
    """The sandbox chain (eip155:84532) that `paysign serve` runs when
    PAYSIGN_TESTNET_RPC_URL is not set."""


@devchain.command()
def info() -> None:
    """Print {"rpcUrl", "chainId", "usdc", "treasury"} of the sandbox chain.

    Without PAYSIGN_TESTNET_RPC_URL: the dev chain a running `paysign serve` started for this
    data directory (exit 1 when none runs). With it: that external chain.
    """
    settings = Settings()
    if settings.testnet_rpc_url:
        try:
            with JsonRpc(settings.testnet_rpc_url, timeout=5.0) as rpc:
                chain_id = rpc.chain_id()
        except ChainError as exc:
            _fail(f"the chain at PAYSIGN_TESTNET_RPC_URL does not answer: {exc}")
            return
        key = settings.testnet_treasury_key
        _emit(
            {
                "rpcUrl": settings.testnet_rpc_url,
                "chainId": chain_id,
                "usdc": checksum_address(parse_address(settings.usdc_testnet)),
                "treasury": checksum_address(address_of(parse_private_key(key))) if key else None,
            }
        )
        return
    running = running_devchain(settings.data_dir)
    if running is None:
        _fail(
            f"no dev chain is running for data directory {settings.data_dir} "
            "(`paysign serve` starts one)"
        )
        return
    _emit(running.as_json())


@devchain.command()
def reset() -> None:
    """Forget the dev chain's saved state, so the next `paysign serve` starts a fresh chain.

    Refused while a server runs the chain: stop it first.
    """
    settings = Settings()
    if settings.testnet_rpc_url:
        _fail("PAYSIGN_TESTNET_RPC_URL is set: paysign does not run that chain and cannot reset it")
    try:
        report = reset_devchain(settings.data_dir)
    except DevchainRunning as exc:
        _fail(str(exc))
        return
    forgot = report["forgot"]
    if forgot is None:
        note = "there was no saved dev chain; the next `paysign serve` starts a fresh one"
    else:
        note = (
            f"forgot the dev chain: {forgot['blocks']} blocks and {forgot['transactions']} "
            "transactions, every test-USDC and ETH balance, every used or cancelled "
            "authorization nonce. The next `paysign serve` starts a fresh chain with the token at "
            "the same address and a re-minted treasury. The database is not touched: test-funds "
            "grants (and their 24 h window) and signature records remain, though their "
            "transactions no longer exist on the new chain."
        )
    _emit({"reset": True, **report, "note": note})
