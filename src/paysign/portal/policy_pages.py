"""The source policy page: rules (with a preview of what one matches before it is saved),
approval setting, ecosystem switches, caps in USDC."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from paysign.errors import InvalidPolicy
from paysign.policy.rules import parse_rule
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
_CAPS = [("perPayment", "Per payment"), ("daily", "Per UTC day"), ("monthly", "Per UTC month")]


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
        return await self.page(session, notice="Policy saved.")

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
        if kind not in ("allow", "deny") or action not in ("add", "remove") or not text:
            return await self.page(session, status=400, error="Choose a rule and a list.")
        other = "deny" if kind == "allow" else "allow"

        def edit(doc: dict[str, Any]) -> dict[str, Any]:
            if action == "remove":
                doc[kind] = [rule for rule in doc[kind] if rule != text]
            else:
                try:
                    rule = str(parse_rule(text))
                except ValueError as exc:
                    raise InvalidPolicy("/rule", str(exc)) from None
                # A rule moves between lists: adding it to one takes it off the other.
                doc[other] = [existing for existing in doc[other] if existing != rule]
                if rule not in doc[kind]:
                    doc[kind].append(rule)
            return doc

        return await self._change(session, edit, form.get("totp", ""))

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
