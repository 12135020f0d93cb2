"""The API against its own OpenAPI document (``/openapi.json``), over real HTTP, on SQLite
and PostgreSQL, with the account's API key and without one.

schemathesis generates requests from the document, valid ones and deliberately invalid ones,
and checks each answer: never a 5xx, a status, content type, headers and body the document
names, every valid request accepted and every invalid one refused. The examples are drawn the
same way on every run, so a failure here is reproducible. At the end, the bugs such runs
found, each as a plain test.

No stateful phase: no operation takes anything another one returns (the faucet's grant is not
an input of signing), so there are no links to follow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import (
    TEST_MASTER_KEY,
    FrozenClock,
    LiveServer,
    make_database_url,
    signature_body,
)
from paysign.api.openapi import openapi_document
from paysign.app import create_app
from paysign.bootstrap import Runtime, asset_registry
from paysign.chain.testnet import SandboxChain
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.protocol.eip712 import checksum_address
from paysign.protocol.networks import BASE_MAINNET
from paysign.services import accounts, keys, policy
from paysign.services.catalog import seed_demo_catalog
from paysign.store.database import Database
from paysign.store.migrate import migrate
from paysign.store.schema import pending_sellers, refusals, signatures

MAX_EXAMPLES = 100

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    ignored_auth,
]

#: The document every test runtime serves: the default settings' (checked in ``api``).
DOCUMENT = openapi_document(Settings(), asset_registry(Settings()))

schema = schemathesis.openapi.from_dict(
    DOCUMENT,
    config=schemathesis.Config.from_dict(
        {
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
            "phases": {"stateful": {"enabled": False}},
        }
    ),
)


#: Past this a float may not spell its integer exactly.
_EXACT_FLOAT = 2**53


@schema.hook
def map_body(context: Any, body: Any) -> Any:
    """JSON Schema counts ``60.0`` as an integer; paysign takes only ``60`` (the terms are
    echoed to the seller verbatim, and ``60.0`` is not what it sent), which no schema can say.
    The same number is sent the way paysign takes it."""
    if isinstance(body, dict):
        return {key: map_body(context, value) for key, value in body.items()}
    if isinstance(body, list):
        return [map_body(context, value) for value in body]
    if isinstance(body, float) and body.is_integer() and abs(body) <= _EXACT_FLOAT:
        return int(body)
    return body


@schema.hook
def filter_query(context: Any, query: Any) -> bool:
    """A query member whose value is ``None`` or an empty list is never sent: the request that
    goes out is not the invalid one the generator meant, so the case is dropped."""
    if not isinstance(query, dict):
        return True
    return all(value is not None and value != [] for value in query.values())


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    sandbox_chain: SandboxChain,
) -> Iterator[tuple[str, str]]:
    """The service over HTTP, on a fresh database with the demo catalog and one account whose
    approvals are switched off: (base URL, API key). One per database for every operation."""
    tmp_path = tmp_path_factory.mktemp("schemathesis")
    for database_url in make_database_url(request.param, tmp_path):
        settings = Settings(data_dir=tmp_path / "var", database_url=database_url)
        db = Database(database_url)
        migrate(db)
        clock = FrozenClock()
        runtime = Runtime(
            settings,
            db,
            EnvelopeVault(TEST_MASTER_KEY),
            clock,
            asset_registry(settings),
            sandbox_chain=sandbox_chain,
        )
        seed_demo_catalog(db, clock, "http://sellers.example")
        email = "agent@example.com"
        accounts.create_account(db, runtime.vault, clock, email=email, password="correct horse")
        api_key = keys.issue_key(db, clock, email=email, expires_in_days=30).api_key
        # Without approvals every seller URL the generator makes can be paid, so valid requests
        # reach the signature and its caps instead of stopping at a pending approval.
        document = policy.get_policy(db, email=email)
        document["approval"] = "none"
        policy.set_policy(db, clock, email=email, document=document)
        try:
            with LiveServer(create_app(runtime)) as server:
                assert httpx.get(f"{server.url}/openapi.json").json() == DOCUMENT
                yield server.url, api_key
        finally:
            db.dispose()


@pytest.fixture(scope="module", params=["with-key", "without-key"])
def credential(request: pytest.FixtureRequest, served: tuple[str, str]) -> dict[str, str]:
    """The headers that authorise a request: the account's API key, or none at all."""
    return {"Authorization": f"Bearer {served[1]}"} if request.param == "with-key" else {}


