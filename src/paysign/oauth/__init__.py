"""The OAuth authorization server at ``{auth_url}`` for the MCP connector, over the use cases in
``paysign.services.oauth_grants`` and ``oauth_clients``: ``provider`` (the mcp SDK adapter),
``pages`` (sign-in, consent), ``routes`` (the HTTP surface), ``connector`` (access tokens at
the connector)."""
