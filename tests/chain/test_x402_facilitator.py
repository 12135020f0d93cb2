"""Code nobody here wrote, on the dev chain: the official x402 SDK facilitator (2.25.0, its own
web3 signer over JSON-RPC) verifies and settles a payment paysign signed, at the SDK's default
Base Sepolia USDC address, and refuses to settle it twice."""

from __future__ import annotations

import secrets
import time

import x402
from x402.http.utils import decode_payment_signature_header
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.default_assets import DEFAULT_ASSETS
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme
from x402.schemas import PaymentRequirements

from paysign.chain.devchain import ANVIL_DEV_KEYS, USDC_ADDRESS
from paysign.chain.testnet import SandboxChain
from paysign.protocol import PrivateKeySigner, checksum_address, sign_payment

from .conftest import new_address, payment_terms


def test_sdk_facilitator_settles_a_paysign_payment_on_the_dev_chain(
    chain: SandboxChain, payer: PrivateKeySigner
) -> None:
    (default_asset,) = DEFAULT_ASSETS["eip155:84532"]
    assert default_asset["asset"] == checksum_address(USDC_ADDRESS)

    facilitator = x402.x402FacilitatorSync()
    signer = FacilitatorWeb3Signer(ANVIL_DEV_KEYS[4], chain.rpc_url)
    facilitator.register(["eip155:84532"], ExactEvmFacilitatorScheme(signer))

    seller = new_address()
    terms = payment_terms(seller, 250_000)
    payment = sign_payment(terms, payer, now=int(time.time()), nonce=secrets.token_bytes(32))
    payload = decode_payment_signature_header(payment.header)
    requirements = PaymentRequirements.model_validate(terms.accepted)

    verified = facilitator.verify(payload, requirements)
    assert verified.is_valid, verified
    settled = facilitator.settle(payload, requirements)
    assert settled.success, settled
    receipt = chain.rpc.receipt(settled.transaction)
    assert receipt is not None and receipt.ok
    assert chain.usdc_balance(seller) == 250_000
    assert chain.usdc_balance(payer.address) == 5_000_000 - 250_000

    again = facilitator.verify(payload, requirements)
    assert not again.is_valid
    assert "nonce" in (again.invalid_reason or "")
    assert not facilitator.settle(payload, requirements).success
    assert chain.usdc_balance(seller) == 250_000
