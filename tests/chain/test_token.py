"""TestUSDC on the real anvil dev chain, at Base Sepolia's USDC address, driven the way x402 does:
a payment signed by paysign's own code, settled by a relayer with ``transferWithAuthorization``.
Every rule and revert reason FiatToken v2.2 has on that path is checked here."""

from __future__ import annotations

import secrets

import pytest

from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.devchain import (
    ANVIL_DEV_KEYS,
    TREASURY_MINT,
    USDC_ADDRESS,
    Devchain,
)
from paysign.chain.errors import ExecutionReverted, TransactionFailed
from paysign.chain.rpc import Receipt
from paysign.chain.testnet import SandboxChain
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import (
    AUTHORIZATION_CANCELED_TOPIC,
    AUTHORIZATION_USED_TOPIC,
    TRANSFER_TOPIC,
    SignatureForm,
    cancel_authorization_data,
    decode_address,
    decode_uint,
    load_test_usdc,
    mint_data,
    receive_with_authorization_data,
    selector,
    transfer_with_authorization_data,
)
from paysign.protocol import (
    PrivateKeySigner,
    WalletSigner,
    address_of,
    sign_payment,
    transfer_authorization_digest,
)

from .conftest import (
    CANCEL_TYPEHASH,
    DOMAIN,
    RECEIVE_TYPEHASH,
    high_s,
    new_address,
    now,
    payment_terms,
    typed_digest,
    word,
)

FORMS: list[SignatureForm] = ["vrs", "bytes"]


def _read(chain: SandboxChain, signature: str, *args: bytes) -> bytes:
    return chain.rpc.call(USDC_ADDRESS, selector(signature) + b"".join(args))


def _string(data: bytes) -> str:
    length = int.from_bytes(data[32:64], "big")
    return data[64 : 64 + length].decode()


def _twa(
    signer: PrivateKeySigner | WalletSigner,
    to: bytes,
    value: int,
    *,
    valid_after: int = 0,
    valid_before: int | None = None,
    nonce: bytes | None = None,
    form: SignatureForm = "vrs",
    signature: bytes | None = None,
    from_: bytes | None = None,
) -> tuple[bytes, bytes]:
    """(calldata, nonce) of a transferWithAuthorization signed by ``signer``."""
    nonce = nonce or secrets.token_bytes(32)
    valid_before = now() + 60 if valid_before is None else valid_before
    from_ = from_ or signer.address
    if signature is None:
        digest = transfer_authorization_digest(
            DOMAIN, from_, to, value, valid_after, valid_before, nonce
        )
        signature = signer.sign_digest(digest)
    data = transfer_with_authorization_data(
        from_, to, value, valid_after, valid_before, nonce, signature, form=form
    )
    return data, nonce


def _reverts(chain: SandboxChain, relayer: Treasury, data: bytes) -> str:
    with pytest.raises(ExecutionReverted) as caught:
        chain.rpc.call(USDC_ADDRESS, data, sender=relayer.address)
    return caught.value.reason


# ---- the token itself ----


def test_token_lives_at_base_sepolia_usdc_with_its_domain(
    chain: SandboxChain, devchain: Devchain
) -> None:
    assert chain.rpc.chain_id() == 84532
    assert chain.rpc.code(USDC_ADDRESS) == load_test_usdc().runtime_bytecode
    assert _read(chain, "DOMAIN_SEPARATOR()") == DOMAIN
    # Base Sepolia's real USDC has this domain separator: signatures are interchangeable.
    assert DOMAIN.hex().startswith("71f17a3b2ff373b8")
    assert _string(_read(chain, "name()")) == "USDC"
    assert _string(_read(chain, "symbol()")) == "USDC"
    assert _string(_read(chain, "version()")) == "2"
    assert decode_uint(_read(chain, "decimals()")) == 6
    assert decode_address(_read(chain, "owner()")) == devchain.treasury_address
    assert chain.usdc_balance(devchain.treasury_address) > TREASURY_MINT - 10**12


def test_mint_is_the_owners_alone(chain: SandboxChain, relayer: Treasury) -> None:
    reason = _reverts(chain, relayer, mint_data(relayer.address, 1))
    assert reason == "Ownable: caller is not the owner"


def test_test_funds_transfer_is_a_real_transaction(chain: SandboxChain) -> None:
    wallet = new_address()
    receipt = chain.send_usdc(wallet, 10_000_000)
    assert receipt.ok and len(receipt.transaction_hash) == 66
    assert chain.rpc.receipt(receipt.transaction_hash) == receipt
    (log,) = receipt.logs
    assert log.address == USDC_ADDRESS and log.topics[0] == TRANSFER_TOPIC
    assert log.topics[2] == word(wallet) and decode_uint(log.data) == 10_000_000
    assert chain.usdc_balance(wallet) == 10_000_000


