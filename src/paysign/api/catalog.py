"""``GET /catalog``, ``GET /buyers/catalog`` and the full catalog file, with ETags.

No key is needed; a key that is presented must be valid (DESIGN 7.9).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from paysign.errors import NotAuthenticated
from paysign.http.credentials import call_store, unauthorized_response
from paysign.services.catalog import Catalog, CatalogSnapshot, RenderedDocument
from paysign.services.keys import bearer_token
from paysign.services.signing import SigningDeps, authenticate

CACHE_CONTROL = "public, max-age=30"


def _document_response(request: Request, document: RenderedDocument) -> Response:
    headers = {"ETag": document.etag, "Cache-Control": CACHE_CONTROL, "Vary": "Authorization"}
    candidates = request.headers.get("if-none-match", "")
    if document.etag in {tag.strip() for tag in candidates.split(",")} or candidates == "*":
        return Response(status_code=304, headers=headers)
    return Response(document.body, media_type="application/json", headers=headers)


def make_catalog_endpoints(catalog: Catalog, deps: SigningDeps) -> tuple[Any, Any]:
    async def credential_ok(request: Request) -> bool:
        header = request.headers.get("authorization")
        if header is None:
            return True
        try:
            await call_store(deps, authenticate, deps, bearer_token(header))
        except NotAuthenticated:
            return False
        return True

    async def snapshot() -> CatalogSnapshot:
        # Each GET checks the stored version (an import elsewhere is served at once); over
        # PostgreSQL that query waits on a thread, so a stalled database host holds this
        # request only, not the event loop. In-process SQLite answers in microseconds.
        if deps.store.inline:
            return catalog.current()
        return await run_in_threadpool(catalog.current)

    async def public(request: Request) -> Response:
        if not await credential_ok(request):
            return unauthorized_response()
        return _document_response(request, (await snapshot()).public)

    async def full(request: Request) -> Response:
        if not await credential_ok(request):
            return unauthorized_response()
        return _document_response(request, (await snapshot()).full)

    return public, full
