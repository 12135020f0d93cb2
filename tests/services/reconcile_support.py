"""For reconciler tests: a chain reader that answers from sets the test fills in, and a
fixture signing live payments through the use case."""

from __future__ import annotations

import pytest

from conftest import signature_body
from paysign.chain.authorizations import ChainUnavailable
from paysign.services.signing import SigningDeps, sign_payment

USDC = 1_000_000
TESTNET = "eip155:84532"


class FakeChain:
    def __init__(self, networks: set[str]) -> None:
        self._networks = frozenset(networks)
        self.used: set[bytes] = set()
        self.transactions: dict[bytes, str] = {}
        self.fail = False
        self.logs_fail = False
        self.calls = 0

    @property
    def networks(self) -> frozenset[str]:
        return self._networks

    def is_used(self, network: str, token: bytes, authorizer: bytes, nonce: bytes) -> bool:
        self.calls += 1
        if self.fail:
            raise ChainUnavailable("down")
        return nonce in self.used

    def settlement_tx(
        self,
        network: str,
        token: bytes,
        authorizer: bytes,
        nonce: bytes,
        *,
        signed_at: int,
        valid_before: int,
    ) -> str | None:
        if self.logs_fail:
            raise ChainUnavailable("eth_getLogs refused")
        return self.transactions.get(nonce)


@pytest.fixture
def sign(runtime, signing_store):
    def sign_for(account, *, amount, network=TESTNET, sandbox=False, max_timeout=60):
        deps = SigningDeps(signing_store, runtime.vault, runtime.clock, runtime.registry)
        body = signature_body(amount=str(amount), network=network, max_timeout=max_timeout)
        return sign_payment(deps, account["api_key"], body, sandbox=sandbox).nonce

    return sign_for
