"""The withdrawals of an account are limited in any 24 hours, on the real dev chain and both
databases. The attack: dust withdrawals, each one's gas paid by the relayer, which sends one at
a time. Past the limit nothing is sent and the code stays unspent; a window that opened with
the first withdrawal would let twice the limit through around its end."""

from __future__ import annotations

import dataclasses

import pytest
from withdrawal_support import fresh_address, fresh_code, new_holder, stored_withdrawals

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.chain.testnet import SandboxChain
from paysign.errors import WithdrawalRefused, WithdrawalUnavailable
from paysign.protocol import parse_address
from paysign.services import accounts, withdrawals
from paysign.services.portal_deps import PortalDeps, portal_deps
from paysign.services.sign_in import CredentialsRefused

SANDBOX = "eip155:84532"
HOUR = 3_600
DUST = "0.000001"


@pytest.fixture
def chain(chained_runtime: Runtime) -> SandboxChain:
    assert chained_runtime.sandbox_chain is not None
    return chained_runtime.sandbox_chain


@pytest.fixture
def holder(chained_runtime: Runtime, chain: SandboxChain) -> accounts.CreatedAccount:
    created = new_holder(chained_runtime)
    chain.send_usdc(parse_address(created.wallet_address), 1_000_000)
    return created


@pytest.fixture
def two_a_day(chained_runtime: Runtime) -> PortalDeps:
    return dataclasses.replace(portal_deps(chained_runtime), withdrawals_per_day=2)


def _send(runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount) -> None:
    withdrawals.withdraw(
        deps, holder.account_id, SANDBOX, fresh_address(), DUST, fresh_code(runtime, holder)
    )


def _refused(runtime: Runtime, deps: PortalDeps, holder: accounts.CreatedAccount) -> str:
    """Refused for the limit, its code still unspent afterwards."""
    code = fresh_code(runtime, holder)
    with pytest.raises(WithdrawalRefused) as refused:
        withdrawals.withdraw(deps, holder.account_id, SANDBOX, fresh_address(), DUST, code)
    deps.credentials.fresh_code(holder.account_id, code)
    return str(refused.value)


def test_past_the_limit_nothing_is_sent_and_the_code_stays_unspent(
    chained_runtime: Runtime,
    chain: SandboxChain,
    two_a_day: PortalDeps,
    holder: accounts.CreatedAccount,
) -> None:
    wallet = parse_address(holder.wallet_address)
    with pytest.raises(CredentialsRefused):  # a wrong code sends nothing and counts nothing
        withdrawals.withdraw(two_a_day, holder.account_id, SANDBOX, fresh_address(), DUST, "000000")
    _send(chained_runtime, two_a_day, holder)
    _send(chained_runtime, two_a_day, holder)
    before = chain.usdc_balance(wallet)
    said = _refused(chained_runtime, two_a_day, holder)
    assert "has sent 2 withdrawals in the last 24 hours" in said
    assert chain.usdc_balance(wallet) == before and len(stored_withdrawals(chained_runtime)) == 2


def test_the_limit_holds_in_any_24_hours_not_in_a_window_opened_by_the_first(
    chained_runtime: Runtime, two_a_day: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    _send(chained_runtime, two_a_day, holder)
    first = clock.now()
    clock.advance(20 * HOUR)
    _send(chained_runtime, two_a_day, holder)
    second = clock.now()
    said = _refused(chained_runtime, two_a_day, holder)
    assert "the next one can be sent from" in said

    clock.current = first + 24 * HOUR  # the first is 24 hours old: room for one more
    _send(chained_runtime, two_a_day, holder)
    # A window opened by the first withdrawal would have started afresh here, with room for
    # two; in the 24 hours before now there are already two.
    clock.advance(HOUR)
    assert clock.now() < second + 24 * HOUR
    _refused(chained_runtime, two_a_day, holder)
    assert len(stored_withdrawals(chained_runtime)) == 3


def test_the_refusal_says_when_the_next_one_can_go(
    chained_runtime: Runtime, two_a_day: PortalDeps, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    new_year = 1_767_225_600  # 1 Jan 2026, 00:00 UTC
    clock.current = new_year - 30  # each code is asked 30 s later, at a new step
    _send(chained_runtime, two_a_day, holder)  # sent at 00:00:00
    clock.current = new_year + 24 * HOUR - 120
    _send(chained_runtime, two_a_day, holder)  # sent at 23:58:30
    said = _refused(chained_runtime, two_a_day, holder)  # at 23:59:00
    assert "the next one can be sent from 2 Jan 2026, 00:00:00 UTC" in said
    clock.current = new_year + 24 * HOUR - 30
    _send(chained_runtime, two_a_day, holder)  # at 00:00:00: the refused one left no count
    assert len(stored_withdrawals(chained_runtime)) == 3


class _ChainThatFails:
    """The sandbox chain, unreachable when the withdrawal asks for its newest block."""

    def __init__(self, chain: SandboxChain) -> None:
        self._chain = chain

    def __getattr__(self, name: str) -> object:
        return getattr(self._chain, name)

    def block_time(self) -> int:
        raise WithdrawalUnavailable("the chain is down")


def test_a_withdrawal_given_up_on_its_way_does_not_count(
    chained_runtime: Runtime,
    chain: SandboxChain,
    two_a_day: PortalDeps,
    holder: accounts.CreatedAccount,
) -> None:
    down = dataclasses.replace(two_a_day, sandbox_chain=_ChainThatFails(chain))
    for _ in range(3):
        with pytest.raises(WithdrawalUnavailable):
            _send(chained_runtime, down, holder)
    _send(chained_runtime, two_a_day, holder)
    _send(chained_runtime, two_a_day, holder)
    assert len(stored_withdrawals(chained_runtime)) == 2


class _ChainAskedDuringAnother:
    """The sandbox chain, which while one withdrawal is on its way (checked, its code spent,
    not yet recorded) takes a second one of the same holder: two sent at once."""

    def __init__(
        self, chain: SandboxChain, runtime: Runtime, holder: accounts.CreatedAccount
    ) -> None:
        self._chain = chain
        self._runtime = runtime
        self._holder = holder
        self.second: Exception | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self._chain, name)

    def block_time(self) -> int:
        if self.second is None:
            deps = dataclasses.replace(portal_deps(self._runtime), withdrawals_per_day=2)
            try:
                _send(self._runtime, deps, self._holder)
            except WithdrawalRefused as refused:
                self.second = refused
        return self._chain.block_time()


def test_a_withdrawal_on_its_way_counts_against_the_limit(
    chained_runtime: Runtime,
    chain: SandboxChain,
    two_a_day: PortalDeps,
    holder: accounts.CreatedAccount,
) -> None:
    _send(chained_runtime, two_a_day, holder)
    busy = _ChainAskedDuringAnother(chain, chained_runtime, holder)
    _send(chained_runtime, dataclasses.replace(two_a_day, sandbox_chain=busy), holder)
    assert isinstance(busy.second, WithdrawalRefused)
    assert "others are being sent right now" in str(busy.second)
    assert len(stored_withdrawals(chained_runtime)) == 2
