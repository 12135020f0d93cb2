"""The whole payment through :mod:`paysign.client`, against sellers built with the x402 SDK and
settled on the dev chain: what the seller answered, what the chain moved, what paysign signed."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import pytest

from paysign.client import (
    AllowPending,
    AsyncPaysignClient,
    EcosystemDisabled,
    NoAcceptableOption,
    PaymentRejected,
    PaysignAuth,
    PaysignClient,
    PaysignSigner,
    PriceExceedsLimit,
    SellerDenied,
    SellerUnreachable,
    SpendCapExceeded,
    Unauthorized,
    payment_of,
)
from paysign.services import policy

from .conftest import PRICES, Buyer, Sellers, client_for, weather_answer


def decoded(header: str) -> dict:
    return json.loads(base64.b64decode(header, validate=True))


def assert_settled_once(buyer: Buyer, sellers: Sellers, tx: str, amount: int) -> None:
    """The receipt's transaction is mined, and it is the wallet's only USDC transfer:
    ``amount`` from the wallet to the seller's payTo."""
    receipt = buyer.chain.rpc.request("eth_getTransactionReceipt", [tx])
    assert receipt is not None and int(receipt["status"], 16) == 1
    (transfer,) = buyer.transfers()
    assert transfer["transactionHash"] == tx
    assert transfer["topics"][2] == "0x" + bytes(12).hex() + sellers.pay_to[2:].lower()
    assert int(transfer["data"], 16) == amount


def test_a_v2_seller_is_paid_and_settled_on_chain(buyer: Buyer, sellers: Sellers) -> None:
    url = sellers.url + "/v2/weather/paris"
    before = buyer.balance(), buyer.balance(sellers.pay_to)
    with client_for(buyer, sandbox=True) as http:
        response = http.get(url)

    assert response.status_code == 200, response.text
    assert response.json() == {**weather_answer("paris"), "sandbox": "true"}  # the seller's
    payment = payment_of(response)
    assert payment is not None
    assert (payment.amount, payment.network, payment.x402_version) == (10_000, "eip155:84532", 2)
    assert payment.sandbox and payment.attempts == 1
    assert payment.pay_to == sellers.pay_to and payment.seller_url == url
    settlement = payment.settlement
    assert settlement is not None and settlement.success
    assert settlement.raw == decoded(response.headers["PAYMENT-RESPONSE"])
    assert settlement.payer is not None and settlement.payer.lower() == buyer.wallet.lower()
    assert payment.transaction is not None and len(payment.transaction) == 66
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["weather"])
    assert (buyer.balance(), buyer.balance(sellers.pay_to)) == (
        before[0] - PRICES["weather"],
        before[1] + PRICES["weather"],
    )
    (signed,) = buyer.ledger("signed")
    assert signed["nonce"] == payment.nonce and signed["sandbox"] is True
    assert buyer.chain.authorization_used(buyer.wallet_bytes, bytes.fromhex(payment.nonce[2:]))


def test_a_v1_seller_is_paid_with_x_payment(buyer: Buyer, sellers: Sellers) -> None:
    before = buyer.balance()
    with client_for(buyer, sandbox=True) as http:
        response = http.get(sellers.url + "/v1/fact")

    assert response.status_code == 200, response.text
    assert response.json() == {"fact": "Octopuses have three hearts.", "x402": 1}
    payment = payment_of(response)
    assert payment is not None and payment.x402_version == 1
    (header,) = sellers.paid_headers("/v1/fact")[-1:]
    assert decoded(header)["network"] == "base-sepolia"  # a v1 payload, in X-PAYMENT
    assert payment.settlement is not None
    assert payment.settlement.raw == decoded(response.headers["X-PAYMENT-RESPONSE"])
    assert payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["fact"])
    assert buyer.balance() == before - PRICES["fact"]


def test_a_post_body_is_sent_again_with_the_payment(buyer: Buyer, sellers: Sellers) -> None:
    body = {"question": "ünïcode ok?", "n": [1, 2, 3]}
    with client_for(buyer, sandbox=True) as http:
        response = http.post(sellers.url + "/v2/echo", json=body)

    assert response.status_code == 200, response.text
    assert response.json() == {"echo": body, "sandbox": "true"}
    payment = payment_of(response)
    assert payment is not None and payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["echo"])


def test_the_wanted_option_is_chosen_and_put_first(buyer: Buyer, sellers: Sellers) -> None:
    """The seller lists mainnet first; in sandbox mode the testnet option is signed (moved to
    the front of accepts) and the SDK seller matches it among its terms."""
    with client_for(buyer, sandbox=True) as http:
        response = http.get(sellers.url + "/v2/mixed")

    assert response.status_code == 200, response.text
    header = sellers.paid_headers("/v2/mixed")[-1]
    assert decoded(header)["accepted"]["network"] == "eip155:84532"
    payment = payment_of(response)
    assert payment is not None and payment.amount == PRICES["mixed_testnet"]
    assert payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["mixed_testnet"])