@schema.parametrize()
def test_the_api_answers_as_its_openapi_document_says(
    case: Any, served: tuple[str, str], credential: dict[str, str]
) -> None:
    if case.meta is not None and case.meta.generation.mode.is_positive:
        _without_cross_field_refusals(case)
    case.call_and_validate(base_url=served[0], headers=credential, checks=CHECKS)


def _without_cross_field_refusals(case: Any) -> None:
    """A valid request the server still refuses for how two of its parts go together, which
    OpenAPI cannot say (the descriptions do), is made one it takes: ``X-Sandbox-Mode: true``
    with mainnet terms (``sandbox-network-mismatch``) is sent as a live payment, the
    resource the terms name is put on the seller's host (``seller-resource-mismatch``), and a
    mixed-case ``payTo`` is given its EIP-55 checksum (a wrong one is a mistyped address)."""
    if not isinstance(case.body, dict):
        return
    seller_url = case.body["sellerUrl"]
    terms = case.body["paymentRequired"]
    accepted = terms["accepts"][0]
    headers = case.headers or {}
    sandbox = next((k for k in headers if k.lower() == "x-sandbox-mode"), None)
    live = accepted["network"] in (BASE_MAINNET.caip2, BASE_MAINNET.v1_name)
    if sandbox is not None and headers[sandbox].lower() == "true" and live:
        del headers[sandbox]
    resource = terms.get("resource")
    if isinstance(resource, dict) and isinstance(resource.get("url"), str):
        resource["url"] = seller_url
    elif isinstance(resource, str) and resource:
        terms["resource"] = seller_url
    if isinstance(accepted.get("resource"), str) and accepted["resource"]:
        accepted["resource"] = seller_url
    digits = accepted["payTo"][2:]
    if digits not in (digits.lower(), digits.upper()):
        accepted["payTo"] = checksum_address(bytes.fromhex(digits))


# --- what runs with more examples found ----------------------------------------------------


@pytest.mark.parametrize(
    "seller_url",
    [
        # Each '"' is recorded as %22: 2,024 characters make a 6,000-character path.
        "https://api.example.com/" + '"' * 2000,
        "https://api.example.com/" + "é" * 1000,
        # 253 characters of host name, then a port: longer than a recorded host.
        "https://" + ".".join(["a" * 63] * 3) + "." + "b" * 61 + ":65000/x",
    ],
)
def test_a_seller_address_too_long_to_record_is_refused_and_nothing_is_written(
    http: httpx.Client, account: dict[str, str], runtime: Runtime, seller_url: str
) -> None:
    body = signature_body(seller_url=seller_url)
    response = http.post(
        "/wallets/signatures",
        json=body,
        headers={"Authorization": f"Bearer {account['api_key']}"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith("/invalid-payment-terms")
    assert problem["pointer"] == "/sellerUrl"
    assert "longer than" in problem["detail"]
    with runtime.db.read() as conn:
        for table in (signatures, pending_sellers, refusals):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_a_long_seller_path_that_fits_once_encoded_is_signed(
    http: httpx.Client, account: dict[str, str]
) -> None:
    seller_url = "https://api.example.com/" + "a" * 2000
    response = http.post(
        "/wallets/signatures",
        json=signature_body(seller_url=seller_url),
        headers={"Authorization": f"Bearer {account['api_key']}"},
    )
    assert response.status_code == 200, response.text
