"""A payment the chain says was used is marked settled on the next pass, while its signature is
still valid; an unused one keeps awaiting settlement until validBefore + grace. Both databases.
"""

from __future__ import annotations

import base64
import json
import time

import sqlalchemy as sa
from reconcile_support import TESTNET, USDC, FakeChain
from reconcile_support import sign as sign  # the fixture

from conftest import signature_body
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.chain.devchain import ANVIL_DEV_KEYS
from paysign.chain.treasury import Treasury, parse_private_key
from paysign.chain.usdc import transfer_with_authorization_data
from paysign.policy.caps import day_window
from paysign.protocol import parse_address
from paysign.services import keys, policy
from paysign.services.reconcile import reconcile
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import policy_repo
from paysign.store.schema import signatures


def fates(runtime, account) -> dict[bytes, tuple[str, str | None]]:
    with runtime.db.read() as conn:
        rows = conn.execute(
            sa.select(signatures.c.nonce, signatures.c.status, signatures.c.settled_tx).where(
                signatures.c.account_id == account["account_id"]
            )
        ).all()
    return {bytes(r.nonce): (r.status, r.settled_tx) for r in rows}


def test_a_used_signature_settles_while_still_valid(sign, runtime, account, clock) -> None:
    chain = FakeChain({TESTNET})
    used = sign(account, amount=USDC, max_timeout=3600)
    unused = sign(account, amount=USDC, max_timeout=3600)
    chain.used.add(used)
    chain.transactions[used] = "0x" + "ab" * 32
    signed_day = day_window(clock.now())
    clock.advance(1)

    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert (report.settled, report.expired, report.released) == (1, 0, 0)
    assert fates(runtime, account) == {
        used: ("settled", "0x" + "ab" * 32),
        unused: ("signed", None),
    }
    # Settled is final: the spend stays counted, and past validBefore nothing moves it again.
    clock.advance(3600 + 121)
    later = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert (later.settled, later.expired, later.released) == (0, 1, USDC)
    assert fates(runtime, account)[used] == ("settled", "0x" + "ab" * 32)
    with runtime.db.read() as conn:
        assert policy_repo.spent_in(conn, account["account_id"], signed_day) == USDC


def test_still_valid_signatures_are_asked_about_newest_first_and_bounded(
    sign, runtime, account, clock
) -> None:
    chain = FakeChain({TESTNET})
    older = sign(account, amount=USDC, max_timeout=3600)
    newer = sign(account, amount=USDC, max_timeout=3600)
    chain.used.update({older, newer})

    report = reconcile(runtime.db, clock, chain, grace_seconds=120, still_valid=1)
    assert report.settled == 1 and chain.calls == 1
    assert fates(runtime, account)[newer][0] == "settled"
    assert fates(runtime, account)[older][0] == "signed"
    assert reconcile(runtime.db, clock, chain, grace_seconds=120, still_valid=1).settled == 1
    assert fates(runtime, account)[older][0] == "settled"


def test_a_chain_failure_on_still_valid_signatures_changes_nothing(
    sign, runtime, account, clock
) -> None:
    chain = FakeChain({TESTNET})
    used = sign(account, amount=USDC, max_timeout=3600)
    chain.used.add(used)
    chain.logs_fail = True
    assert reconcile(runtime.db, clock, chain, grace_seconds=120).interrupted
    assert fates(runtime, account)[used] == ("signed", None)


def test_a_payment_settled_on_the_dev_chain_is_settled_on_the_next_pass(
    runtime, signing_store, sandbox_chain, account, clock
) -> None:
    """A live testnet payment signed through the use case and relayed on anvil a moment later:
    the next pass, long before validBefore, marks it settled with the relayer's transaction;
    the one never relayed keeps awaiting settlement."""
    wallet = parse_address(account["wallet"])
    sandbox_chain.send_usdc(wallet, 2 * USDC)
    clock.current = int(time.time())  # the chain checks validAfter/validBefore in real time
    keys.revoke_key(runtime.db, clock, email=account["email"])
    api_key = keys.issue_key(runtime.db, clock, email=account["email"]).api_key
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc["caps"] = {"perPayment": None, "daily": 10 * USDC, "monthly": None}
    policy.set_policy(runtime.db, clock, email=account["email"], document=doc)
    deps = SigningDeps(signing_store, runtime.vault, clock, runtime.registry)
    body = signature_body(amount=str(USDC), max_timeout=600)
    body["paymentRequired"]["accepts"][0]["asset"] = sandbox_chain.usdc_hex
    paid = sign_payment(deps, api_key, body, sandbox=False)
    waiting = sign_payment(deps, api_key, body, sandbox=False)

    payload = json.loads(base64.b64decode(paid.header))
    auth = payload["payload"]["authorization"]
    relayer = Treasury(sandbox_chain.rpc, parse_private_key(ANVIL_DEV_KEYS[2]))
    receipt = relayer.send(
        sandbox_chain.usdc,
        transfer_with_authorization_data(
            parse_address(auth["from"]),
            parse_address(auth["to"]),
            int(auth["value"]),
            int(auth["validAfter"]),
            int(auth["validBefore"]),
            bytes.fromhex(auth["nonce"][2:]),
            bytes.fromhex(payload["payload"]["signature"][2:]),
        ),
    )
    sandbox_chain.send_usdc(wallet, USDC)  # another transaction after it

    clock.advance(1)
    chain = RpcAuthorizationStates({TESTNET: sandbox_chain.rpc_url})
    try:
        report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    finally:
        chain.close()
    assert (report.settled, report.expired, report.released) == (1, 0, 0)
    assert fates(runtime, account) == {
        paid.nonce: ("settled", receipt.transaction_hash),
        waiting.nonce: ("signed", None),
    }
