"""The overview says which spend moved money: settled on chain, still reserved (signed, awaiting
settlement), or expired unused, for today and this month (UTC), live apart from sandbox; and
each recent payment carries its status."""

from __future__ import annotations

import re
import secrets

import httpx

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.store.schema import signatures
from portal.conftest import signed_in

DAY = 86_400


def _signature(
    account_id: str, created_at: int, amount: int, status: str, *, sandbox: bool = False
) -> dict[str, object]:
    """A signature as the signing path writes it and the reconciler leaves it."""
    return {
        "account_id": account_id,
        "seller_host": "api.example.com",
        "seller_path": f"/{status}",
        "network": "eip155:84532" if sandbox else "eip155:8453",
        "asset": "0x" + "11" * 20,
        "pay_to": "0x" + "22" * 20,
        "amount": amount,
        "nonce": secrets.token_bytes(32),
        "valid_before": created_at + 60,
        "sandbox": sandbox,
        "x402_version": 2,
        "status": status,
        "settled_tx": "0x" + "ab" * 32 if status == "settled" else None,
        "created_at": created_at,
    }


def _row(table: str, label: str) -> list[str]:
    found = re.search(
        rf'<th scope="row" data-label="Window">{re.escape(label)}</th>(.*?)</tr>', table
    )
    assert found, table
    return re.findall(r'class="(settled|reserved|expired)">([^<]*)</td>', found.group(1))


def test_the_overview_separates_settled_from_reserved_spend(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    now = clock.now()  # 2026-09-21: yesterday is in the same month
    me = holder.account_id
    rows = [
        _signature(me, now - DAY, 300_000, "settled"),
        _signature(me, now - DAY, 70_000, "expired"),
        _signature(me, now - 30, 100_000, "settled"),
        _signature(me, now - 20, 200_000, "signed"),
        _signature(me, now - 10, 50_000, "expired"),
        _signature(me, now - 5, 250_000, "settled", sandbox=True),
        _signature(me, now - 40 * DAY, 9_000_000, "settled"),  # last month: in neither
    ]
    stranger = accounts.create_account(
        runtime.db, runtime.vault, clock, email="s@example.com", password="x" * 20
    )
    rows.append(_signature(stranger.account_id, now - 5, 4_000_000, "settled"))
    with runtime.db.write() as conn:
        conn.execute(signatures.insert(), rows)

    page = signed_in(browser, holder, clock)
    assert page.status_code == 200
    table = page.text.split('id="settlement"')[1].split("</table>")[0]
    assert _row(table, "Today (UTC)") == [
        ("settled", "0.1"),
        ("reserved", "0.2"),
        ("expired", "0.05"),
    ]
    assert _row(table, "This month (UTC)") == [
        ("settled", "0.4"),
        ("reserved", "0.2"),
        ("expired", "0.12"),
    ]
    assert "0.25 USDC settled, 0 USDC awaiting settlement" in page.text  # sandbox, apart

    recent = page.text.split('id="recent"')[1].split("</table>")[0]
    assert re.findall(r'data-settlement="([a-z]+)">([^<]+)</td>', recent) == [
        ("settled", "Settled"),
        ("expired", "Expired unused"),
        ("signed", "Awaiting settlement"),
        ("settled", "Settled"),
        ("expired", "Expired unused"),
    ]
