"""The wiring of the ASGI application: the signing store and the signer process built, every
entry point (the agent's API, the connector, its sign-in, the portal) mounted on one app."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response

from paysign.api.catalog import make_catalog_endpoints
from paysign.api.direct import DirectRoutingApp
from paysign.api.faucet import make_faucet_endpoint
from paysign.api.metrics import make_metrics_endpoint
from paysign.api.middleware import RequestLogMiddleware
from paysign.api.openapi import openapi_document
from paysign.api.pages import healthz, json_response, make_problem_page, make_readyz
from paysign.api.redirects import redirect_slashes_relatively
from paysign.api.signatures import SignatureEndpoint
from paysign.api.wallet_status import make_wallet_status_endpoint
from paysign.bootstrap import Runtime
from paysign.catalog.tiers import TierLookup
from paysign.connector import Connector, metadata_paths, protected_resource_metadata
from paysign.connector.auth import ApiKeyResolver, ChainedResolver
from paysign.custody.signer_process import SignerProcess
from paysign.http.cors import open_to_browsers
from paysign.http.problems import internal_error_response, problem_response
from paysign.oauth.connector import OAuthResolver
from paysign.oauth.routes import create_oauth_routes
from paysign.portal import create_portal
from paysign.protocol import WalletSigner
from paysign.services.budget import Budget
from paysign.services.catalog import Catalog
from paysign.services.oauth_clients import Registrations
from paysign.services.oauth_grants import AuthorizationService, OAuthConfig
from paysign.services.readiness import database_probe
from paysign.services.signing import SigningDeps
from paysign.store.signing_store import signing_store_for


def create_app(runtime: Runtime, *, tiers: TierLookup | None = None) -> Starlette:
    settings = runtime.settings
    problem_base = settings.resolved_problem_base
    catalog = Catalog(runtime.db, settings)
    store = signing_store_for(runtime.db, connections=settings.signing_connections)
    signer = SignerProcess() if settings.signer_process else None
    if signer is not None:
        runtime.db.on_dispose(signer.close)
    deps = SigningDeps(
        store,
        runtime.vault,
        runtime.clock,
        runtime.registry,
        tiers or catalog,
        wallet_signer=signer.wallet_signer if signer is not None else WalletSigner,
        listings=catalog,
    )
    public_catalog, full_catalog = make_catalog_endpoints(catalog, deps)
    sign = SignatureEndpoint(deps, problem_base, settings.max_body_bytes, completion=signer)
    openapi = openapi_document(settings, runtime.registry)

    async def openapi_json(request: Request) -> Response:
        return json_response(openapi)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return problem_response(
                problem_base,
                "method-not-allowed",
                f"{request.method} is not allowed on {request.url.path}",
                headers=dict(exc.headers or {}),
            )
        if exc.status_code == 400:  # a form Starlette could not parse (multipart, a field too big)
            return problem_response(problem_base, "malformed-request", str(exc.detail)[:200])
        return problem_response(problem_base, "not-found", f"nothing at {request.url.path}")

    async def internal_error(request: Request, exc: Exception) -> Response:
        # Logged, with the request id, by the request log middleware the error reaches next.
        return internal_error_response(problem_base, exc)

    # The connector (MCP at the path of {mcp_url}) accepts API keys, then the access tokens of
    # the authorization server at {auth_url}; its RFC 9728 metadata names that server.
    oauth_config = OAuthConfig.from_settings(settings)
    oauth_service = AuthorizationService(runtime.db, runtime.vault, runtime.clock, oauth_config)
    oauth_routes = create_oauth_routes(oauth_service, Registrations(runtime.db, runtime.clock))
    resolver = ChainedResolver(ApiKeyResolver(deps), OAuthResolver(oauth_service))
    budget = Budget(runtime.db, runtime.clock, runtime.sandbox_chain)
    connector = Connector(settings, deps, catalog, resolver=resolver, budget=budget)
    resource_metadata = protected_resource_metadata(
        settings.resolved_mcp_url, settings.resolved_auth_url
    )

    async def protected_resource(request: Request) -> Response:
        return json_response(resource_metadata)

    # Browser-based MCP clients call these from their own origin (http/cors.py).
    get = ["GET", "OPTIONS"]
    connector_routes = [
        Route(
            urlsplit(settings.resolved_mcp_url).path or "/",
            open_to_browsers(connector, ["GET", "POST", "DELETE", "OPTIONS"]),
        ),
        *(
            Route(path, open_to_browsers(request_response(protected_resource), get), methods=get)
            for path in metadata_paths(settings.resolved_mcp_url)
        ),
    ]

    routes = [
        *connector_routes,
        *oauth_routes,
        *create_portal(runtime, catalog),
        Route("/wallets/signatures", sign, methods=["POST"]),
        Route(
            "/wallets/testnet/funds",
            make_faucet_endpoint(runtime, deps, problem_base),
            methods=["POST"],
        ),
        Route(
            "/wallets/status",
            make_wallet_status_endpoint(budget, deps, problem_base),
            methods=["GET"],
        ),
        Route("/catalog", public_catalog, methods=["GET"]),
        Route("/buyers/catalog", public_catalog, methods=["GET"]),
        Route(urlsplit(settings.resolved_catalog_file_url).path, full_catalog, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", make_readyz(database_probe(runtime.db)), methods=["GET"]),
        Route(
            "/metrics", make_metrics_endpoint(settings.metrics_token, problem_base), methods=["GET"]
        ),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route(
            "/problems/{slug}",
            make_problem_page(problem_base, f"{settings.resolved_base_url}/portal"),
            methods=["GET"],
        ),
    ]
    handlers: dict[Any, Any] = {HTTPException: http_error, Exception: internal_error}
    app = DirectRoutingApp(routes=routes, exception_handlers=handlers)
    redirect_slashes_relatively(app)  # never a Location built from the client's Host header
    # The agent's hot path skips the router (the Route above still answers 405 to other
    # methods); the middleware added below wraps it as it wraps the router.
    app.add_direct_route("POST", "/wallets/signatures", sign)
    app.state.catalog = catalog
    app.state.connector = connector
    app.state.signer_process = signer
    app.add_middleware(RequestLogMiddleware, problem_base=problem_base)
    return app
