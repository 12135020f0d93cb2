"""Credential checks and the one 401 every entry point gives.

Every credential failure gets the same body, whichever entry point and whatever went wrong
(spec 5.3): a caller learns nothing about which part of its credential was refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from paysign.services.signing import HolderLoader, SigningDeps

T = TypeVar("T")

UNAUTHORIZED_BODY = b'{"message":"Unauthorized"}'


async def call_store(deps: SigningDeps, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a use case that talks to the signing store: on the loop for in-process SQLite
    (microseconds, cheaper than a thread hop), on the store's own threads otherwise."""
    if deps.store.inline:
        return function(*args, **kwargs)
    if deps.store.executor is None:
        return await run_in_threadpool(function, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(deps.store.executor, partial(function, *args, **kwargs))


def unauthorized_response() -> Response:
    return Response(
        UNAUTHORIZED_BODY,
        status_code=401,
        media_type="application/json",
        headers={"WWW-Authenticate": "Bearer"},
    )


@dataclass(frozen=True, slots=True)
class Principal:
    """The account a connector request acts for, whichever credential (API key or OAuth access
    token) named it."""

    account_id: int | str
    kind: str  # "api_key" or "oauth"
    client_id: str  # binds MCP sessions to the credential that opened them
    #: How the signing use case finds who pays: by the API key, or by the signed-in account.
    payer: HolderLoader
