"""What the Connect page shows about the signed-in account: its active API key (prefix and
expiry, never the key) and how many assistants are connected with OAuth."""

from __future__ import annotations

from dataclasses import dataclass

from paysign.services.portal_deps import PortalDeps
from paysign.services.portal_overview import active_key
from paysign.store import oauth_repo, portal_repo
from paysign.store.portal_repo import KeyRow


@dataclass(frozen=True, slots=True)
class Connection:
    #: The key an assistant would use, if one is active now.
    key: KeyRow | None
    #: Assistants holding a live OAuth grant for this account.
    assistants: int


def connection(deps: PortalDeps, account_id: str) -> Connection:
    now = deps.clock.now()
    with deps.db.read() as conn:
        keys = portal_repo.keys_of(conn, account_id)
        assistants = oauth_repo.connected_assistants(conn, account_id, now)
    return Connection(active_key(keys, now), assistants)
