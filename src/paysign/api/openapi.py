"""The OpenAPI 3.1 description of the public API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from paysign.api.problems import PROBLEM_TYPES


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        },
    }


def openapi_document(base_url: str, problem_base: str) -> dict[str, Any]:
    accepts_entry = {
        "type": "object",
        "required": ["scheme", "network", "asset", "payTo", "maxTimeoutSeconds", "extra"],
        "properties": {
            "scheme": {"type": "string", "enum": ["exact"]},
            "network": {
                "type": "string",
                "enum": ["eip155:8453", "eip155:84532", "base", "base-sepolia"],
            },
            "amount": {"type": "string", "pattern": "^[0-9]+$", "description": "USDC base units"},
            "maxAmountRequired": {"type": "string", "description": "x402 v1 name of amount"},
            "asset": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"},
            "payTo": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"},
            "maxTimeoutSeconds": {"type": "integer", "minimum": 1},
            "extra": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "paysign",
            "version": "1",
            "description": "Custodial x402 payment signing (USDC on Base) for AI agents. "
            f"Problem types are documented at {problem_base}/<slug>.",
        },
        "servers": [{"url": base_url}],
        "components": {
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Problem": {
                    "type": "object",
                    "required": ["type", "title", "status", "detail"],
                    "properties": {
                        "type": {"type": "string", "format": "uri"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"},
                        "pointer": {"type": "string", "description": "JSON pointer to the field"},
                    },
                },
                "SignatureRequest": {
                    "type": "object",
                    "required": ["sellerUrl", "paymentRequired"],
                    "properties": {
                        "sellerUrl": {"type": "string", "format": "uri"},
                        "paymentRequired": {
                            "type": "object",
                            "required": ["x402Version", "accepts"],
                            "properties": {
                                "x402Version": {"type": "integer", "enum": [1, 2]},
                                "resource": {"type": "object"},
                                "accepts": {"type": "array", "minItems": 1, "items": accepts_entry},
                                "extensions": {"type": "object"},
                            },
                        },
                    },
                },
                "SignatureResult": {
                    "type": "object",
                    "required": ["paymentSignatureHeader", "validAfter", "validBefore", "nonce"],
                    "properties": {
                        "paymentSignatureHeader": {"type": "string"},
                        "validAfter": {"type": "integer", "const": 0},
                        "validBefore": {"type": "integer"},
                        "nonce": {"type": "string", "pattern": "^0x[0-9a-f]{64}$"},
                    },
                },
            },
        },
        "paths": {
            "/wallets/signatures": {
                "post": {
                    "summary": "Sign an x402 payment from the caller's wallet",
                    "security": [{"apiKey": []}],
                    "parameters": [
                        {
                            "name": "X-Sandbox-Mode",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string", "enum": ["true"]},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/SignatureRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "Signed",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/SignatureResult"}
                                }
                            },
                        },
                        "401": {"description": 'Unauthorized: {"message":"Unauthorized"}'},
                        **{
                            str(p.status): _problem(p.title)
                            for p in PROBLEM_TYPES.values()
                            if p.status not in (404, 405, 500)
                        },
                    },
                }
            },
            "/healthz": {
                "get": {"summary": "Liveness", "responses": {"200": {"description": "ok"}}}
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness (database)",
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
    }