def test_the_async_client_pays_too(buyer: Buyer, sellers: Sellers) -> None:
    async def main() -> httpx.Response:
        async with AsyncPaysignClient(
            buyer.api_key, paysign_url=buyer.service, sandbox=True
        ) as http:
            return await http.get(sellers.url + "/v2/weather/oslo")

    response = asyncio.run(main())
    assert response.json() == {**weather_answer("oslo"), "sandbox": "true"}
    payment = payment_of(response)
    assert payment is not None and payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["weather"])


def test_the_auth_works_in_a_plain_httpx_client(buyer: Buyer, sellers: Sellers) -> None:
    events: list[str] = []
    auth = PaysignAuth(
        PaysignSigner(buyer.api_key, buyer.service),
        sandbox=True,
        on_event=lambda kind, message: events.append(kind),
    )
    with httpx.Client(auth=auth, timeout=30) as http:
        free = http.get(sellers.url + "/free")
        paid = http.get(sellers.url + "/v2/weather/rome")

    assert free.json() == {"free": True} and payment_of(free) is None
    assert paid.status_code == 200 and payment_of(paid) is not None
    assert events == ["signing", "paying", "paid"]
    assert len(buyer.transfers()) == 1


# ---- rule 6: no answer to the paid request --------------------------------------------------


def test_a_paid_request_cut_off_is_sent_again_with_the_same_signature(
    buyer: Buyer, sellers: Sellers
) -> None:
    """The first paid request never reaches the seller (the connection is cut): the client
    sends the same header again, the seller settles it, and the chain moved the price once."""
    before = buyer.balance()
    with client_for(buyer, sandbox=True) as http:
        response = http.get(sellers.url + "/drop-before/weather/lima")

    assert response.status_code == 200, response.text
    assert response.json() == {**weather_answer("lima"), "sandbox": "true"}
    first, second = sellers.paid_headers("/drop-before/weather/lima")
    assert first == second  # the same signature, not a new one
    payment = payment_of(response)
    assert payment is not None and payment.attempts == 2
    assert payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["weather"])
    assert buyer.balance() == before - PRICES["weather"]
    assert len(buyer.ledger("signed")) == 1  # signed once


def test_an_answer_lost_after_settlement_is_never_paid_twice(
    buyer: Buyer, sellers: Sellers
) -> None:
    """The seller settles the first paid request but its answer is lost: the client retries
    with the same header, the seller (the nonce is used) asks for payment again, and the client
    reports that rather than signing a second payment. One transfer on chain."""
    before = buyer.balance()
    with client_for(buyer, sandbox=True) as http, pytest.raises(PaymentRejected) as caught:
        http.get(sellers.url + "/drop-after/weather/kyiv")

    first, second = sellers.paid_headers("/drop-after/weather/kyiv")
    assert first == second
    assert caught.value.possibly_settled and caught.value.payment.attempts == 2
    assert "nonce" in caught.value.reason
    assert len(buyer.transfers()) == 1
    assert buyer.balance() == before - PRICES["weather"]
    (signed,) = buyer.ledger("signed")
    assert signed["nonce"] == caught.value.payment.nonce
    assert buyer.chain.authorization_used(
        buyer.wallet_bytes, bytes.fromhex(caught.value.payment.nonce[2:])
    )


def test_without_the_retry_transport_the_caller_retry_reuses_the_signature(
    buyer: Buyer, sellers: Sellers
) -> None:
    auth = PaysignAuth(PaysignSigner(buyer.api_key, buyer.service), sandbox=True)
    url = sellers.url + "/drop-before/weather/quito"
    with httpx.Client(auth=auth, timeout=30) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            http.get(url)
        response = http.get(url)  # the caller's own retry

    assert response.status_code == 200, response.text
    first, second = sellers.paid_headers("/drop-before/weather/quito")
    assert first == second
    assert len(buyer.ledger("signed")) == 1 and len(buyer.transfers()) == 1


def test_no_answer_until_the_signature_expires_is_seller_unreachable(
    buyer: Buyer, sellers: Sellers
) -> None:
    """Every paid request is cut off: the same signature is sent until it is about to expire
    (validBefore - 6 s, the facilitators' margin), then the client gives up, never re-signing."""
    buyer.runtime.clock.current = int(time.time())  # validBefore = now + 8 s
    with client_for(buyer, sandbox=True) as http, pytest.raises(SellerUnreachable) as caught:
        http.get(sellers.url + "/drop-always/weather/nuuk")

    sent = sellers.paid_headers("/drop-always/weather/nuuk")
    assert len(sent) == caught.value.attempts >= 2 and len(set(sent)) == 1
    assert time.time() >= caught.value.valid_before - 6 - 1
    assert caught.value.retryable
    (signed,) = buyer.ledger("signed")
    assert signed["nonce"] == caught.value.nonce
    assert buyer.transfers() == []


# ---- nothing is signed ---------------------------------------------------------------------


