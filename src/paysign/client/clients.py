"""Ready-made ``httpx`` clients that pay x402 sellers through paysign: the auth flow plus the
retrying transport, and the signer they share.

    with PaysignClient(sandbox=True, max_amount=parse_usdc("0.05")) as http:
        response = http.get("http://127.0.0.1:8403/weather/v1/forecast/Paris")
        print(response.json(), payment_of(response).transaction)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from paysign.client.answers import DEFAULT_MAX_ANSWER_BYTES
from paysign.client.auth import EventHook, PaysignAuth
from paysign.client.retry import AsyncPaidRetryTransport, PaidRetryTransport
from paysign.client.signer import PaysignSigner
from paysign.client.status import WalletStatus

__all__ = ["AsyncPaysignClient", "PaysignClient"]


def _signer_and_auth(
    api_key: str | None,
    paysign_url: str | None,
    signer: PaysignSigner | None,
    **auth_options: Any,
) -> tuple[PaysignSigner, PaysignAuth, bool]:
    """The signer (ours to close when we made it) and the auth flow both clients install."""
    made = signer or PaysignSigner(api_key, paysign_url)
    return made, PaysignAuth(made, **auth_options), signer is None


class PaysignClient(httpx.Client):
    """An ``httpx.Client`` that pays x402 sellers through paysign, with rule 6's retries.

    ``api_key``/``paysign_url`` (default ``PAYSIGN_API_KEY``/``PAYSIGN_BASE_URL``) or a
    ``signer``; ``sandbox``, ``network``, ``max_amount``, ``usdc``, ``on_event`` and
    ``max_answer_bytes`` (default 16 MiB) as for :class:`PaysignAuth`; every other keyword goes
    to ``httpx.Client``.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        paysign_url: str | None = None,
        signer: PaysignSigner | None = None,
        sandbox: bool = False,
        network: str | None = None,
        max_amount: int | None = None,
        usdc: Mapping[str, str] | None = None,
        on_event: EventHook | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: httpx.BaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        self.signer, self.paysign_auth, self._owns_signer = _signer_and_auth(
            api_key,
            paysign_url,
            signer,
            sandbox=sandbox,
            network=network,
            max_amount=max_amount,
            usdc=usdc,
            on_event=on_event,
            max_answer_bytes=max_answer_bytes,
        )
        kwargs.setdefault("timeout", 30.0)
        super().__init__(auth=self.paysign_auth, transport=PaidRetryTransport(transport), **kwargs)

    def status(self, *, seller: str | None = None) -> WalletStatus:
        """What the wallet can still spend (:meth:`PaysignSigner.status`)."""
        return self.signer.status(seller=seller)

    def close(self) -> None:
        super().close()
        if self._owns_signer:
            self.signer.close()


class AsyncPaysignClient(httpx.AsyncClient):
    """:class:`PaysignClient` for asyncio."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        paysign_url: str | None = None,
        signer: PaysignSigner | None = None,
        sandbox: bool = False,
        network: str | None = None,
        max_amount: int | None = None,
        usdc: Mapping[str, str] | None = None,
        on_event: EventHook | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> None:
        self.signer, self.paysign_auth, self._owns_signer = _signer_and_auth(
            api_key,
            paysign_url,
            signer,
            sandbox=sandbox,
            network=network,
            max_amount=max_amount,
            usdc=usdc,
            on_event=on_event,
            max_answer_bytes=max_answer_bytes,
        )
        kwargs.setdefault("timeout", 30.0)
        super().__init__(
            auth=self.paysign_auth, transport=AsyncPaidRetryTransport(transport), **kwargs
        )

    async def status(self, *, seller: str | None = None) -> WalletStatus:
        return await self.signer.astatus(seller=seller)

    async def aclose(self) -> None:
        await super().aclose()
        if self._owns_signer:
            await self.signer.aclose()
