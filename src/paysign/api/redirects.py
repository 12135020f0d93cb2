"""The trailing-slash redirect (``/portal`` → ``/portal/``), with a relative ``Location``.

Starlette's own (``redirect_slashes``) builds an absolute URL from the request's ``Host``
header, which the client chooses: ``Host: evil.example`` came back as
``Location: http://evil.example/portal/``, a redirect an attacker could plant in a shared
cache or a link. A path alone needs no host and always leads back to the origin the client
actually reached, whatever proxy or address that was.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Match
from starlette.types import Receive, Scope, Send


def redirect_slashes_relatively(app: Starlette) -> None:
    """Replace ``app``'s slash redirect with one whose ``Location`` is a path; anything else
    still gets the router's own 404."""
    router = app.router
    not_found = router.default
    router.redirect_slashes = False

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        location = _other_spelling(app, scope) if scope["type"] == "http" else None
        if location is None:
            await not_found(scope, receive, send)
            return
        await RedirectResponse(location)(scope, receive, send)

    router.default = default


def _other_spelling(app: Starlette, scope: Scope) -> str | None:
    """The path with its trailing slash added or removed, when a route answers that one."""
    path: str = scope["path"]
    if path == "/" or path == scope.get("root_path", ""):
        return None
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    # A Location of //host or /\host is read by browsers as another host.
    if other[:1] != "/" or other[1:2] in ("/", "\\"):
        return None
    moved = {**scope, "path": other}
    if not any(route.matches(moved)[0] is not Match.NONE for route in app.router.routes):
        return None
    location = other.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{location}?{query}" if query else location