def test_a_price_above_max_amount_is_not_signed(buyer: Buyer, sellers: Sellers) -> None:
    with (
        client_for(buyer, sandbox=True, max_amount=1_000_000) as http,
        pytest.raises(PriceExceedsLimit) as caught,
    ):
        http.get(sellers.url + "/v2/expensive")

    assert (caught.value.amount, caught.value.max_amount) == (PRICES["expensive"], 1_000_000)
    assert buyer.ledger() == []  # paysign was never asked: no signature, no refusal
    assert sellers.paid_headers("/v2/expensive") == []
    assert buyer.transfers() == []


def test_a_seller_without_a_usdc_option_is_not_signed(buyer: Buyer, sellers: Sellers) -> None:
    with client_for(buyer, sandbox=True) as http, pytest.raises(NoAcceptableOption):
        http.get(sellers.url + "/v2/other-token")
    assert buyer.ledger() == []


def test_a_live_payment_over_the_cap_is_refused(buyer: Buyer, sellers: Sellers) -> None:
    """Live mode picks the mainnet option (2 USDC); the default 1 USDC per-payment cap refuses
    it and the problem's members are on the exception."""
    paid_before = len(sellers.paid_requests)
    with client_for(buyer) as http, pytest.raises(SpendCapExceeded) as caught:
        http.get(sellers.url + "/v2/mixed")

    error = caught.value
    assert error.status == 403 and error.needs_human and not error.retryable
    assert (error.cap, error.limit, error.amount) == ("perPayment", 1_000_000, 2_000_000)
    assert error.problem["type"].endswith("/spend-cap-exceeded")
    (refused,) = buyer.ledger()
    assert refused["decision"] == "refused" and refused["network"] == "eip155:8453"
    assert len(sellers.paid_requests) == paid_before  # the seller saw no payment


@pytest.mark.parametrize(
    ("setup", "exception", "slug"),
    [
        ("pending", AllowPending, "allow-pending"),
        ("deny", SellerDenied, "seller-denied"),
        ("ecosystem", EcosystemDisabled, "ecosystem-disabled"),
    ],
)
def test_policy_refusals_surface_as_their_types(
    buyer: Buyer, sellers: Sellers, setup: str, exception: type, slug: str
) -> None:
    # 'localhost' is the same seller under a host the policy has not approved.
    url = sellers.url.replace("127.0.0.1", "localhost") + "/v2/weather/bern"
    if setup == "deny":
        buyer.decide("localhost", "deny")
    elif setup == "ecosystem":
        doc = policy.get_policy(buyer.runtime.db, email=buyer.email)
        doc["ecosystems"]["openEcosystem"] = False
        policy.set_policy(buyer.runtime.db, buyer.runtime.clock, email=buyer.email, document=doc)
    with client_for(buyer, sandbox=True) as http, pytest.raises(exception) as caught:
        http.get(url)

    assert caught.value.slug == slug and caught.value.needs_human
    assert caught.value.problem["type"].endswith("/" + slug)
    assert caught.value.problem["status"] == 403
    if setup == "pending":
        assert caught.value.title == "Seller approval pending"
        assert "localhost" in caught.value.detail
        (pending,) = policy.get_policy(buyer.runtime.db, email=buyer.email)["pending"]
        assert pending.startswith("localhost") and pending.endswith("/v2/weather/bern")
    assert buyer.transfers() == []


def test_an_option_paysign_would_refuse_is_not_sent_to_it(buyer: Buyer, sellers: Sellers) -> None:
    """The only option names the mainnet EIP-712 domain on the testnet: a signature over it
    verifies at no contract, and paysign refuses it (422 at its extra's name). The client
    knows before asking."""
    with client_for(buyer, sandbox=True) as http, pytest.raises(NoAcceptableOption):
        http.get(sellers.url + "/v2/wrong-domain")
    assert buyer.ledger() == []
    assert sellers.paid_headers("/v2/wrong-domain") == []


def test_the_cheapest_option_paysign_can_sign_is_paid(buyer: Buyer, sellers: Sellers) -> None:
    """Listed first and cheapest: an option in another token's domain. Of the two left, the
    cheaper, listed last, is signed, moved first, matched by the SDK seller and settled."""
    with client_for(buyer, sandbox=True) as http:
        response = http.get(sellers.url + "/v2/cheaper-elsewhere")

    assert response.status_code == 200, response.text
    (header,) = sellers.paid_headers("/v2/cheaper-elsewhere")
    assert decoded(header)["accepted"]["amount"] == str(PRICES["cheapest_usable"])
    payment = payment_of(response)
    assert payment is not None and payment.amount == PRICES["cheapest_usable"]
    assert payment.transaction is not None
    assert_settled_once(buyer, sellers, payment.transaction, PRICES["cheapest_usable"])


def test_a_bad_key_is_unauthorized(buyer: Buyer, sellers: Sellers) -> None:
    with (
        PaysignClient("psk_" + "x" * 43, paysign_url=buyer.service, sandbox=True) as http,
        pytest.raises(Unauthorized) as caught,
    ):
        http.get(sellers.url + "/v2/weather/paris")
    assert caught.value.status == 401 and caught.value.problem == {"message": "Unauthorized"}
    assert caught.value.needs_human
