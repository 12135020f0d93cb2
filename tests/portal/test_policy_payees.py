"""Payee rules on the policy page: adding a payee to the deny list, or starting an allow list,
needs no code; what lets more payees through needs a fresh one; a mistyped address is refused."""

from __future__ import annotations

import httpx

from conftest import FrozenClock
from paysign.bootstrap import Runtime
from paysign.services import accounts, policy
from portal.conftest import PASSWORD, code, csrf_of, error_of, sign_in

PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
OTHER = "0x" + "ab" * 20
OTHER_CHECKSUMMED = "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB"


def test_payee_rules_from_the_policy_page(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    assert (
        sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code == 303
    )
    page = browser.get("/portal/policy")
    assert "No payee allow list" in page.text
    csrf = csrf_of(page)

    def post(kind: str, address: str, action: str = "add", totp: str = "") -> httpx.Response:
        form = {"csrf": csrf, "kind": kind, "rule": address, "action": action, "totp": totp}
        return browser.post("/portal/policy/rules", data=form)

    def payees() -> dict[str, list[str]]:
        return policy.get_policy(runtime.db, email=holder.email)["payTo"]

    assert post("payTo.deny", OTHER).status_code == 303
    assert post("payTo.allow", PAYEE.lower()).status_code == 303  # an allow list tightens
    assert payees() == {"allow": [PAYEE], "deny": [OTHER_CHECKSUMMED]}
    shown = browser.get("/portal/policy")
    assert PAYEE in shown.text and 'id="payee-deny"' in shown.text

    mistyped = post("payTo.allow", PAYEE[:-1] + "c")
    assert mistyped.status_code == 400 and "checksum" in error_of(mistyped)

    # Emptying the allow list lets every payee through: a fresh code is needed.
    refused = post("payTo.allow", PAYEE, action="remove")
    assert refused.status_code == 401 and "fresh authenticator code" in error_of(refused)
    assert payees()["allow"] == [PAYEE]
    clock.advance(30)
    fresh = code(holder.totp_secret, clock)
    assert post("payTo.allow", PAYEE, action="remove", totp=fresh).status_code == 303
    assert payees() == {"allow": [], "deny": [OTHER_CHECKSUMMED]}


def test_denying_the_only_allowed_payee_is_refused_not_turned_into_allowing_every_other(
    browser: httpx.Client, runtime: Runtime, holder: accounts.CreatedAccount
) -> None:
    """It took the payee off the allow list, which left it empty: every other payee could be
    paid, with the holder's code, by a holder who meant to stop paying one."""
    clock: FrozenClock = runtime.clock  # type: ignore[assignment]
    assert (
        sign_in(browser, holder.email, PASSWORD, code(holder.totp_secret, clock)).status_code == 303
    )
    csrf = csrf_of(browser.get("/portal/policy"))
    form = {"csrf": csrf, "kind": "payTo.allow", "rule": PAYEE, "action": "add", "totp": ""}
    assert browser.post("/portal/policy/rules", data=form).status_code == 303
    clock.advance(30)
    fresh = code(holder.totp_secret, clock)
    deny = {**form, "kind": "payTo.deny", "totp": fresh}
    refused = browser.post("/portal/policy/rules", data=deny)
    assert refused.status_code == 400 and "only payee on your allow list" in error_of(refused)
    assert policy.get_policy(runtime.db, email=holder.email)["payTo"] == {
        "allow": [PAYEE],
        "deny": [],
    }
