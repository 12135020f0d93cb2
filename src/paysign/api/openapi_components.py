"""The reusable parts of the OpenAPI document (``components``): the API key scheme, the
headers answers carry, and the schemas the operations in ``openapi.py`` refer to by ``$ref``."""

from __future__ import annotations

from typing import Any

from paysign.api import openapi_schemas as schemas
from paysign.protocol.networks import AssetRegistry

Schema = dict[str, Any]


def components(registry: AssetRegistry) -> Schema:
    """The security scheme, the response headers and the schemas operations refer to."""

    def header(description: str, schema: Schema) -> Schema:
        return {"description": description, "required": True, "schema": schema}

    return {
        "securitySchemes": {
            "apiKey": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key (`psk_…`) created in the portal",
            }
        },
        "headers": {
            "X-Request-Id": header(
                "Names the request in paysign's log",
                {"type": "string", "pattern": "^[0-9a-f]{16}$"},
            ),
            "WWW-Authenticate": header(
                "The credential scheme", {"type": "string", "const": "Bearer"}
            ),
            "Retry-After": header(
                "Seconds to wait before sending the request again",
                {"type": "integer", "minimum": 1},
            ),
            "ETag": header(
                "Changes whenever the document does", {"type": "string", "pattern": '^"[0-9a-f]+"$'}
            ),
            "Cache-Control": header("", {"type": "string", "const": "public, max-age=30"}),
            "Vary": header("", {"type": "string", "const": "Authorization"}),
        },
        "schemas": {
            "Problem": schemas.PROBLEM,
            "Unauthorized": schemas.UNAUTHORIZED,
            "Status": schemas.STATUS,
            "SignatureRequest": schemas.signature_request_schema(registry),
            "SignatureResult": schemas.SIGNATURE_RESULT,
            "TestFundsResult": schemas.TEST_FUNDS_RESULT,
            "Catalog": schemas.catalog_document_schema(["PREMIUM", "STANDARD"]),
            "FullCatalog": schemas.catalog_document_schema(
                ["PREMIUM", "STANDARD", "OPEN_ECOSYSTEM"]
            ),
        },
    }
