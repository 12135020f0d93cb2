"""``POST /wallets/signatures`` over real HTTP on 127.0.0.1, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import json

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from conftest import PAY_TO, signature_body
from paysign.bootstrap import Runtime
from paysign.store import repositories as repo
from paysign.store.schema import api_keys, signatures

AUTH = "Authorization"


def post(http: httpx.Client, key: str | None, body: object, **headers: str) -> httpx.Response:
    if key is not None:
        headers[AUTH] = f"Bearer {key}"
    return http.post("/wallets/signatures", json=body, headers=headers)


def decode(header: str) -> dict:
    return json.loads(base64.b64decode(header, validate=True))


def recover(payload: dict, chain_id: int, asset: str, name: str) -> str:
    auth = payload["payload"]["authorization"]
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "TransferWithAuthorization": [
                {"name": "from", "type": "address"},
                {"name": "to", "type": "address"},
                {"name": "value", "type": "uint256"},
                {"name": "validAfter", "type": "uint256"},
                {"name": "validBefore", "type": "uint256"},
                {"name": "nonce", "type": "bytes32"},
            ],
        },
        "primaryType": "TransferWithAuthorization",
        "domain": {"name": name, "version": "2", "chainId": chain_id, "verifyingContract": asset},
        "message": {
            "from": auth["from"],
            "to": auth["to"],
            "value": int(auth["value"]),
            "validAfter": int(auth["validAfter"]),
            "validBefore": int(auth["validBefore"]),
            "nonce": bytes.fromhex(auth["nonce"][2:]),
        },
    }
    return Account.recover_message(
        encode_typed_data(full_message=typed), signature=payload["payload"]["signature"]
    )


def test_signs_v2_terms_and_records_the_signature(http, account, runtime: Runtime, clock) -> None:
    body = signature_body(network="eip155:84532", amount="12345", max_timeout=300)
    response = post(http, account["api_key"], body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert set(result) == {"paymentSignatureHeader", "validAfter", "validBefore", "nonce"}
    assert result["validAfter"] == 0
    assert result["validBefore"] == clock.now() + 120  # min(120, 300)
    payload = decode(result["paymentSignatureHeader"])
    assert list(payload) == ["x402Version", "payload", "accepted", "resource"]  # the SDK's order
    assert payload["accepted"] == body["paymentRequired"]["accepts"][0]
    assert payload["resource"] == body["paymentRequired"]["resource"]
    auth = payload["payload"]["authorization"]
    assert auth == {
        "from": account["wallet"],
        "to": PAY_TO,
        "value": "12345",
        "validAfter": "0",
        "validBefore": str(result["validBefore"]),
        "nonce": result["nonce"],
    }
    asset = body["paymentRequired"]["accepts"][0]["asset"]
    assert recover(payload, 84532, asset, "USDC") == account["wallet"]

    with runtime.db.read() as conn:
        rows = repo.signatures_of(conn, account["account_id"])
    assert len(rows) == 1
    row = rows[0]
    assert (row.seller_host, row.seller_path) == ("api.example.com", "/weather")
    assert (row.network, row.amount, row.sandbox, row.x402_version) == (
        "eip155:84532",
        12345,
        False,
        2,
    )
    assert "0x" + row.nonce.hex() == result["nonce"]
    assert row.valid_before == result["validBefore"]
    assert row.pay_to.lower() == PAY_TO.lower()


def test_signs_v1_terms_with_the_sellers_network_spelling(http, account) -> None:
    body = signature_body(network="base", version=1, amount="500")
    response = post(http, account["api_key"], body)
    assert response.status_code == 200, response.text
    payload = decode(response.json()["paymentSignatureHeader"])
    assert list(payload) == ["x402Version", "scheme", "network", "payload"]
    assert (payload["x402Version"], payload["scheme"], payload["network"]) == (1, "exact", "base")
    asset = body["paymentRequired"]["accepts"][0]["asset"]
    assert recover(payload, 8453, asset, "USD Coin") == account["wallet"]


def test_short_seller_timeout_bounds_valid_before(http, account, clock) -> None:
    response = post(http, account["api_key"], signature_body(max_timeout=30))
    assert response.json()["validBefore"] == clock.now() + 30


def test_every_request_gets_a_new_nonce(http, account, runtime) -> None:
    body = signature_body()
    nonces = {post(http, account["api_key"], body).json()["nonce"] for _ in range(5)}
    assert len(nonces) == 5
    with runtime.db.read() as conn:
        assert len(repo.signatures_of(conn, account["account_id"])) == 5


def test_sandbox_header_on_testnet_is_recorded_as_sandbox(http, account, runtime) -> None:
    response = post(http, account["api_key"], signature_body(), **{"X-Sandbox-Mode": "true"})
    assert response.status_code == 200
    with runtime.db.read() as conn:
        assert repo.signatures_of(conn, account["account_id"])[0].sandbox is True


def test_sandbox_header_with_mainnet_terms_is_refused(http, account, runtime) -> None:
    response = post(
        http,
        account["api_key"],
        signature_body(network="eip155:8453"),
        **{"X-Sandbox-Mode": "true"},
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("/sandbox-network-mismatch")
    with runtime.db.read() as conn:
        assert repo.signatures_of(conn, account["account_id"]) == []


def test_the_same_body_is_checked_against_each_requests_own_sandbox_header(
    http, account, runtime
) -> None:
    body = signature_body(network="eip155:8453")
    sandbox = {"X-Sandbox-Mode": "true"}
    assert post(http, account["api_key"], body).status_code == 200  # its bytes are kept now
    assert post(http, account["api_key"], body, **sandbox).status_code == 422
    testnet = signature_body()
    assert post(http, account["api_key"], testnet, **sandbox).status_code == 200
    assert post(http, account["api_key"], testnet).status_code == 200
    with runtime.db.read() as conn:
        rows = repo.signatures_of(conn, account["account_id"])
    assert sorted((r.network, r.sandbox) for r in rows) == [
        ("eip155:8453", False),
        ("eip155:84532", False),
        ("eip155:84532", True),
    ]


def test_key_use_is_recorded(http, account, runtime, clock) -> None:
    post(http, account["api_key"], signature_body())
    with runtime.db.read() as conn:
        assert conn.execute(api_keys.select()).one().last_used_at == clock.now()


# --- 401: one answer for every credential failure -------------------------------------------


@pytest.mark.parametrize(
    "case", ["missing", "not-bearer", "malformed", "unknown", "expired", "revoked"]
)
def test_every_credential_failure_gets_the_identical_401(
    http, account, runtime, clock, case
) -> None:
    from paysign.services import keys

    headers: dict[str, str] = {}
    if case == "not-bearer":
        headers[AUTH] = f"Basic {account['api_key']}"
    elif case == "malformed":
        headers[AUTH] = "Bearer not-a-key"
    elif case == "unknown":
        headers[AUTH] = f"Bearer {keys.new_api_key()}"
    elif case == "expired":
        clock.advance(31 * 86_400)
        headers[AUTH] = f"Bearer {account['api_key']}"
    elif case == "revoked":
        keys.revoke_key(runtime.db, clock, email=account["email"])
        headers[AUTH] = f"Bearer {account['api_key']}"
    response = http.post("/wallets/signatures", json=signature_body(), headers=headers)
    assert response.status_code == 401
    assert response.content == b'{"message":"Unauthorized"}'
    assert response.headers["content-type"] == "application/json"
    with runtime.db.read() as conn:
        assert conn.execute(signatures.select()).first() is None


def test_unauthenticated_bad_body_is_still_401(http) -> None:
    response = http.post(
        "/wallets/signatures", content=b"{not json", headers={AUTH: "Bearer psk_" + "x" * 43}
    )
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthorized"}


# --- 4xx problems: each names the field and changes nothing ---------------------------------


def _mutate(path: list[object], value: object):
    def apply(body: dict) -> dict:
        body = copy.deepcopy(body)
        target = body
        for key in path[:-1]:
            target = target[key]  # type: ignore[index]
        if value is _DELETE:
            del target[path[-1]]  # type: ignore[arg-type]
        else:
            target[path[-1]] = value  # type: ignore[index]
        return body

    return apply


_DELETE = object()
A0 = ["paymentRequired", "accepts", 0]


@pytest.mark.parametrize(
    ("mutation", "status", "slug", "pointer"),
    [
        (_mutate(["sellerUrl"], _DELETE), 400, "malformed-request", "/sellerUrl"),
        (_mutate(["sellerUrl"], "ftp://x.example/y"), 422, "invalid-payment-terms", "/sellerUrl"),
        (
            _mutate(["paymentRequired", "accepts"], []),
            400,
            "malformed-request",
            "/paymentRequired/accepts",
        ),
        (
            _mutate(["paymentRequired", "x402Version"], 3),
            422,
            "invalid-payment-terms",
            "/paymentRequired/x402Version",
        ),
        (
            _mutate([*A0, "scheme"], "upto"),
            422,
            "unsupported-payment-terms",
            "/paymentRequired/accepts/0/scheme",
        ),
        (
            _mutate([*A0, "network"], "eip155:1"),
            422,
            "unsupported-payment-terms",
            "/paymentRequired/accepts/0/network",
        ),
        (
            _mutate([*A0, "asset"], "0x" + "11" * 20),
            422,
            "unsupported-payment-terms",
            "/paymentRequired/accepts/0/asset",
        ),
        (
            _mutate([*A0, "amount"], "0"),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/amount",
        ),
        (
            _mutate([*A0, "amount"], "-5"),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/amount",
        ),
        (
            _mutate([*A0, "amount"], "1.5"),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/amount",
        ),
        (
            _mutate([*A0, "payTo"], "0x1234"),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/payTo",
        ),
        (
            _mutate([*A0, "maxTimeoutSeconds"], 0),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/maxTimeoutSeconds",
        ),
        (
            _mutate([*A0, "maxTimeoutSeconds"], "60"),
            400,
            "malformed-request",
            "/paymentRequired/accepts/0/maxTimeoutSeconds",
        ),
        (
            _mutate([*A0, "extra"], {"name": "USDC"}),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/extra/version",
        ),
        (
            _mutate([*A0, "extra"], {"name": "USD Coin", "version": "2"}),
            422,
            "invalid-payment-terms",
            "/paymentRequired/accepts/0/extra/name",
        ),
    ],
)
def test_invalid_terms_get_a_problem_naming_the_field(
    http, account, runtime, mutation, status, slug, pointer
) -> None:
    response = post(http, account["api_key"], mutation(signature_body()))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == f"{runtime.settings.resolved_problem_base}/{slug}"
    assert problem["status"] == status
    assert problem["pointer"] == pointer
    assert problem["title"] and pointer in problem["detail"]
    with runtime.db.read() as conn:
        assert conn.execute(signatures.select()).first() is None


def test_body_that_is_not_json(http, account) -> None:
    response = http.post(
        "/wallets/signatures",
        content=b"{nope",
        headers={AUTH: f"Bearer {account['api_key']}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["type"].endswith("/malformed-request")


def test_wrong_content_type(http, account) -> None:
    response = http.post(
        "/wallets/signatures",
        content=json.dumps(signature_body()).encode(),
        headers={AUTH: f"Bearer {account['api_key']}", "Content-Type": "text/plain"},
    )
    assert response.status_code == 415


def test_oversized_body(http, account) -> None:
    body = signature_body()
    body["paymentRequired"]["resource"]["description"] = "x" * 70_000  # type: ignore[index]
    response = post(http, account["api_key"], body)
    assert response.status_code == 413
    assert response.json()["type"].endswith("/request-too-large")


def test_bad_sandbox_header_value(http, account) -> None:
    response = post(http, account["api_key"], signature_body(), **{"X-Sandbox-Mode": "yes"})
    assert response.status_code == 400


def test_unknown_path_and_method_are_problems(http) -> None:
    assert http.get("/nope").json()["type"].endswith("/not-found")
    response = http.get("/wallets/signatures")
    assert response.status_code == 405
    assert response.json()["type"].endswith("/method-not-allowed")


def test_problem_types_are_documented_pages(http, account) -> None:
    body = _mutate([*A0, "network"], "eip155:1")(signature_body())
    problem = post(http, account["api_key"], body).json()
    slug = problem["type"].rsplit("/", 1)[1]
    page = http.get(f"/problems/{slug}")
    assert page.status_code == 200
    assert "Payment terms not supported" in page.text
    assert "will not help" in page.text


def test_health_ready_and_openapi(http) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ok"}
    spec = http.get("/openapi.json").json()
    assert "/wallets/signatures" in spec["paths"]
    assert http.get("/healthz").headers["x-request-id"]


def test_concurrent_payments_signed_by_the_signer_process_are_the_wallets(
    runtime: Runtime, account
) -> None:
    from conftest import LiveServer
    from paysign.app import create_app

    app = create_app(runtime)
    signer = app.state.signer_process
    assert signer is not None
    body = signature_body(network="eip155:84532", amount="1000")
    asset = body["paymentRequired"]["accepts"][0]["asset"]
    headers = {AUTH: f"Bearer {account['api_key']}"}

    async def burst(client: httpx.AsyncClient, count: int) -> list[httpx.Response]:
        return await asyncio.gather(
            *(client.post("/wallets/signatures", json=body, headers=headers) for _ in range(count))
        )

    async def scenario(url: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=url, timeout=20, limits=limits) as client:
            answered = await burst(client, 8)  # the first batch starts the child
            for _ in range(1_000):
                if signer.ready:
                    break
                await asyncio.sleep(0.02)
            # Requests that arrive together share a batch; a lone one is signed on the loop.
            for _ in range(10):
                answered += await burst(client, 32)
                if signer.signed_by_child:
                    break
            return answered

    with LiveServer(app) as server:
        responses = asyncio.run(scenario(server.url))
    assert signer.started == 1
    assert signer.signed_by_child > 0  # batches were signed by the child ...
    assert [r.status_code for r in responses] == [200] * len(responses)
    payloads = [decode(r.json()["paymentSignatureHeader"]) for r in responses]
    # ... and every header, wherever signed, is the wallet's and for its own nonce.
    assert {recover(p, 84532, asset, "USDC") for p in payloads} == {account["wallet"]}
    assert len({p["payload"]["authorization"]["nonce"] for p in payloads}) == len(payloads)
    with runtime.db.read() as conn:
        assert len(repo.signatures_of(conn, account["account_id"])) == len(payloads)


def test_the_signer_process_can_be_switched_off(runtime: Runtime) -> None:
    from paysign.app import create_app

    settings = runtime.settings.model_copy(update={"signer_process": False})
    off = dataclasses.replace(runtime, settings=settings)
    assert create_app(off).state.signer_process is None


# --- a rule cannot be dodged by spelling; terms are bound to their seller -------------------


def _rules(runtime: Runtime, account: dict[str, str], **lists: list[str]) -> None:
    from paysign.services import policy

    for kind, sellers in lists.items():
        for seller in sellers:
            policy.decide_seller(
                runtime.db, runtime.clock, email=account["email"], seller=seller, kind=kind
            )


def _recorded(runtime: Runtime) -> tuple[int, int, int]:
    from paysign.store.schema import pending_sellers, refusals

    with runtime.db.read() as conn:
        return tuple(  # type: ignore[return-value]
            len(conn.execute(table.select()).all())
            for table in (signatures, refusals, pending_sellers)
        )


def test_a_path_tomcat_reads_as_a_denied_one_is_refused(http, account, runtime) -> None:
    _rules(runtime, account, allow=["api.example.com/v1"], deny=["api.example.com/admin"])
    spellings = [
        "https://api.example.com/v1/..;/admin",
        "https://api.example.com/v1/..;x=1/admin/users",
        "https://api.example.com/v1/%2e%2e%3b/admin",
        "https://api.example.com/admin;jsessionid=1",
    ]
    for count, seller_url in enumerate(spellings, 1):
        response = post(http, account["api_key"], signature_body(seller_url=seller_url))
        assert response.status_code == 403, (seller_url, response.text)
        problem = response.json()
        assert problem["type"].endswith("/seller-denied")
        assert "api.example.com/admin" in problem["detail"]
        assert _recorded(runtime) == (0, count, 0)  # each refusal recorded, nothing signed
    allowed = signature_body(seller_url="https://api.example.com/v1/quote")
    assert post(http, account["api_key"], allowed).status_code == 200


def test_a_denied_path_in_other_letter_case_is_refused(http, account, runtime) -> None:
    """Many servers read /ADMIN as /admin: an agent capitalising a denied path was signed."""
    _rules(runtime, account, allow=["api.example.com"], deny=["api.example.com/admin"])
    spellings = ["https://api.example.com/ADMIN/users", "https://api.example.com/Admin"]
    for count, seller_url in enumerate(spellings, 1):
        response = post(http, account["api_key"], signature_body(seller_url=seller_url))
        assert response.status_code == 403, (seller_url, response.text)
        assert response.json()["type"].endswith("/seller-denied")
        assert _recorded(runtime) == (0, count, 0)
    # An allow rule covers its path in the case written, and no more.
    _rules(runtime, account, allow=["shop.example.com/v1"])
    other_case = signature_body(seller_url="https://shop.example.com/V1/quote")
    assert post(http, account["api_key"], other_case).json()["type"].endswith("/allow-pending")


def test_an_ipv6_spelling_of_a_denied_ipv4_address_is_refused(http, account, runtime) -> None:
    _rules(runtime, account, deny=["10.0.0.1"])
    for url in ("https://[::ffff:a00:1]/x", "https://[::10.0.0.1]:8443/x"):
        response = post(http, account["api_key"], signature_body(seller_url=url))
        assert response.status_code == 403, response.text
        assert response.json()["type"].endswith("/seller-denied")
    with runtime.db.read() as conn:
        assert conn.execute(signatures.select()).first() is None


def test_a_seller_url_no_seller_has_is_refused_naming_the_part(http, account, runtime) -> None:
    cases = [
        ("https://api.example.com/admin%00", "path"),
        ("https://api.example.com/admin%20", "path"),
        ("https://api.example.com/admin.", "path"),
        ("https://api.example.com/v1/%252e%252e/admin", "path"),
        ("https://api.example.com/v1/%c0%ae%c0%ae/admin", "path"),
        ('https://api.example.com"/x', "host"),
        ("https://api.example.com,/x", "host"),
        ("https://[::ffff:10.0.0]/x", "host"),
    ]
    for seller_url, part in cases:
        response = post(http, account["api_key"], signature_body(seller_url=seller_url))
        assert response.status_code == 422, (seller_url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"].endswith("/invalid-payment-terms")
        assert problem["pointer"] == "/sellerUrl"
        assert problem["detail"].startswith("/sellerUrl: ") and part in problem["detail"]
    assert _recorded(runtime) == (0, 0, 0)


def test_terms_for_another_host_are_refused_and_change_nothing(http, account, runtime) -> None:
    v2, v1 = "/paymentRequired/resource/url", "/paymentRequired/accepts/0/resource"
    cases = [
        (2, "https://evil.example/weather", v2, "evil.example"),
        (2, "https://api.example.com:8443/x", v2, "api.example.com:8443"),
        (1, "https://evil.example/weather", v1, "evil.example"),
    ]
    for version, resource, pointer, host in cases:
        body = signature_body(version=version)
        if version == 2:
            body["paymentRequired"]["resource"]["url"] = resource  # type: ignore[index]
        else:
            body["paymentRequired"]["accepts"][0]["resource"] = resource  # type: ignore[index]
        response = post(http, account["api_key"], body)
        assert response.status_code == 422, response.text
        problem = response.json()
        base = runtime.settings.resolved_problem_base
        assert problem["type"] == f"{base}/seller-resource-mismatch"
        assert (problem["pointer"], problem["resourceHost"], problem["sellerHost"]) == (
            pointer,
            host,
            "api.example.com",
        )
        assert pointer in problem["detail"] and host in problem["detail"]
    assert _recorded(runtime) == (0, 0, 0)
    page = http.get("/problems/seller-resource-mismatch")
    assert page.status_code == 200 and "another seller" in page.text


def test_terms_on_the_sellers_host_or_naming_no_resource_still_sign(http, account) -> None:
    other_path = signature_body()
    resource = other_path["paymentRequired"]["resource"]  # type: ignore[index]
    resource["url"] = "https://API.example.com/weather/v2"
    assert post(http, account["api_key"], other_path).status_code == 200
    v1 = signature_body(version=1)
    del v1["paymentRequired"]["accepts"][0]["resource"]  # type: ignore[index]
    assert post(http, account["api_key"], v1).status_code == 200


def test_a_form_starlette_cannot_parse_is_a_malformed_request_not_a_missing_page(http) -> None:
    """A route that exists answers 400 for a body it cannot read: a 404 would tell a client
    the address is wrong."""
    no_boundary = http.post(
        "/portal/sign-in", content=b"x", headers={"Content-Type": "multipart/form-data"}
    )
    assert no_boundary.status_code == 400, no_boundary.text
    assert no_boundary.headers["content-type"] == "application/problem+json"
    assert no_boundary.json()["type"].endswith("/malformed-request")
