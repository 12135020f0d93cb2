"""The in-process signing cost: our paths, eth-account, the libsecp256k1 floor, the x402 SDK."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.progress import log
from bench.request import (
    CHAIN_ID,
    PAY_TO,
    PAYMENT_REQUIRED,
    REQUEST_BODY,
    USDC_BASE,
    USDC_NAME,
    USDC_VERSION,
)


@dataclass
class Timing:
    label: str
    what: str
    samples_us: list[float]
    loops: int

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_us)


def _time_loop(fn: Callable[[], object], loops: int) -> float:
    perf = time.perf_counter_ns
    started = perf()
    for _ in range(loops):
        fn()
    return (perf() - started) / loops / 1000


def measure(
    fn: Callable[[], object], *, repeats: int, repeat_seconds: float
) -> tuple[list[float], int]:
    """Median-able samples (µs per call): ``repeats`` loops of about ``repeat_seconds`` each."""
    for _ in range(3):
        fn()  # warm caches, lazy imports, lru_caches
    loops = 1
    while True:
        elapsed_s = _time_loop(fn, loops) * loops / 1e6
        if elapsed_s >= 0.02:
            break
        loops *= 4
    loops = max(1, int(loops * repeat_seconds / elapsed_s))
    return [_time_loop(fn, loops) for _ in range(repeats)], loops


@contextlib.contextmanager
def pinned_to_one_core(cpu: int | None) -> Iterator[str]:
    if not hasattr(os, "sched_setaffinity"):
        yield "not pinned (no sched_setaffinity)"
        return
    before = os.sched_getaffinity(0)
    target = max(before) if cpu is None else cpu
    if cpu == -1:
        yield "not pinned (--cpu -1)"
        return
    os.sched_setaffinity(0, {target})
    try:
        yield f"pinned to CPU {target}"
    finally:
        os.sched_setaffinity(0, before)


def in_process(args: argparse.Namespace) -> tuple[list[Timing], str]:
    import coincurve
    import eth_account
    import x402
    from eth_account.messages import encode_typed_data
    from x402.http.utils import encode_payment_signature_header
    from x402.mechanisms.evm.exact import register_exact_evm_client

    from paysign.bootstrap import asset_registry
    from paysign.config import Settings
    from paysign.protocol import (
        PrivateKeySigner,
        domain_separator,
        parse_signature_request,
        sign_payment,
        transfer_authorization_digest,
    )

    registry = asset_registry(Settings())
    private_key = secrets.token_bytes(32)
    account = eth_account.Account.from_key(private_key)
    signer = PrivateKeySigner(private_key)
    terms = parse_signature_request(REQUEST_BODY, registry).terms
    now = int(time.time())
    valid_before = now + 60

    domain = {
        "name": USDC_NAME,
        "version": USDC_VERSION,
        "chainId": CHAIN_ID,
        "verifyingContract": USDC_BASE,
    }
    types = {
        "TransferWithAuthorization": [
            {"name": "from", "type": "address"},
            {"name": "to", "type": "address"},
            {"name": "value", "type": "uint256"},
            {"name": "validAfter", "type": "uint256"},
            {"name": "validBefore", "type": "uint256"},
            {"name": "nonce", "type": "bytes32"},
        ]
    }
    message = {
        "from": account.address,
        "to": PAY_TO,
        "value": 10000,
        "validAfter": 0,
        "validBefore": valid_before,
    }

    # Correctness first: our signature must be byte-identical to eth-account's, and the SDK
    # client must produce a header, or the timings compare different work.
    nonce = secrets.token_bytes(32)
    ours = sign_payment(terms, signer, now=now, nonce=nonce)
    theirs = account.sign_typed_data(domain, types, {**message, "nonce": nonce})
    if ours.payload["payload"]["signature"] != "0x" + bytes(theirs.signature).hex():
        raise SystemExit("our signature differs from eth-account's: refusing to benchmark")
    recovered = eth_account.Account.recover_message(
        encode_typed_data(domain, types, {**message, "nonce": nonce}),
        signature=bytes(theirs.signature),
    )
    if recovered != account.address:
        raise SystemExit("signature does not recover to the signer")

    client = x402.x402ClientSync()
    register_exact_evm_client(client, account)
    if hasattr(client, "set_spend_controls"):
        client.set_spend_controls(False)
    payment_required = x402.PaymentRequired.model_validate(PAYMENT_REQUIRED)
    sdk_header = encode_payment_signature_header(client.create_payment_payload(payment_required))
    json.loads(base64.b64decode(sdk_header))

    digest = transfer_authorization_digest(
        domain_separator(USDC_NAME, USDC_VERSION, CHAIN_ID, bytes.fromhex(USDC_BASE[2:])),
        signer.address,
        bytes.fromhex(PAY_TO[2:]),
        10000,
        0,
        valid_before,
        nonce,
    )
    cached_key = coincurve.PrivateKey(private_key)
    token_bytes = secrets.token_bytes

    def eth_account_path() -> object:
        return eth_account.Account.sign_typed_data(
            private_key, domain, types, {**message, "nonce": token_bytes(32)}
        )

    def ours_full() -> object:
        request = parse_signature_request(REQUEST_BODY, registry)
        return sign_payment(
            request.terms,
            PrivateKeySigner(private_key),
            now=int(time.time()),
            nonce=token_bytes(32),
        )

    def ours_sign_only() -> object:
        return sign_payment(terms, signer, now=int(time.time()), nonce=token_bytes(32))

    def ours_sign_new_key() -> object:
        return sign_payment(
            terms, PrivateKeySigner(private_key), now=int(time.time()), nonce=token_bytes(32)
        )

    def floor() -> object:
        return cached_key.sign_recoverable(digest, hasher=None)

    def sdk_local() -> object:
        return encode_payment_signature_header(client.create_payment_payload(payment_required))

    def sdk_local_with_parse() -> object:
        parsed = x402.PaymentRequired.model_validate(PAYMENT_REQUIRED)
        return encode_payment_signature_header(client.create_payment_payload(parsed))

    cases = [
        (
            "(a)",
            "eth-account `Account.sign_typed_data` (TransferWithAuthorization)",
            eth_account_path,
        ),
        (
            "(b)",
            "ours, full: `parse_signature_request` + `PrivateKeySigner(key)` + `sign_payment`",
            ours_full,
        ),
        (
            "(b')",
            "ours, signing only: `sign_payment` on parsed terms, cached signer",
            ours_sign_only,
        ),
        (
            "(b'')",
            "ours, `sign_payment` on parsed terms, `PrivateKeySigner` built per call",
            ours_sign_new_key,
        ),
        (
            "(c)",
            "floor: cached coincurve `PrivateKey.sign_recoverable(digest, hasher=None)`",
            floor,
        ),
        (
            "(d)",
            "x402 SDK client, local: `create_payment_payload` + `encode_payment_signature_header`",
            sdk_local,
        ),
        ("(d')", "(d) plus `PaymentRequired.model_validate` of the 402 body", sdk_local_with_parse),
    ]
    timings = []
    with pinned_to_one_core(args.cpu) as pinning:
        for label, what, fn in cases:
            samples, loops = measure(fn, repeats=args.repeats, repeat_seconds=args.repeat_seconds)
            timings.append(Timing(label, what, samples, loops))
            log(
                f"in-process {label}: {statistics.median(samples):.1f} µs "
                f"({loops} loops x {args.repeats})"
            )
    return timings, pinning