# ---- a payment signed by paysign settles ----


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("signer_kind", ["PrivateKeySigner", "WalletSigner"])
def test_payment_signed_by_paysign_settles_and_moves_balances_exactly(
    chain: SandboxChain, relayer: Treasury, form: SignatureForm, signer_kind: str
) -> None:
    key = secrets.token_bytes(32)
    signer = PrivateKeySigner(key) if signer_kind == "PrivateKeySigner" else None
    signer = signer or WalletSigner(key, address_of(key))
    chain.send_usdc(signer.address, 2_000_000)
    seller = new_address()
    supply = decode_uint(_read(chain, "totalSupply()"))

    nonce = secrets.token_bytes(32)
    payment = sign_payment(payment_terms(seller, 1_234_567), signer, now=now(), nonce=nonce)
    auth = payment.payload["payload"]["authorization"]
    signature = bytes.fromhex(payment.payload["payload"]["signature"][2:])
    assert chain.authorization_used(signer.address, nonce) is False

    data = transfer_with_authorization_data(
        bytes.fromhex(auth["from"][2:]),
        bytes.fromhex(auth["to"][2:]),
        int(auth["value"]),
        int(auth["validAfter"]),
        int(auth["validBefore"]),
        bytes.fromhex(auth["nonce"][2:]),
        signature,
        form=form,
    )
    receipt = relayer.send(USDC_ADDRESS, data)

    assert receipt.ok
    assert chain.usdc_balance(signer.address) == 2_000_000 - 1_234_567
    assert chain.usdc_balance(seller) == 1_234_567
    assert decode_uint(_read(chain, "totalSupply()")) == supply
    assert chain.authorization_used(signer.address, nonce) is True
    used, transfer = receipt.logs
    assert used.topics == (AUTHORIZATION_USED_TOPIC, word(signer.address), nonce)
    assert transfer.topics == (TRANSFER_TOPIC, word(signer.address), word(seller))

    # The same authorization again: refused, in simulation and on chain (status 0).
    assert _reverts(chain, relayer, data) == "FiatTokenV2: authorization is used or canceled"
    with pytest.raises(TransactionFailed):
        relayer.send(USDC_ADDRESS, data, gas=200_000)
    assert chain.usdc_balance(seller) == 1_234_567


# ---- FiatToken's rules ----


@pytest.mark.parametrize("form", FORMS)
def test_expired_authorization_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    # validBefore in the past; validBefore == block time is expired too (strict bound).
    data, _ = _twa(payer, new_address(), 1, valid_before=now() - 1, form=form)
    assert _reverts(chain, relayer, data) == "FiatTokenV2: authorization is expired"
    payment = sign_payment(
        payment_terms(new_address(), 1), payer, now=now() - 600, nonce=secrets.token_bytes(32)
    )
    assert payment.valid_before < now()


@pytest.mark.parametrize("form", FORMS)
def test_not_yet_valid_authorization_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    data, _ = _twa(payer, new_address(), 1, valid_after=now() + 3600, form=form)
    assert _reverts(chain, relayer, data) == "FiatTokenV2: authorization is not yet valid"


@pytest.mark.parametrize("form", FORMS)
def test_high_s_signature_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    to, nonce, before = new_address(), secrets.token_bytes(32), now() + 60
    digest = transfer_authorization_digest(DOMAIN, payer.address, to, 1, 0, before, nonce)
    malleable = high_s(payer.sign_digest(digest))
    data, _ = _twa(payer, to, 1, valid_before=before, nonce=nonce, signature=malleable, form=form)
    assert _reverts(chain, relayer, data) == "ECRecover: invalid signature 's' value"


@pytest.mark.parametrize("form", FORMS)
def test_v_0_or_1_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    to, nonce, before = new_address(), secrets.token_bytes(32), now() + 60
    digest = transfer_authorization_digest(DOMAIN, payer.address, to, 1, 0, before, nonce)
    good = payer.sign_digest(digest)
    raw_v = good[:64] + bytes((good[64] - 27,))
    data, _ = _twa(payer, to, 1, valid_before=before, nonce=nonce, signature=raw_v, form=form)
    assert _reverts(chain, relayer, data) == "ECRecover: invalid signature 'v' value"


@pytest.mark.parametrize("form", FORMS)
def test_signature_by_another_key_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    thief = PrivateKeySigner(secrets.token_bytes(32))
    data, _ = _twa(thief, new_address(), 1, from_=payer.address, form=form)
    assert _reverts(chain, relayer, data) == "FiatTokenV2: invalid signature"


def test_signature_recovering_to_zero_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner
) -> None:
    zero_r = bytes(32) + (1).to_bytes(32, "big") + b"\x1b"  # ecrecover returns address(0)
    data, _ = _twa(payer, new_address(), 1, signature=zero_r, from_=bytes(20))
    assert _reverts(chain, relayer, data) == "ECRecover: invalid signature"


