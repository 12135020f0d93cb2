"""The payment lifecycle in the demo: a sandbox payment the demo's facilitator settled on the dev
chain is marked settled by the reconciler's next pass, while still valid, with the very
transaction the seller's receipt named; a signature never presented waits, then expires unused."""

from __future__ import annotations

import time

import httpx

from conftest import FrozenClock
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.services import accounts, activity
from paysign.services.activity import ActivityFilters
from paysign.services.reconcile import reconcile

from .conftest import SANDBOX, Buyer, DemoWorld, b64json, payment_required, sign

GRACE = 120


def _settlements(world: DemoWorld, buyer: Buyer) -> dict[str, tuple[str, str | None]]:
    """The buyer's signatures as the activity list shows them: nonce → (status, transaction)."""
    account = accounts.require_account(world.runtime.db, buyer.email)
    page = activity.page_of(world.runtime.db, account.id, ActivityFilters(), size=10)
    entries = [activity.entry_of(row) for row in page.rows]
    return {e["nonce"]: (e["settlement"], e["transaction"]) for e in entries}


def test_a_paid_demo_call_becomes_settled_with_its_transaction(
    demo_world: DemoWorld, buyer: Buyer
) -> None:
    url = demo_world.sellers + "/market/v1/quote/acme"
    terms = payment_required(httpx.get(url, headers=SANDBOX))
    paid_signature = sign(demo_world, buyer, url, terms)
    paid = httpx.get(
        url, headers={**SANDBOX, "PAYMENT-SIGNATURE": paid_signature["paymentSignatureHeader"]}
    )
    assert paid.status_code == 200, paid.text
    transaction = b64json(paid.headers["PAYMENT-RESPONSE"])["transaction"]
    unused = sign(demo_world, buyer, url, terms)  # signed, never presented to the seller

    chain = RpcAuthorizationStates(demo_world.settings.rpc_urls)
    try:
        # Within their validBefore the paid one is settled at once; the unused one waits.
        reconcile(demo_world.runtime.db, FrozenClock(int(time.time())), chain)
        assert _settlements(demo_world, buyer) == {
            paid_signature["nonce"]: ("settled", transaction.lower()),
            unused["nonce"]: ("awaiting", None),
        }

        later = FrozenClock(int(time.time()) + 60 + GRACE + 1)
        report = reconcile(demo_world.runtime.db, later, chain, grace_seconds=GRACE)
    finally:
        chain.close()
    assert not report.interrupted
    assert _settlements(demo_world, buyer) == {
        paid_signature["nonce"]: ("settled", transaction.lower()),
        unused["nonce"]: ("expired", None),
    }
