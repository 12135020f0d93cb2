"""The signer process (custody/signer_process.py, signer_worker.py), with real child processes:
its signatures are the service's to the byte, a batch is delivered only once signed, and a
child that dies, stalls or never starts costs no payment its signature."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from conftest import REGISTRY, signature_body
from paysign.custody.child_signer import ChildSigner
from paysign.custody.signer_process import SignerProcess
from paysign.custody.signer_worker import JOB_BYTES, READY, REFUSED, SIGNATURE_BYTES
from paysign.protocol import (
    PreparedPayment,
    PrivateKeySigner,
    address_of,
    parse_signature_request,
    prepare_payment,
)

TERMS = parse_signature_request(signature_body(), REGISTRY).terms
WORKER = [sys.executable, "-m", "paysign.custody.signer_worker"]


def payments(count: int) -> list[PreparedPayment]:
    """Payments of distinct random custodial wallets, ready to sign."""
    found = []
    for _ in range(count):
        key = secrets.token_bytes(32)
        signer = ChildSigner(key, address_of(key))
        found.append(prepare_payment(TERMS, signer, now=1_790_000_000, nonce=os.urandom(32)))
    return found


def job(payment: PreparedPayment) -> bytes:
    assert isinstance(payment.signer, ChildSigner)
    return payment.signer.job_for(payment.digest)


def expected(payment: PreparedPayment) -> bytes:
    """The signature by coincurve's own key object: another path than the service's."""
    return PrivateKeySigner(job(payment)[:32]).sign_digest(payment.digest)


def signed_ahead(payment: PreparedPayment) -> bytes | None:
    """The child's signature, waiting in the payment's signer to be answered (and taken)."""
    signer = payment.signer
    assert isinstance(signer, ChildSigner)
    return signer.sign_digest(payment.digest) if has_signed_ahead(payment) else None


def has_signed_ahead(payment: PreparedPayment) -> bool:
    """The child's signature is waiting in the payment's signer (left there)."""
    signer = payment.signer
    assert isinstance(signer, ChildSigner)
    return signer.has_signed(payment.digest)


async def until(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.005)


async def started(signer: SignerProcess) -> None:
    """Start the child (a batch of two does) and wait until it can sign."""
    signer.committed(payments(2), lambda: None)
    await until(lambda: signer.ready)


async def deliver_batch(signer: SignerProcess, batch: list[PreparedPayment]) -> float:
    """Run ``batch`` through the signer as group commit does; seconds until delivered."""
    delivered = asyncio.Event()
    began = time.monotonic()
    for payment in batch:
        signer.ran(payment)
    signer.committed(batch, delivered.set)
    await asyncio.wait_for(delivered.wait(), 15)
    return time.monotonic() - began


def test_the_worker_signs_byte_for_byte_like_coincurve_and_refuses_a_bad_key() -> None:
    batch = payments(300)
    jobs = b"".join(job(p) for p in batch)
    bad_key = bytes(32) + bytes(32)  # zero is no secp256k1 key
    answer = subprocess.run(
        WORKER, input=jobs + bad_key, capture_output=True, timeout=60, check=True
    ).stdout  # it exits at the end of its input
    assert answer[:1] == READY
    body = answer[1:]
    assert len(body) == SIGNATURE_BYTES * 301
    signatures = [body[i : i + SIGNATURE_BYTES] for i in range(0, len(body), SIGNATURE_BYTES)]
    assert signatures[:300] == [expected(p) for p in batch]
    assert signatures[300] == REFUSED
    assert JOB_BYTES == 64


def test_a_batch_is_signed_by_the_child_and_delivered_only_then() -> None:
    async def scenario() -> None:
        signer = SignerProcess()
        try:
            await started(signer)
            batch = payments(21)  # two chunks of 8 while it runs, 5 at the commit
            await deliver_batch(signer, batch)
            assert [signed_ahead(p) for p in batch] == [expected(p) for p in batch]
            assert signer.signed_by_child >= 21
            assert signer.started == 1
        finally:
            signer.close()

    asyncio.run(scenario())


def test_the_child_gets_none_of_the_services_settings(monkeypatch) -> None:
    monkeypatch.setenv("PAYSIGN_MASTER_KEY", "a-master-key-the-child-must-not-see")
    monkeypatch.setenv("PAYSIGN_DATABASE_URL", "postgresql://user:secret@db/paysign")

    async def scenario() -> bytes:
        signer = SignerProcess()
        try:
            await started(signer)
            assert signer.pid is not None
            with open(f"/proc/{signer.pid}/environ", "rb") as environ:
                return environ.read()
        finally:
            signer.close()

    environment = asyncio.run(scenario())
    assert b"PATH=" in environment  # it has an environment ...
    assert b"PAYSIGN_" not in environment  # ... without the service's settings


def test_a_lone_payment_is_left_to_the_loop_and_starts_no_child() -> None:
    async def scenario() -> None:
        signer = SignerProcess()
        delivered: list[bool] = []
        (payment,) = payments(1)
        signer.ran(payment)
        signer.committed([payment], lambda: delivered.append(True))
        assert delivered == [True]  # at once, not after a round trip
        assert signed_ahead(payment) is None
        assert signer.started == 0
        assert payment.signed().payload["payload"]["signature"] == "0x" + expected(payment).hex()
        signer.close()

    asyncio.run(scenario())


def test_the_last_payment_of_a_batch_whose_others_are_signed_goes_to_the_child() -> None:
    """Not a lone request: the loop does not sign it (as it did when the child had answered
    the batch's full chunks before the commit)."""

    async def scenario() -> None:
        signer = SignerProcess()
        try:
            await started(signer)
            batch = payments(9)  # a chunk of 8 while it runs, 1 at the commit
            for payment in batch:
                signer.ran(payment)
            await until(lambda: all(has_signed_ahead(p) for p in batch[:8]))
            delivered = asyncio.Event()
            signer.committed(batch, delivered.set)
            await asyncio.wait_for(delivered.wait(), 15)
            assert signed_ahead(batch[8]) == expected(batch[8])
        finally:
            signer.close()

    asyncio.run(scenario())


def test_outcomes_that_are_no_wallet_payment_are_delivered_at_once() -> None:
    async def scenario() -> None:
        signer = SignerProcess()
        delivered: list[bool] = []
        other = prepare_payment(
            TERMS, PrivateKeySigner(secrets.token_bytes(32)), now=1, nonce=bytes(32)
        )
        signer.committed([ValueError("a refusal"), other, other], lambda: delivered.append(True))
        assert delivered == [True]
        assert signer.started == 0
        signer.close()

    asyncio.run(scenario())


def test_a_child_killed_with_payments_in_flight_owes_nothing_and_is_replaced() -> None:
    async def scenario() -> None:
        signer = SignerProcess()
        try:
            await started(signer)
            first_pid = signer.pid
            assert first_pid is not None
            os.kill(first_pid, signal.SIGSTOP)  # it holds the batch unanswered...
            batch = payments(12)
            delivered = asyncio.Event()
            for payment in batch:
                signer.ran(payment)
            signer.committed(batch, delivered.set)
            assert not delivered.is_set()
            os.kill(first_pid, signal.SIGKILL)  # ...and dies with it
            await asyncio.wait_for(delivered.wait(), 15)
            assert all(signed_ahead(p) is None for p in batch)  # signed on the loop when answered
            assert [p.signed().payload["payload"]["signature"] for p in batch] == [
                "0x" + expected(p).hex() for p in batch
            ]
            # The next batch starts a new child, and the one after is signed by it.
            await started(signer)
            assert signer.started == 2 and signer.pid != first_pid
            again = payments(5)
            await deliver_batch(signer, again)
            assert [signed_ahead(p) for p in again] == [expected(p) for p in again]
        finally:
            signer.close()

    asyncio.run(scenario())


def test_a_stalled_child_is_killed_and_its_payments_delivered() -> None:
    async def scenario() -> None:
        signer = SignerProcess(stall_seconds=0.3)
        try:
            await started(signer)
            stalled = signer.pid
            assert stalled is not None
            os.kill(stalled, signal.SIGSTOP)
            batch = payments(4)
            waited = await deliver_batch(signer, batch)
            assert 0.25 <= waited < 10
            assert all(signed_ahead(p) is None for p in batch)
            assert signer.pid is None
            with pytest.raises(ProcessLookupError):  # killed and reaped, not left stopped
                os.kill(stalled, 0)
        finally:
            signer.close()

    asyncio.run(scenario())


# A stand-in worker that says it is ready, then refuses every job it is sent.
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


def test_payments_the_child_refuses_are_delivered_unsigned_and_signed_on_the_loop() -> None:
    async def scenario() -> list[PreparedPayment]:
        signer = SignerProcess(command=REFUSING_WORKER)
        try:
            await started(signer)
            batch = payments(10)
            await deliver_batch(signer, batch)
            assert signer.signed_by_child == 0
            assert signer.started == 1  # a refusal is an answer: the child is kept
            return batch
        finally:
            signer.close()

    batch = asyncio.run(scenario())
    assert all(signed_ahead(p) is None for p in batch)
    assert [p.signed().payload["payload"]["signature"] for p in batch] == [
        "0x" + expected(p).hex() for p in batch
    ]


def test_a_child_whose_first_word_is_not_ready_is_dropped() -> None:
    async def scenario() -> None:
        garbled = [sys.executable, "-c", "import os, time; os.write(1, b'?'); time.sleep(30)"]
        signer = SignerProcess(command=garbled, max_restarts=0)
        try:
            signer.committed(payments(2), lambda: None)  # starts it
            first = signer.pid
            assert first is not None
            await until(lambda: signer.pid is None)  # it said something else: stopped
            with pytest.raises(ProcessLookupError):
                os.kill(first, 0)
            delivered: list[bool] = []
            signer.committed(payments(3), lambda: delivered.append(True))
            assert delivered == [True]  # signed on the loop; no more starts
            assert signer.started == 1
        finally:
            signer.close()

    asyncio.run(scenario())


def test_a_child_that_never_starts_is_retried_a_bounded_number_of_times() -> None:
    async def scenario() -> None:
        never = [sys.executable, "-c", "pass"]  # exits without saying it is ready
        signer = SignerProcess(command=never, max_restarts=2, restart_window=60)
        try:
            for _ in range(8):
                delivered: list[bool] = []
                batch = payments(3)
                signer.committed(batch, lambda: delivered.append(True))
                assert delivered == [True]  # never kept waiting for a child that is not there
                await until(lambda: signer.pid is None, timeout=15)  # it exited; noticed
            assert signer.started == 3  # the first start and two restarts, then no more
        finally:
            signer.close()

    asyncio.run(scenario())


def test_close_ends_the_child_and_later_batches_are_left_to_the_loop() -> None:
    async def scenario() -> None:
        signer = SignerProcess()
        await started(signer)
        pid = signer.pid
        assert pid is not None
        signer.close()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        delivered: list[bool] = []
        signer.committed(payments(3), lambda: delivered.append(True))
        assert delivered == [True]
        assert signer.started == 1

    asyncio.run(scenario())


def test_a_new_event_loop_gets_a_new_child() -> None:
    signer = SignerProcess()
    try:
        asyncio.run(started(signer))
        first = signer.pid

        async def second_loop() -> None:
            await started(signer)
            batch = payments(3)
            await deliver_batch(signer, batch)
            assert [signed_ahead(p) for p in batch] == [expected(p) for p in batch]

        asyncio.run(second_loop())
        assert signer.pid != first
        assert first is not None
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
    finally:
        signer.close()
