"""The MCP connector at ``{mcp_url}`` (spec 1, 4.4, 5.2): catalog tools, ``pay_x402``,
``search_bazaar``, API-key auth with the OAuth challenge. See ``docs/connector.md``."""

from paysign.connector.auth import (
    ApiKeyResolver,
    ChainedResolver,
    CredentialResolver,
    metadata_paths,
    protected_resource_metadata,
)
from paysign.connector.server import Connector
from paysign.http.credentials import Principal

__all__ = [
    "ApiKeyResolver",
    "ChainedResolver",
    "Connector",
    "CredentialResolver",
    "Principal",
    "metadata_paths",
    "protected_resource_metadata",
]
