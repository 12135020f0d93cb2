"""A withdrawal made on the real dev chain is audited in the activity and its export, on both
databases: who (the holder's email), when, how much, to which address, in which transaction,
and the step-up — that a fresh authenticator code was verified, and when."""

from __future__ import annotations

import csv
import io

import pytest
from withdrawal_support import fresh_address, fresh_code, new_holder

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.protocol import parse_address
from paysign.services import accounts, activity, withdrawals
from paysign.services.portal_deps import portal_deps
from paysign.store.schema import withdrawals as withdrawals_table

SANDBOX = "eip155:84532"


@pytest.fixture
def holder(chained_runtime: Runtime) -> accounts.CreatedAccount:
    created = new_holder(chained_runtime)
    chain = chained_runtime.sandbox_chain
    assert chain is not None
    chain.send_usdc(parse_address(created.wallet_address), 3_000_000)
    return created


def test_a_withdrawal_records_its_step_up_and_the_activity_shows_who_and_when(
    chained_runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = chained_runtime.clock  # type: ignore[assignment]
    code = fresh_code(chained_runtime, holder)
    to = fresh_address()
    deps = portal_deps(chained_runtime)

    sent = withdrawals.withdraw(deps, holder.account_id, SANDBOX, to, "1.25", code)

    with chained_runtime.db.read() as conn:
        [stored] = conn.execute(withdrawals_table.select()).all()
    assert stored.code_verified_at == clock.now() and stored.fresh_code is True
    [row] = activity.page_of(
        chained_runtime.db, holder.account_id, activity.ActivityFilters(), size=5
    ).rows
    entry = activity.entry_of(row)
    assert (entry["decision"], entry["by"], entry["stepUp"]) == (
        "withdrawn",
        holder.email,
        "authenticator code",
    )
    assert entry["stepUpAt"] == entry["at"]
    assert (entry["amount"], entry["payTo"], entry["transaction"]) == (
        1_250_000,
        to,
        sent.transaction_hash,
    )

    text = "".join(
        activity.csv_chunks(
            activity.all_rows(chained_runtime.db, holder.account_id, activity.ActivityFilters())
        )
    )
    [cells] = list(csv.DictReader(io.StringIO(text)))
    assert (cells["by"], cells["step_up"], cells["step_up_utc"]) == (
        holder.email,
        "authenticator code",
        cells["time_utc"],
    )
    assert (cells["amount_usdc"], cells["pay_to"], cells["transaction"]) == (
        "1.250000",
        to,
        sent.transaction_hash,
    )
