"""The batched signing path (group commit, signatures made by the signer process) against the
plain one (``sign_payment_for``: one request, one transaction, signed on the spot), on SQLite
and PostgreSQL: for the same requests in the same order, the same answers, the same ledger,
refusals, approvals queue and spend — and every header byte-identical to the reference SDK
path's for its nonce."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from conftest import signature_body
from paysign.bootstrap import Runtime
from paysign.custody import SealedSecret
from paysign.custody.signer_process import SignerProcess
from paysign.errors import PaysignError
from paysign.policy.caps import day_window, month_window
from paysign.protocol import PrivateKeySigner, SignedPayment, parse_signature_request
from paysign.protocol.payload import sign_payment as reference_sign
from paysign.services import accounts, keys, policy
from paysign.services.accounts import wallet_context
from paysign.services.signing import (
    SigningDeps,
    SigningQueue,
    authenticate,
    by_api_key,
    sign_payment_for,
)
from paysign.store import policy_repo
from paysign.store import repositories as repo

USDC = 1_000_000


@dataclass(frozen=True)
class Request:
    body: dict[str, object]
    sandbox: bool
    wrong_key: bool = False


KINDS = ["paid"] * 6 + ["denied", "new", "dear", "sandbox", "invalid", "key"]


def requests(count: int, kinds: list[str] = KINDS) -> list[Request]:
    """A day of an agent's requests: allowed, denied, new sellers, too dear, sandbox, invalid."""
    pick = random.Random(20261125)
    made = []
    for _ in range(count):
        kind = pick.choice(kinds)
        amount = str(pick.choice([10_000, 50_000, 120_000]))
        url = "https://api.example.com/weather"
        network, sandbox = "eip155:8453", False
        if kind == "denied":
            url = "https://api.example.com/admin/users"
        elif kind == "new":
            url = f"https://seller{pick.randrange(3)}.example.net/v1"
        elif kind == "dear":
            amount = str(300_000)  # over the per-payment cap
        elif kind == "sandbox":
            network, sandbox = "eip155:84532", True
        elif kind == "invalid":
            network, sandbox = "eip155:8453", True  # a live network with the sandbox header
        body = signature_body(seller_url=url, amount=amount, network=network)
        made.append(Request(body, sandbox, wrong_key=kind == "key"))
    return made


def new_account(runtime: Runtime) -> dict[str, str]:
    email = f"paths-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password="correct horse battery"
    )
    issued = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=30)
    document = policy.get_policy(runtime.db, email=email)
    document["allow"] = ["api.example.com"]
    document["deny"] = ["api.example.com/admin"]
    document["caps"] = {"perPayment": 200_000, "daily": 1_500_000, "monthly": 2_000_000}
    policy.set_policy(runtime.db, runtime.clock, email=email, document=document)
    return {"email": email, "account_id": created.account_id, "api_key": issued.api_key}


def counting_nonces(path: int) -> Callable[[], bytes]:
    """Nonces 1, 2, 3 … after a byte naming the path (a nonce is unique in the ledger)."""
    counter = iter(range(1, 1 << 30))
    return lambda: bytes([path]) + next(counter).to_bytes(31, "big")


Answer = SignedPayment | str


def answer_of(result: object) -> Answer:
    if isinstance(result, SignedPayment):
        return result
    assert isinstance(result, PaysignError), result  # a fault would be a failure of the test
    return result.slug


def plain_answers(deps: SigningDeps, key: str, batch: list[Request]) -> list[Answer]:
    answers: list[Answer] = []
    for request in batch:
        holder = by_api_key("psk_" + "x" * 43 if request.wrong_key else key)
        try:
            answers.append(sign_payment_for(deps, holder, request.body, sandbox=request.sandbox))
        except PaysignError as exc:
            answers.append(exc.slug)
    return answers


def batched_answers(
    deps: SigningDeps, key: str, batch: list[Request], warm_up: str
) -> tuple[list[Answer], int]:
    """The requests all at once, as concurrent API requests; and how many the child signed.
    ``warm_up`` is another account's key, whose payments start the child."""
    signer = SignerProcess()
    deps = dataclasses.replace(deps, wallet_signer=signer.wallet_signer)
    queue = SigningQueue(deps, signer)

    async def scenario() -> list[object]:
        # Start the child and wait until it signs, with another account's sandbox payments.
        body = signature_body()
        await asyncio.gather(
            *(queue.sign(by_api_key(warm_up), body, sandbox=True) for _ in range(10))
        )
        deadline = time.monotonic() + 15
        while not signer.ready:
            assert time.monotonic() < deadline, "the signer process did not start"
            await asyncio.sleep(0.01)
        before = signer.signed_by_child
        results = await asyncio.gather(
            *(
                queue.sign(
                    by_api_key("psk_" + "x" * 43 if r.wrong_key else key),
                    r.body,
                    sandbox=r.sandbox,
                )
                for r in batch
            ),
            return_exceptions=True,
        )
        results.append(signer.signed_by_child - before)
        return results

    try:
        *results, by_child = asyncio.run(scenario())
    finally:
        signer.close()
    assert isinstance(by_child, int)
    return [answer_of(r) for r in results], by_child


