"""The OAuth authorization server at ``{auth_url}`` for the MCP connector (issue 6 item 4):
``service`` (use cases), ``provider`` (the mcp SDK adapter), ``pages`` (sign-in, consent),
``routes`` (the HTTP surface), ``connector`` (access tokens at the connector)."""
