"""Which payments moved money, in Chromium at a phone's width and a desktop's: the overview's
settled and reserved spend and the activity list's statuses (a settled Base payment linked to
basescan, a settled sandbox one with its hash and no link, one expired unused, one awaiting)
fit the window and pass the portal's audit (``page_audit.js``); the status filter sits with its
label. Screenshots are written to a temporary folder (its path is printed with ``-s``).

The layout does not depend on the database, so these run on SQLite only."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from conftest import FrozenClock, LiveServer
from paysign.bootstrap import Runtime
from paysign.services import accounts
from paysign.store.schema import refusals, signatures
from portal.conftest import signed_in

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

AUDIT = (Path(__file__).parent / "page_audit.js").read_text()
TX = "0x" + "5e" * 31 + "77"


def _signature(
    account_id: str, created_at: int, status: str, *, network: str, sandbox: bool
) -> dict[str, object]:
    return {
        "account_id": account_id,
        "seller_host": f"a-rather-long-seller-name-{status}.example.net",
        "seller_path": "/v1/some/long/path",
        "network": network,
        "asset": "0x" + "11" * 20,
        "pay_to": "0x" + "22" * 20,
        "amount": 125_000,
        "nonce": secrets.token_bytes(32),
        "valid_before": created_at + 60,
        "sandbox": sandbox,
        "x402_version": 2,
        "status": status,
        "settled_tx": TX if status == "settled" else None,
        "created_at": created_at,
    }


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (1280, "light"), (390, "dark")])
def test_settled_reserved_and_expired_payments_fit_and_pass_the_audit(
    chromium: Browser,
    server: LiveServer,
    browser: httpx.Client,
    runtime: Runtime,
    holder: accounts.CreatedAccount,
    tmp_path_factory: pytest.TempPathFactory,
    width: int,
    scheme: str,
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    now, me = clock.now(), holder.account_id
    base, sepolia = "eip155:8453", "eip155:84532"
    with runtime.db.write() as conn:
        conn.execute(
            signatures.insert(),
            [
                _signature(me, now - 40, "settled", network=base, sandbox=False),
                _signature(me, now - 30, "settled", network=sepolia, sandbox=True),
                _signature(me, now - 20, "expired", network=base, sandbox=False),
                _signature(me, now - 10, "signed", network=base, sandbox=False),
            ],
        )
        conn.execute(
            refusals.insert(),
            {
                "account_id": me,
                "seller_host": "refused.example.net",
                "seller_path": "/x",
                "network": base,
                "sandbox": False,
                "amount": 10_000,
                "reason": "allow-pending",
                "rule": None,
                "detail": "waiting",
                "created_at": now - 5,
            },
        )
    signed_in(browser, holder, clock)
    folder = tmp_path_factory.mktemp("settlement-screens")
    print(f"settlement screenshots: {folder}")
    context = chromium.new_context(
        base_url=server.url,
        viewport={"width": width, "height": 800},
        color_scheme=scheme,  # type: ignore[arg-type]
    )
    context.add_cookies(
        [{"name": c.name, "value": c.value or "", "url": server.url} for c in browser.cookies.jar]  # type: ignore[misc]
    )
    page = context.new_page()
    problems: list[str] = []
    for name, path in (("overview", "/portal/"), ("activity", "/portal/activity")):
        response = page.goto(path)
        assert response is not None and response.status == 200, name
        page.screenshot(path=folder / f"{name}-{width}-{scheme}.png", full_page=True)
        problems += [f"{name} at {width}px ({scheme}): {p}" for p in page.evaluate(AUDIT)]
    assert not problems, "\n".join(problems)

    statuses = page.locator("#activity .settlement").all_inner_texts()
    assert [" ".join(text.split()) for text in statuses] == [
        "Awaiting settlement until 21 Sep 2026, 14:14 UTC",
        "Expired unused (spend released)",
        "Settled in 0x5e5e…5e77",
        "Settled in 0x5e5e…5e77",
    ]
    link = page.locator("#activity a.tx")
    assert link.count() == 1 and link.get_attribute("href") == f"https://basescan.org/tx/{TX}"
    assert page.locator("#activity abbr.tx").get_attribute("title") == TX  # sandbox: no link

    label = page.locator('label[for="f-status"]').bounding_box()
    box = page.locator("#f-status").bounding_box()
    assert label is not None and box is not None
    assert abs(label["x"] - box["x"]) < 1 and 0 <= box["y"] - (label["y"] + label["height"]) < 16

    page.select_option("#f-status", "settled")
    with page.expect_navigation():
        page.get_by_role("button", name="Filter", exact=True).click()
    assert page.locator("#activity .settlement").count() == 2
    context.close()
