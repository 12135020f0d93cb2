"""The OAuth authorization server at ``{auth_url}`` for the MCP connector: ``service`` (use
cases), ``registration`` (clients and their limits), ``redirects`` (which redirect URIs are
allowed), ``provider`` (the mcp SDK adapter), ``pages`` (sign-in, consent), ``routes`` (the
HTTP surface), ``connector`` (access tokens at the connector)."""
