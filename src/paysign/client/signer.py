"""The paysign service as a buyer's agent calls it: sign a payment, read the catalog and the
wallet's status, get test funds. Only an API key; the wallet's private key never leaves the service.

    signer = PaysignSigner("psk_...", "https://paysign.example")
    signature = signer.sign(seller_url, payment_required, sandbox=True)
    # send signature.header to the seller as PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1)

Refusals raise the exceptions of :mod:`paysign.client.errors`. A signing request that fails in
transit, or gets a 5xx, is sent again (spec 4.1 rule 5: each request makes a new signature, and
an unused one simply expires); :class:`SigningUnavailable` once the retries are spent.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from paysign.client.errors import SigningUnavailable, Unauthorized, problem_error
from paysign.client.status import WalletStatus
from paysign.client.wire import SANDBOX_HEADER

__all__ = ["DEFAULT_BASE_URL", "PaysignSigner", "Signature"]

DEFAULT_BASE_URL = "http://127.0.0.1:8402"
API_KEY_ENV = "PAYSIGN_API_KEY"
BASE_URL_ENV = "PAYSIGN_BASE_URL"
_USER_AGENT = "paysign-client/0.1"


@dataclass(frozen=True, slots=True)
class Signature:
    """The service's signature result (spec 2.2)."""

    header: str  # paymentSignatureHeader: sent to the seller unchanged
    valid_after: int
    valid_before: int  # unix seconds; the header is useless afterwards
    nonce: str  # 0x + 64 hex: the EIP-3009 authorization nonce

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Signature:
        return cls(
            header=str(body["paymentSignatureHeader"]),
            valid_after=int(body.get("validAfter", 0)),
            valid_before=int(body["validBefore"]),
            nonce=str(body["nonce"]),
        )


