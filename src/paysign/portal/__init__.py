"""The web portal: where the account holder signs in, holds the API key, approves sellers and
sets the policy. Server-rendered HTML forms; reachable only with a browser session, never with
an API key."""

from paysign.portal.routes import create_portal

__all__ = ["create_portal"]
