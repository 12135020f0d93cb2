"""``paysign_signer_fallbacks_total``: which payments the serving process signed itself instead
of the signer child, and why, with real child processes."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time

from prometheus_client import REGISTRY as METRICS

from conftest import REGISTRY, signature_body
from paysign.custody.child_signer import ChildSigner
from paysign.custody.signer_process import SignerProcess
from paysign.protocol import PreparedPayment, address_of, parse_signature_request, prepare_payment

TERMS = parse_signature_request(signature_body(), REGISTRY).terms
#: A child that starts and answers every job with a refusal (as for a key it cannot use).
REFUSING_WORKER = [
    sys.executable,
    "-c",
    "import os\n"
    "from paysign.custody.signer_worker import JOB_BYTES, READY, REFUSED, write_all\n"
    "write_all(1, READY)\n"
    "pending = b''\n"
    "while data := os.read(0, 65536):\n"
    "    pending += data\n"
    "    whole = len(pending) // JOB_BYTES\n"
    "    write_all(1, REFUSED * whole)\n"
    "    pending = pending[whole * JOB_BYTES:]\n",
]


def fallbacks() -> dict[str, float]:
    return {
        reason: METRICS.get_sample_value("paysign_signer_fallbacks_total", {"reason": reason})
        or 0.0
        for reason in ("not_sent", "unanswered")
    }


def payments(count: int) -> list[PreparedPayment]:
    found = []
    for _ in range(count):
        key = secrets.token_bytes(32)
        signer = ChildSigner(key, address_of(key))
        found.append(prepare_payment(TERMS, signer, now=1_790_000_000, nonce=os.urandom(32)))
    return found


async def ready(signer: SignerProcess) -> None:
    signer.committed(payments(2), lambda: None)  # a batch of two starts the child
    deadline = time.monotonic() + 15
    while not signer.ready:
        assert time.monotonic() < deadline, "the child did not start"
        await asyncio.sleep(0.005)


async def delivered(signer: SignerProcess, batch: list[PreparedPayment]) -> None:
    done = asyncio.Event()
    for payment in batch:
        signer.ran(payment)
    signer.committed(batch, done.set)
    await asyncio.wait_for(done.wait(), 15)


def run_batch(command: list[str] | None, size: int) -> dict[str, float]:
    """Fallbacks counted while a batch of ``size`` goes through a started child and is signed."""

    async def scenario() -> list[PreparedPayment]:
        signer = SignerProcess(command=command) if command else SignerProcess()
        try:
            await ready(signer)
            batch = payments(size)
            await delivered(signer, batch)
            return batch
        finally:
            signer.close()

    batch = asyncio.run(scenario())
    before = fallbacks()
    for payment in batch:
        payment.signed()
    after = fallbacks()
    return {reason: after[reason] - before[reason] for reason in after}


def test_payments_the_child_signed_are_no_fallback() -> None:
    assert run_batch(None, 6) == {"not_sent": 0, "unanswered": 0}


def test_payments_the_child_refused_count_as_unanswered() -> None:
    assert run_batch(REFUSING_WORKER, 6) == {"not_sent": 0, "unanswered": 6}


def test_a_lone_payment_is_never_sent() -> None:
    (payment,) = payments(1)
    before = fallbacks()
    payment.signed()
    assert fallbacks()["not_sent"] - before["not_sent"] == 1