class PaysignSigner:
    """Client of the paysign API at ``base_url`` with the bearer ``api_key``.

    ``api_key``/``base_url`` default to ``PAYSIGN_API_KEY``/``PAYSIGN_BASE_URL``. Sync methods
    and their ``a``-prefixed async twins share the settings; each side keeps one connection
    pool, closed by :meth:`close` / :meth:`aclose` (or the context managers).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self._transport = transport
        self._async_transport = async_transport
        self._http: httpx.Client | None = None
        self._ahttp: httpx.AsyncClient | None = None
        self._catalog: tuple[str, dict[str, Any]] | None = None  # (ETag, document)

    def __repr__(self) -> str:  # never the key
        return f"PaysignSigner(base_url={self.base_url!r})"

    # ---- plumbing ----

    def _headers(self, *, sandbox: bool = False, auth: bool = True) -> dict[str, str]:
        headers = {"User-Agent": _USER_AGENT, "Accept": "application/json"}
        if auth:
            if not self.api_key:
                raise Unauthorized(
                    401,
                    {
                        "message": "Unauthorized",
                        "detail": f"no API key: pass api_key or set {API_KEY_ENV}",
                    },
                )
            headers["Authorization"] = f"Bearer {self.api_key}"
        if sandbox:
            headers[SANDBOX_HEADER] = "true"
        return headers

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout, transport=self._transport)
        return self._http

    def _aclient(self) -> httpx.AsyncClient:
        if self._ahttp is None:
            self._ahttp = httpx.AsyncClient(timeout=self.timeout, transport=self._async_transport)
        return self._ahttp

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    async def aclose(self) -> None:
        if self._ahttp is not None:
            await self._ahttp.aclose()
            self._ahttp = None
        self.close()

    def __enter__(self) -> PaysignSigner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> PaysignSigner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _send(self, request: httpx.Request) -> httpx.Response:
        client = self._client()
        for attempt in range(self.retries + 1):
            try:
                response = client.send(request)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise SigningUnavailable(f"paysign at {self.base_url}: {exc}") from exc
            else:
                if response.status_code < 500 or attempt == self.retries:
                    return response
            time.sleep(_backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _asend(self, request: httpx.Request) -> httpx.Response:
        client = self._aclient()
        for attempt in range(self.retries + 1):
            try:
                response = await client.send(request)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise SigningUnavailable(f"paysign at {self.base_url}: {exc}") from exc
            else:
                if response.status_code < 500 or attempt == self.retries:
                    return response
            await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # ---- POST /wallets/signatures ----

    def _request(
        self, method: str, path: str, headers: dict[str, str], json: Any = None
    ) -> httpx.Request:
        return httpx.Request(
            method,
            self.base_url + path,
            headers=headers,
            json=json,
            extensions={"timeout": httpx.Timeout(self.timeout).as_dict()},
        )

    def _sign_request(
        self, seller_url: str, payment_required: dict[str, Any], sandbox: bool
    ) -> httpx.Request:
        return self._request(
            "POST",
            "/wallets/signatures",
            self._headers(sandbox=sandbox),
            {"sellerUrl": seller_url, "paymentRequired": payment_required},
        )

    def sign(
        self, seller_url: str, payment_required: dict[str, Any], *, sandbox: bool = False
    ) -> Signature:
        """Sign ``payment_required.accepts[0]`` for a call to ``seller_url``.

        ``payment_required`` is the seller's decoded terms with the chosen option first;
        ``sandbox`` sends ``X-Sandbox-Mode: true`` (testnet only, no spend caps).
        """
        response = self._send(self._sign_request(seller_url, payment_required, sandbox))
        return Signature.from_json(_ok(response))

    async def asign(
        self, seller_url: str, payment_required: dict[str, Any], *, sandbox: bool = False
    ) -> Signature:
        response = await self._asend(self._sign_request(seller_url, payment_required, sandbox))
        return Signature.from_json(_ok(response))

    # ---- GET /buyers/catalog ----

    def _catalog_request(self) -> httpx.Request:
        headers = self._headers(auth=bool(self.api_key))
        if self._catalog is not None:
            headers["If-None-Match"] = self._catalog[0]
        return self._request("GET", "/buyers/catalog", headers)

    def _catalog_result(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code == 304 and self._catalog is not None:
            return self._catalog[1]
        document = _ok(response)
        etag = response.headers.get("ETag")
        self._catalog = (etag, document) if etag else None
        return document

    def catalog(self) -> dict[str, Any]:
        """The catalog document (spec 2.4): Premium and Standard listings. Revalidated with
        its ETag, so asking again is cheap. The key is optional here."""
        return self._catalog_result(self._send(self._catalog_request()))

    async def acatalog(self) -> dict[str, Any]:
        return self._catalog_result(await self._asend(self._catalog_request()))

    # ---- GET /wallets/status ----

    def _status_request(self, seller: str | None) -> httpx.Request:
        path = "/wallets/status" + ("" if seller is None else "?" + urlencode({"seller": seller}))
        return self._request("GET", path, self._headers())

    def status(self, *, seller: str | None = None) -> WalletStatus:
        """What the wallet can still spend: each cap's room and reset, the sellers waiting
        for approval (and whether ``seller``, a URL, is one), the sandbox balance, the API
        key's expiry."""
        return WalletStatus.from_json(_ok(self._send(self._status_request(seller))))

    async def astatus(self, *, seller: str | None = None) -> WalletStatus:
        return WalletStatus.from_json(_ok(await self._asend(self._status_request(seller))))

    # ---- POST /wallets/testnet/funds ----

    def request_test_funds(self) -> dict[str, Any]:
        """10 test USDC on the sandbox network, once per 24 hours (else
        :class:`~paysign.client.errors.TestFundsRateLimited`)."""
        request = self._request("POST", "/wallets/testnet/funds", self._headers())
        return _ok(self._send(request))


def _backoff(attempt: int) -> float:
    return float(min(0.25 * 2**attempt, 2.0))


def _ok(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    if response.is_success:
        raise problem_error(
            502, {"title": "Bad answer", "detail": "the paysign answer is not a JSON object"}
        )
    raise problem_error(response.status_code, body)
