"""The signed-in account's API key: issued after a fresh authenticator code, revoked without
one (revoking only takes power away)."""

from __future__ import annotations

from paysign.errors import InvalidKeyExpiry
from paysign.services import keys
from paysign.services.accounts import email_of
from paysign.services.portal_deps import PortalDeps


def create_key(deps: PortalDeps, account_id: str, code: str, days: int) -> keys.IssuedKey:
    """Step-up first (a fresh authenticator code), then the key. Raises
    ``CredentialsRefused``, ``InvalidKeyExpiry`` or ``ActiveKeyExists``."""
    email = email_of(deps.db, account_id)
    if isinstance(days, bool) or not 1 <= days <= keys.MAX_EXPIRY_DAYS:
        # Checked before the code is spent.
        raise InvalidKeyExpiry(f"expiry must be 1 to {keys.MAX_EXPIRY_DAYS} days; {days} was asked")
    deps.credentials.fresh_code(account_id, code)
    return keys.issue_key(deps.db, deps.clock, email=email, expires_in_days=days)


def revoke_key(deps: PortalDeps, account_id: str) -> None:
    keys.revoke_key(deps.db, deps.clock, email=email_of(deps.db, account_id))