def test_bytes_form_refuses_a_signature_that_is_not_65_bytes(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner
) -> None:
    to, nonce, before = new_address(), secrets.token_bytes(32), now() + 60
    digest = transfer_authorization_digest(DOMAIN, payer.address, to, 1, 0, before, nonce)
    signature = payer.sign_digest(digest) + b"\0"
    data = transfer_with_authorization_data(
        payer.address, to, 1, 0, before, nonce, signature, form="bytes"
    )
    assert _reverts(chain, relayer, data) == "ECRecover: invalid signature length"


def test_more_than_the_balance_reverts(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner
) -> None:
    data, nonce = _twa(payer, new_address(), 5_000_001)
    assert _reverts(chain, relayer, data) == "ERC20: transfer amount exceeds balance"
    assert chain.authorization_used(payer.address, nonce) is False


@pytest.mark.parametrize("form", FORMS)
def test_cancelled_authorization_cannot_be_used(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    to = new_address()
    data, nonce = _twa(payer, to, 1_000_000)
    cancel_sig = payer.sign_digest(typed_digest(CANCEL_TYPEHASH, word(payer.address), nonce))
    cancel = cancel_authorization_data(payer.address, nonce, cancel_sig, form=form)

    receipt = relayer.send(USDC_ADDRESS, cancel)
    (log,) = receipt.logs
    assert log.topics == (AUTHORIZATION_CANCELED_TOPIC, word(payer.address), nonce)
    assert chain.authorization_used(payer.address, nonce) is True
    assert _reverts(chain, relayer, data) == "FiatTokenV2: authorization is used or canceled"
    assert _reverts(chain, relayer, cancel) == "FiatTokenV2: authorization is used or canceled"
    assert chain.usdc_balance(to) == 0


def test_cancel_needs_the_authorizers_signature(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner
) -> None:
    nonce = secrets.token_bytes(32)
    other = PrivateKeySigner(secrets.token_bytes(32))
    forged = other.sign_digest(typed_digest(CANCEL_TYPEHASH, word(payer.address), nonce))
    data = cancel_authorization_data(payer.address, nonce, forged)
    assert _reverts(chain, relayer, data) == "FiatTokenV2: invalid signature"


@pytest.mark.parametrize("form", FORMS)
def test_receive_with_authorization_only_by_the_payee(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner, form: SignatureForm
) -> None:
    payee = Treasury(chain.rpc, parse_private_key(ANVIL_DEV_KEYS[2]))
    before_balance = chain.usdc_balance(payee.address)
    nonce, valid_before = secrets.token_bytes(32), now() + 60
    words = (word(payer.address), word(payee.address), word(700_000), word(0), word(valid_before))
    signature = payer.sign_digest(typed_digest(RECEIVE_TYPEHASH, *words, nonce))
    data = receive_with_authorization_data(
        payer.address, payee.address, 700_000, 0, valid_before, nonce, signature, form=form
    )

    assert _reverts(chain, relayer, data) == "FiatTokenV2: caller must be the payee"
    # A TransferWithAuthorization signature is not a ReceiveWithAuthorization one.
    twa_sig = payer.sign_digest(
        transfer_authorization_digest(
            DOMAIN, payer.address, payee.address, 700_000, 0, valid_before, nonce
        )
    )
    wrong_type = receive_with_authorization_data(
        payer.address, payee.address, 700_000, 0, valid_before, nonce, twa_sig, form=form
    )
    with pytest.raises(ExecutionReverted, match="invalid signature"):
        chain.rpc.call(USDC_ADDRESS, wrong_type, sender=payee.address)

    receipt: Receipt = payee.send(USDC_ADDRESS, data)
    assert receipt.ok
    assert chain.usdc_balance(payee.address) == before_balance + 700_000
    assert chain.authorization_used(payer.address, nonce) is True


# ---- reading authorizationState the way the reconciler does ----


def test_rpc_authorization_states_against_the_chain(
    chain: SandboxChain, relayer: Treasury, payer: PrivateKeySigner
) -> None:
    data, used_nonce = _twa(payer, new_address(), 1)
    relayer.send(USDC_ADDRESS, data)
    unused_nonce = secrets.token_bytes(32)

    states = RpcAuthorizationStates({"eip155:84532": chain.rpc_url})
    try:
        assert states.networks == frozenset({"eip155:84532"})
        assert states.is_used("eip155:84532", USDC_ADDRESS, payer.address, used_nonce) is True
        assert states.is_used("eip155:84532", USDC_ADDRESS, payer.address, unused_nonce) is False
        # Another authorizer's nonce space is separate.
        assert states.is_used("eip155:84532", USDC_ADDRESS, new_address(), used_nonce) is False
    finally:
        states.close()
