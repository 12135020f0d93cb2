"""For withdrawal tests: a holder with USDC on a chain, a fresh authenticator code, a fresh
destination, and the withdrawals as stored."""

from __future__ import annotations

import secrets

import pyotp

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.protocol import address_of, checksum_address
from paysign.services import accounts
from paysign.store.schema import withdrawals as withdrawals_table


def new_holder(runtime: Runtime) -> accounts.CreatedAccount:
    """An account of its own (its wallet empty until the test funds it)."""
    return accounts.create_account(
        runtime.db,
        runtime.vault,
        runtime.clock,
        email=f"holder-{secrets.token_hex(4)}@example.com",
        password="correct horse battery staple",
    )


def fresh_code(runtime: Runtime, holder: accounts.CreatedAccount) -> str:
    """The holder's authenticator code of a new step, so one no earlier request used."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    clock.advance(30)
    return str(pyotp.TOTP(holder.totp_secret).at(clock.now()))


def fresh_address() -> str:
    return checksum_address(address_of(secrets.token_bytes(32)))


def stored_withdrawals(runtime: Runtime) -> list[dict[str, object]]:
    with runtime.db.read() as conn:
        return [dict(row._mapping) for row in conn.execute(withdrawals_table.select())]
