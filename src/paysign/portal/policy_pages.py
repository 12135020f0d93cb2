"""The source policy page: the freeze switch, rules (with a preview of what one matches before
it is saved), approval setting, ecosystem switches, caps in USDC."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import InvalidPolicy
from paysign.policy.rules import parse_rule
from paysign.policy.seller_budgets import entry_rule_text
from paysign.portal.web import FORM_EXPIRED, Portal, parse_usdc
from paysign.services import policy_edits, rule_preview
from paysign.services.sessions import Session
from paysign.services.sign_in import CredentialsRefused

_APPROVALS = [
    ("all", "Every seller not on the allow list"),
    ("openEcosystem", "Open-ecosystem sellers not on the allow list (catalog sellers need none)"),
    ("none", "None: pay any seller not denied"),
]
_ECOSYSTEMS = [
    ("premium", "Premium catalog sellers"),
    ("standard", "Standard catalog sellers"),
    ("openEcosystem", "Open ecosystem (any other x402 seller)"),
]
_CAPS = [
    ("perPayment", "Per payment"),
    ("hourly", "Per UTC hour"),
    ("daily", "Per UTC day"),
    ("monthly", "Per UTC month"),
]


#: The payee lists' names in the rule forms, and in the policy document's ``payTo``.
_PAYEE_LISTS: dict[str, Literal["allow", "deny"]] = {"payTo.allow": "allow", "payTo.deny": "deny"}


def _payee_edit(
    kind: Literal["allow", "deny"], action: str, address: str
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Add an address to a payee list (taking it off the other) or remove it; the document's
    parsing checks the address, and addresses compare in any letter case."""
    other = "deny" if kind == "allow" else "allow"

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        lists = doc.setdefault("payTo", {"allow": [], "deny": []})
        same = address.lower()
        lists[kind] = [a for a in lists.get(kind, []) if a.lower() != same]
        if action == "add":
            allowed = lists.get(other, [])
            lists[other] = [a for a in allowed if a.lower() != same]
            if kind == "deny" and allowed and not lists[other]:
                # An empty allow list allows every payee: denying the one allowed payee would
                # open payments to all the others, the opposite of what the holder asked.
                raise InvalidPolicy(
                    "/payTo/deny",
                    f"{address} is the only payee on your allow list; denying it would empty "
                    "that list, and with no allow list your agent may pay any payee. Add the "
                    "payee you do want to the allow list first, or freeze spending.",
                )
            lists[kind].append(address)
        return doc

    return edit


class PolicyPages:
    def __init__(self, portal: Portal) -> None:
        self.portal = portal

    async def page(self, session: Session, *, status: int = 200, **context: Any) -> HTMLResponse:
        assert session.account_id is not None
        current = await run_in_threadpool(
            policy_edits.current_policy, self.portal.deps, session.account_id
        )
        return self.portal.render(
            "policy.html",
            session,
            status=status,
            title="Source policy",
            policy=current,
            approvals=_APPROVALS,
            ecosystems=_ECOSYSTEMS,
            caps=_CAPS,
            **context,
        )

    async def show(self, request: Request) -> Response:
        session = await self.portal.session_of(request)
        if session is None or session.account_id is None:
            return self.portal.to_sign_in()
        return await self.page(session)

    async def _change(
        self, session: Session, edit: Callable[[dict[str, Any]], dict[str, Any]], code: str
    ) -> Response:
        assert session.account_id is not None
        try:
            await run_in_threadpool(
                policy_edits.change_policy, self.portal.deps, session.account_id, edit, code
            )
        except InvalidPolicy as problem:
            return await self.page(session, status=400, error=problem.detail)
        except CredentialsRefused as refused:
            message = (
                refused.message
                if code.strip()
                else "This change lets your agent do more: enter a fresh authenticator code."
            )
            return await self.page(
                session, status=429 if refused.rate_limited else 401, error=message
            )
        return self.portal.after_post("/policy", notice="Policy saved.")

    async def settings(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        try:
            caps = {name: parse_usdc(form.get(name, "")) for name, _ in _CAPS}
        except ValueError as exc:
            return await self.page(session, status=400, error=str(exc))
        approval = form.get("approval", "")

        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            doc["approval"] = approval
            doc["ecosystems"] = {name: form.get(name) == "on" for name, _ in _ECOSYSTEMS}
            doc["caps"] = caps
            return doc

        return await self._change(session, edit, form.get("totp", ""))

    async def rules(self, request: Request) -> Response:
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        kind, action = form.get("kind", ""), form.get("action", "")
        text = form.get("rule", "").strip()
        if kind in _PAYEE_LISTS and action in ("add", "remove") and text:
            return await self._change(
                session, _payee_edit(_PAYEE_LISTS[kind], action, text), form.get("totp", "")
            )
        if kind not in ("allow", "deny") or action not in ("add", "remove") or not text:
            return await self.page(session, status=400, error="Choose a rule and a list.")
        other = "deny" if kind == "allow" else "allow"

        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            # Allow entries may be objects: a rule with its budget (``seller_budgets``).
            if action == "remove":
                doc[kind] = [entry for entry in doc[kind] if entry_rule_text(entry) != text]
            else:
                try:
                    rule = str(parse_rule(text))
                except ValueError as exc:
                    raise InvalidPolicy("/rule", str(exc)) from None
                # A rule moves between lists: adding it to one takes it off the other.
                doc[other] = [e for e in doc[other] if entry_rule_text(e) != rule]
                if all(entry_rule_text(e) != rule for e in doc[kind]):
                    doc[kind].append(rule)
            return doc

        return await self._change(session, edit, form.get("totp", ""))

    async def freeze(self, request: Request) -> Response:
        """Freeze spending in one click (no code: it only tightens), or unfreeze it with a
        fresh authenticator code."""
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        deps, account_id = self.portal.deps, session.account_id
        action, code = form.get("action", ""), form.get("totp", "")
        if action == "freeze":
            await run_in_threadpool(policy_edits.freeze, deps, account_id)
            return self.portal.after_post("/policy", notice="Spending frozen.")
        if action != "unfreeze":
            return await self.page(session, status=400, error="Choose freeze or unfreeze.")
        try:
            await run_in_threadpool(policy_edits.unfreeze, deps, account_id, code)
        except CredentialsRefused as refused:
            message = (
                refused.message
                if code.strip()
                else "Unfreezing lets your agent pay again: enter a fresh authenticator code."
            )
            return await self.page(
                session, status=429 if refused.rate_limited else 401, error=message
            )
        return self.portal.after_post("/policy", notice="Spending unfrozen.")

    async def preview(self, request: Request) -> Response:
        """What the typed rule would match; nothing is saved and no code is asked for. A POST
        with the CSRF token like the other rule forms (its button sits in the same form)."""
        session, form = await self.portal.form_session(request)
        if session is None or session.account_id is None:
            return self.portal.refused(FORM_EXPIRED, 403)
        kind, text = form.get("kind", ""), form.get("rule", "").strip()
        typed: dict[str, Any] = {"rule_text": text, "rule_kind": kind}
        if kind not in ("allow", "deny") or not text:
            return await self.page(session, status=400, error="Choose a rule and a list.", **typed)
        list_kind: Literal["allow", "deny"] = "allow" if kind == "allow" else "deny"
        found = await run_in_threadpool(
            rule_preview.preview, self.portal.deps, session.account_id, text, list_kind
        )
        if found.error is not None:
            return await self.page(session, status=400, error=found.error, preview=found, **typed)
        return await self.page(session, preview=found, **typed)