def state_of(runtime: Runtime, account: dict[str, str]) -> tuple[object, ...]:
    """What the requests left behind, without what differs by account or by nonce."""
    now = runtime.clock.now()
    with runtime.db.read() as conn:
        signatures = [
            dataclasses.replace(s, account_id="", api_key_id=None, nonce=b"", valid_before=0)
            for s in repo.signatures_of(conn, account["account_id"])
        ]
        refusals = [
            dataclasses.replace(r, account_id="", api_key_id=None)
            for r in policy_repo.refusals_of(conn, account["account_id"])
        ]
        pending = [
            (p.host, p.path, p.refused_count)
            for p in policy_repo.pending_of(conn, account["account_id"])
        ]
        spend = (
            policy_repo.spent_in(conn, account["account_id"], day_window(now)),
            policy_repo.spent_in(conn, account["account_id"], month_window(now)),
        )
    return signatures, refusals, pending, spend


def assert_byte_exact(deps: SigningDeps, key: str, batch: list[Request], answers: list[Answer]):
    """Each header is the reference path's (``protocol.sign_payment`` over coincurve's own key
    object) for the same terms, time and nonce."""
    holder = authenticate(deps, key)
    sealed = SealedSecret.from_bytes(holder.sealed_wallet_key)
    reference_key = PrivateKeySigner(deps.vault.open(wallet_context(holder.wallet_id), sealed))
    for request, answer in zip(batch, answers, strict=True):
        if isinstance(answer, SignedPayment):
            terms = parse_signature_request(request.body, deps.registry).terms
            expected = reference_sign(
                terms, reference_key, now=deps.clock.now(), nonce=answer.nonce
            )
            assert answer.header == expected.header


#: Requests whose batches read nothing but what every request reads first: on PostgreSQL they
#: run on the event loop with their reads made ahead (``store/signing_postgres_async.py``). A
#: new seller is queued for approval, a read not made ahead: its batch goes to the threads.
READ_AHEAD_KINDS = [kind for kind in KINDS if kind != "new"]


@pytest.mark.parametrize("kinds", [KINDS, READ_AHEAD_KINDS], ids=["all", "read-ahead"])
def test_the_batched_path_answers_and_records_as_the_plain_one(
    runtime, signing_store, kinds
) -> None:
    batch = requests(150, kinds)
    plain_account, batched_account = new_account(runtime), new_account(runtime)
    deps = SigningDeps(
        signing_store, runtime.vault, runtime.clock, runtime.registry, new_nonce=counting_nonces(1)
    )
    warm_up = new_account(runtime)

    plain = plain_answers(deps, plain_account["api_key"], batch)
    batched, by_child = batched_answers(
        dataclasses.replace(deps, new_nonce=counting_nonces(2)),
        batched_account["api_key"],
        batch,
        warm_up["api_key"],
    )

    def kinds_of(answers: list[Answer]) -> list[str]:
        return ["signed" if isinstance(a, SignedPayment) else a for a in answers]

    assert kinds_of(batched) == kinds_of(plain)
    assert {"signed", "seller-denied", "spend-cap-exceeded"} <= set(kinds_of(plain))
    assert {"sandbox-network-mismatch", "unauthorized"} <= set(kinds_of(plain))
    assert ("allow-pending" in kinds_of(plain)) == ("new" in kinds)
    prefetching = signing_store.prefetching
    if prefetching is not None:  # PostgreSQL: which batches ran on the event loop
        assert prefetching.committed > 0
        assert (prefetching.given_up > 0) == ("new" in kinds)
    assert state_of(runtime, batched_account) == state_of(runtime, plain_account)
    # The child made most of them (a batch's lone payment is signed on the loop).
    assert by_child >= kinds_of(batched).count("signed") // 2 > 0
    assert_byte_exact(deps, plain_account["api_key"], batch, plain)
    assert_byte_exact(deps, batched_account["api_key"], batch, batched)
