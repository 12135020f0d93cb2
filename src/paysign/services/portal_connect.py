"""What the Connect page shows about the signed-in account: its active API key (prefix and
expiry, never the key) and the assistants connected with OAuth, each of which the holder can
disconnect (``account_security.disconnect_assistants``)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from paysign.services.portal_deps import PortalDeps
from paysign.services.portal_overview import active_key
from paysign.store import assistant_grants_repo, portal_repo
from paysign.store.portal_repo import KeyRow

#: A client names itself at registration, which is open to anyone: its name is shown as text,
#: cut to a length that cannot crowd the page.
MAX_NAME_LENGTH = 80


@dataclass(frozen=True, slots=True)
class ConnectedAssistant:
    client_id: str
    #: The name the client registered with (``client_name``), else its id.
    name: str
    #: How many sign-ins of this account it holds, and when the last one ends unless refreshed.
    grants: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class Connection:
    #: The key an assistant would use, if one is active now.
    key: KeyRow | None
    #: Assistants holding a live OAuth grant for this account.
    assistants: list[ConnectedAssistant]


def _name(client: assistant_grants_repo.ConnectedClient) -> str:
    try:
        metadata = orjson.loads(client.metadata)
    except orjson.JSONDecodeError:
        metadata = None
    name = metadata.get("client_name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name.strip():
        return client.client_id
    name = " ".join(name.split())
    return name if len(name) <= MAX_NAME_LENGTH else name[: MAX_NAME_LENGTH - 1] + "…"


def connection(deps: PortalDeps, account_id: str) -> Connection:
    now = deps.clock.now()
    with deps.db.read() as conn:
        keys = portal_repo.keys_of(conn, account_id)
        clients = assistant_grants_repo.connected_clients(conn, account_id, now)
    assistants = [
        ConnectedAssistant(c.client_id, _name(c), c.grants, c.expires_at) for c in clients
    ]
    return Connection(active_key(keys, now), assistants)
