"""Reconciliation returns the spend of signatures that expired unused, exactly once.

The chain is a fake adapter answering ``authorizationState`` from a set of used nonces, or the
real dev chain (anvil) at the end; the database is real, both kinds.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sqlalchemy as sa
from reconcile_support import TESTNET, USDC, FakeChain
from reconcile_support import sign as sign  # the fixture

from conftest import signature_body
from paysign.chain.authorizations import ChainUnavailable, RpcAuthorizationStates, call_data
from paysign.errors import SpendCapExceeded
from paysign.policy.caps import day_window, hour_window, month_window
from paysign.policy.rules import Rule
from paysign.services import keys, policy
from paysign.services.reconcile import reconcile
from paysign.services.signing import SigningDeps, sign_payment
from paysign.store import policy_repo
from paysign.store import repositories as repo
from paysign.store.schema import signatures


def statuses(runtime, account) -> list[str]:
    with runtime.db.read() as conn:
        return [s.status for s in repo.signatures_of(conn, account["account_id"])]


def spent(runtime, account, window) -> int:
    with runtime.db.read() as conn:
        return policy_repo.spent_in(conn, account["account_id"], window)


@pytest.fixture
def capped(runtime, account):
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc["caps"] = {"perPayment": None, "daily": 2 * USDC, "monthly": 10 * USDC}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)
    return account


def test_expired_unused_signature_gives_its_spend_back(sign, runtime, capped, clock) -> None:
    chain = FakeChain({TESTNET})
    used = sign(capped, amount=USDC)
    sign(capped, amount=USDC)  # never settled
    chain.used.add(used)
    with pytest.raises(SpendCapExceeded):
        sign(capped, amount=USDC)
    day, month = day_window(clock.now()), month_window(clock.now())

    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    # The used one settles at once; the unused one is not yet past validBefore + grace.
    assert (report.settled, report.expired) == (1, 0)
    assert statuses(runtime, capped) == ["settled", "signed"]
    clock.advance(60 + 120 + 1)
    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert (report.settled, report.expired, report.released) == (0, 1, USDC)
    assert statuses(runtime, capped) == ["settled", "expired"]
    assert spent(runtime, capped, day) == USDC
    assert spent(runtime, capped, month) == USDC

    # The released amount can be spent again today; a second pass changes nothing: the new
    # signature is still valid and unused, so it keeps awaiting settlement.
    sign(capped, amount=USDC)
    again = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert (again.settled, again.expired, again.released) == (0, 0, 0)
    assert statuses(runtime, capped) == ["settled", "expired", "signed"]


def test_network_without_rpc_is_never_released(sign, runtime, capped, clock) -> None:
    sign(capped, amount=USDC, network="eip155:8453")
    clock.advance(3600)
    report = reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)
    assert report.expired == 0
    assert statuses(runtime, capped) == ["signed"]
    assert spent(runtime, capped, day_window(clock.now() - 3600)) == USDC


def test_chain_failure_interrupts_without_changing_anything(sign, runtime, capped, clock) -> None:
    sign(capped, amount=USDC)
    clock.advance(3600)
    chain = FakeChain({TESTNET})
    chain.fail = True
    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert report.interrupted and report.expired == 0
    assert statuses(runtime, capped) == ["signed"]


def test_sandbox_signatures_are_concluded_but_release_nothing(sign, runtime, capped, clock) -> None:
    sign(capped, amount=USDC, sandbox=True)
    clock.advance(3600)
    report = reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)
    assert (report.expired, report.released) == (1, 0)
    assert spent(runtime, capped, day_window(clock.now() - 3600)) == 0


def test_concurrent_reconcilers_release_exactly_once(sign, runtime, capped, clock) -> None:
    for _ in range(2):
        sign(capped, amount=USDC)
    clock.advance(3600)

    def run(_: int):
        return reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)

    with ThreadPoolExecutor(max_workers=4) as pool:
        reports = list(pool.map(run, range(4)))
    assert sum(r.expired for r in reports) == 2
    assert sum(r.released for r in reports) == 2 * USDC
    assert spent(runtime, capped, day_window(clock.now() - 3600)) == 0


# --- the hour's window and the sellers' budgets -------------------------------------------


def _set_policy(runtime, account, **changes) -> None:
    doc = policy.get_policy(runtime.db, email=account["email"])
    doc.update(changes)
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)


WEATHER = "https://api.example.com/weather?city=paris"
BUDGETED = Rule("api.example.com", "/weather")


def test_expired_signature_frees_the_hour_and_the_sellers_budget(
    sign, runtime, account, clock
) -> None:
    budget = {"seller": "api.example.com/weather", "daily": 2 * USDC, "monthly": 3 * USDC}
    caps = {"perPayment": None, "hourly": 2 * USDC, "daily": 10 * USDC, "monthly": 50 * USDC}
    _set_policy(runtime, account, caps=caps, allow=[budget, "api.example.com/other"])
    clock.advance(1)  # signed after the policy was saved, not in the same second
    chain = FakeChain({TESTNET})
    used = sign(account, amount=USDC)
    sign(account, amount=USDC)  # never settled
    chain.used.add(used)
    with pytest.raises(SpendCapExceeded) as capped:
        sign(account, amount=USDC)
    assert capped.value.extensions["cap"] == "hourly"
    signed_at = clock.now()
    hour, day, month = hour_window(signed_at), day_window(signed_at), month_window(signed_at)

    clock.advance(60 + 120 + 1)
    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    assert (report.settled, report.expired, report.released) == (1, 1, USDC)
    assert spent(runtime, account, hour) == USDC
    assert spent(runtime, account, day) == USDC
    assert seller_spent(runtime, account, BUDGETED, day) == USDC
    assert seller_spent(runtime, account, BUDGETED, month) == USDC

    # What was given back can be spent again, under the rule's budget and in the hour: one
    # more payment fits, the next does not.
    sign(account, amount=USDC)
    with pytest.raises(SpendCapExceeded):
        sign(account, amount=USDC)
    assert seller_spent(runtime, account, BUDGETED, day) == 2 * USDC


def test_windows_that_never_counted_a_signature_keep_their_spend(
    sign, runtime, account, clock
) -> None:
    # The expired signature was made before the hourly cap and the rule's budget were set, so
    # their windows never counted it: giving it back there would let those caps be passed.
    _set_policy(runtime, account, caps={"perPayment": None, "daily": 10 * USDC, "monthly": None})
    clock.advance(1)
    sign(account, amount=USDC)  # expires unused
    clock.advance(1)
    budget = {"seller": "api.example.com/weather", "daily": 2 * USDC}
    caps = {"perPayment": None, "hourly": 5 * USDC, "daily": 10 * USDC, "monthly": None}
    _set_policy(runtime, account, caps=caps, allow=[budget])
    clock.advance(1)
    sign(account, amount=USDC, max_timeout=3600)  # still valid when the reconciler runs
    day, hour = day_window(clock.now()), hour_window(clock.now())

    clock.advance(60 + 120 + 1)
    report = reconcile(runtime.db, clock, FakeChain({TESTNET}), grace_seconds=120)
    assert (report.expired, report.released) == (1, USDC)
    assert spent(runtime, account, day) == USDC
    assert spent(runtime, account, hour) == USDC
    assert seller_spent(runtime, account, BUDGETED, day) == USDC


def seller_spent(runtime, account, rule, window) -> int:
    with runtime.db.read() as conn:
        return policy_repo.seller_spent_in(conn, account["account_id"], rule, window)


# --- the JSON-RPC adapter, over real HTTP ---------------------------------------------------


class _FakeNode(BaseHTTPRequestHandler):
    used: set[str] = set()
    reply_override: object = None

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        call = request["params"][0]
        if self.reply_override is not None:
            result = self.reply_override
        else:
            result = "0x" + ("%064x" % (1 if call["data"] in self.used else 0))
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeNode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _FakeNode.used = set()
    _FakeNode.reply_override = None
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_rpc_reader_encodes_the_call_and_decodes_the_answer(node) -> None:
    token, owner, nonce = bytes([1]) * 20, bytes([2]) * 20, bytes([3]) * 32
    _FakeNode.used = {"0x" + call_data(owner, nonce).hex()}
    reader = RpcAuthorizationStates({TESTNET: node})
    assert reader.networks == {TESTNET}
    assert reader.is_used(TESTNET, token, owner, nonce) is True
    assert reader.is_used(TESTNET, token, owner, bytes(32)) is False
    with pytest.raises(ChainUnavailable):
        reader.is_used("eip155:8453", token, owner, nonce)
    _FakeNode.reply_override = "0x" + "ff" * 32
    with pytest.raises(ChainUnavailable):
        reader.is_used(TESTNET, token, owner, nonce)
    reader.close()


def test_rpc_reader_reports_an_unreachable_node() -> None:
    reader = RpcAuthorizationStates({TESTNET: "http://127.0.0.1:9"}, timeout=1)
    with pytest.raises(ChainUnavailable):
        reader.is_used(TESTNET, bytes(20), bytes(20), bytes(32))


# --- on the real dev chain -------------------------------------------------------------------


def test_reconcile_on_the_dev_chain_releases_only_the_unused_signature(
    runtime, signing_store, sandbox_chain, account, clock
) -> None:
    """Three live testnet payments signed through the use case; a relayer settles one on chain.
    Past validBefore, the chain decides: the used one is settled with the transaction that used
    it and stays counted, the unused one expires and is released, and one still valid awaits
    settlement untouched."""
    import base64
    import json as jsonlib

    from paysign.chain.devchain import ANVIL_DEV_KEYS
    from paysign.chain.treasury import Treasury, parse_private_key
    from paysign.chain.usdc import transfer_with_authorization_data
    from paysign.protocol import parse_address

    doc = policy.get_policy(runtime.db, email=account["email"])
    doc["caps"] = {"perPayment": None, "daily": 10 * USDC, "monthly": None}
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=doc)
    wallet = parse_address(account["wallet"])
    sandbox_chain.send_usdc(wallet, 2 * USDC)
    # The chain checks real time; sign with the clock at real time.
    import time as timelib

    clock.current = int(timelib.time())
    keys.revoke_key(runtime.db, clock, email=account["email"])
    api_key = keys.issue_key(runtime.db, clock, email=account["email"]).api_key
    deps = SigningDeps(signing_store, runtime.vault, clock, runtime.registry)
    body = signature_body(amount=str(USDC), max_timeout=60)
    body["paymentRequired"]["accepts"][0]["asset"] = sandbox_chain.usdc_hex
    paid = sign_payment(deps, api_key, body, sandbox=False)
    unused = sign_payment(deps, api_key, body, sandbox=False)

    payload = jsonlib.loads(base64.b64decode(paid.header))
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
    # Other transactions of the chain around it: the event is found among them, not guessed.
    sandbox_chain.send_usdc(wallet, USDC)
    day = day_window(clock.now())
    assert spent(runtime, account, day) == 2 * USDC

    clock.advance(60 + 121)
    waiting = sign_payment(deps, api_key, body, sandbox=False)
    chain = RpcAuthorizationStates({TESTNET: sandbox_chain.rpc_url})
    report = reconcile(runtime.db, clock, chain, grace_seconds=120)
    chain.close()
    assert (report.settled, report.expired, report.released) == (1, 1, USDC)
    assert spent(runtime, account, day) == 2 * USDC  # the settled one and the one awaiting
    with runtime.db.read() as conn:
        rows = conn.execute(
            sa.select(signatures.c.nonce, signatures.c.status, signatures.c.settled_tx).where(
                signatures.c.account_id == account["account_id"]
            )
        ).all()
    by_nonce = {bytes(r.nonce): (r.status, r.settled_tx) for r in rows}
    assert by_nonce == {
        paid.nonce: ("settled", receipt.transaction_hash),
        unused.nonce: ("expired", None),
        waiting.nonce: ("signed", None),
    }


def test_a_settled_signature_keeps_the_transaction_the_chain_names(
    sign, runtime, capped, clock
) -> None:
    chain = FakeChain({TESTNET})
    used = sign(capped, amount=USDC)
    chain.used.add(used)
    chain.transactions[used] = "0x" + "ab" * 32
    clock.advance(3600)
    assert reconcile(runtime.db, clock, chain, grace_seconds=120).settled == 1
    with runtime.db.read() as conn:
        stored = conn.execute(sa.select(signatures.c.status, signatures.c.settled_tx)).one()
    assert tuple(stored) == ("settled", "0x" + "ab" * 32)


def test_a_used_signature_whose_transaction_cannot_be_read_waits_for_the_next_pass(
    sign, runtime, capped, clock
) -> None:
    chain = FakeChain({TESTNET})
    used = sign(capped, amount=USDC)
    chain.used.add(used)
    chain.transactions[used] = "0x" + "cd" * 32
    chain.logs_fail = True
    clock.advance(3600)
    assert reconcile(runtime.db, clock, chain, grace_seconds=120).interrupted
    assert statuses(runtime, capped) == ["signed"]
    chain.logs_fail = False
    assert reconcile(runtime.db, clock, chain, grace_seconds=120).settled == 1
    with runtime.db.read() as conn:
        assert conn.execute(sa.select(signatures.c.settled_tx)).scalar_one() == "0x" + "cd" * 32
