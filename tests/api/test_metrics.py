"""``GET /metrics`` over real HTTP on 127.0.0.1: what the signing endpoint, group commit, the
pool, the reconciler and the faucet did, parsed back from the scrape; who may read it.

The metrics are the process's own, shared by every test in it, so each test compares a scrape
taken before with one taken after what it did.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import LiveServer, signature_body
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.chain.authorizations import RpcAuthorizationStates
from paysign.config import Settings
from paysign.services import policy
from paysign.services.reconcile import reconcile

USDC = 1_000_000
TESTNET = "eip155:84532"
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
TOKEN = "metrics-" + "k" * 32

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client: httpx.Client, **headers: str) -> Samples:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def sign(http: httpx.Client, key: str | None, body: object, **headers: str) -> httpx.Response:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return http.post("/wallets/signatures", json=body, headers=headers)


def test_a_scrape_counts_what_the_signing_endpoint_answered(
    http: httpx.Client, account: dict[str, str], runtime: Runtime, database_url: str
) -> None:
    document = policy.get_policy(runtime.db, email=account["email"])
    document["caps"]["perPayment"] = USDC
    policy.set_policy(runtime.db, runtime.clock, email=account["email"], document=document)
    policy.decide_seller(
        runtime.db, runtime.clock, email=account["email"], seller="denied.example.com", kind="deny"
    )
    key = account["api_key"]
    before = scrape(http)

    assert sign(http, key, signature_body()).status_code == 200
    assert sign(http, key, signature_body(), **{"X-Sandbox-Mode": "true"}).status_code == 200
    over_cap = sign(http, key, signature_body(amount=str(2 * USDC)))
    assert over_cap.json()["type"].endswith("/spend-cap-exceeded")
    denied = sign(http, key, signature_body(seller_url="https://denied.example.com/x"))
    assert denied.json()["type"].endswith("/seller-denied")
    assert sign(http, "psk_" + "x" * 43, signature_body()).status_code == 401  # unknown key
    assert sign(http, None, signature_body()).status_code == 401  # no key: never queued

    after = scrape(http)
    signatures = "paysign_signatures_total"
    assert delta(before, after, signatures, network=TESTNET, sandbox="false") == 1
    assert delta(before, after, signatures, network=TESTNET, sandbox="true") == 1
    refusals = "paysign_signing_refusals_total"
    assert delta(before, after, refusals, problem="spend-cap-exceeded") == 1
    assert delta(before, after, refusals, problem="seller-denied") == 1
    assert delta(before, after, refusals, problem="unauthorized") == 2
    assert delta(before, after, "paysign_signing_seconds_count") == 6
    assert delta(before, after, "paysign_signing_seconds_bucket", le="+Inf") == 6
    # One request at a time: five transactions of one request each (the keyless one is
    # answered before it is queued).
    assert delta(before, after, "paysign_group_commit_batch_size_count") == 5
    assert delta(before, after, "paysign_group_commit_batch_size_sum") == 5
    assert delta(before, after, "paysign_group_commit_batch_size_bucket", le="1.0") == 5
    # A lone request is signed by the serving process, never sent to the signer child.
    fallbacks = "paysign_signer_fallbacks_total"
    assert delta(before, after, fallbacks, reason="not_sent") == 2
    assert delta(before, after, fallbacks, reason="unanswered") == 0
    # Only the PostgreSQL store takes connections from a pool: one per transaction.
    waits = 5 if database_url.startswith("postgresql") else 0
    assert delta(before, after, "paysign_db_pool_wait_seconds_count") == waits
    assert delta(before, after, "paysign_db_pool_timeouts_total") == 0
    # PostgreSQL ran each on the event loop, its reads made ahead; SQLite has no such path.
    batches = "paysign_group_commit_batches_total"
    assert delta(before, after, batches, path="read_ahead") == waits
    assert delta(before, after, batches, path="threads") == 0


def test_every_metric_has_help_text(http: httpx.Client) -> None:
    response = http.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    ours = [name for name in families if name.startswith("paysign_")]
    assert len(ours) >= 8
    assert all(families[name].documentation for name in ours)


@SQLITE_ONLY
def test_reconcile_lag_follows_the_last_uninterrupted_pass(
    http: httpx.Client, account: dict[str, str], runtime: Runtime, dev_chain: object
) -> None:
    assert sign(http, account["api_key"], signature_body()).status_code == 200
    runtime.clock.advance(3600)  # type: ignore[attr-defined]
    last = "paysign_reconcile_last_success_timestamp_seconds"
    before = scrape(http)

    dead = RpcAuthorizationStates({TESTNET: "http://127.0.0.1:9"}, timeout=2)
    assert reconcile(runtime.db, runtime.clock, dead).interrupted
    dead.close()
    assert value(scrape(http), last) == value(before, last)

    chain = RpcAuthorizationStates({TESTNET: dev_chain.rpc_url})  # type: ignore[attr-defined]
    started = time.time()
    report = reconcile(runtime.db, runtime.clock, chain)
    finished = time.time()
    chain.close()
    assert (report.interrupted, report.expired) == (False, 1)
    after = scrape(http)
    assert started <= value(after, last) <= finished
    assert value(after, "paysign_reconcile_lag_seconds") >= 0


@SQLITE_ONLY
def test_a_grant_updates_the_treasury_balance(
    chained_runtime: Runtime, account: dict[str, str], sandbox_chain: object
) -> None:
    treasury = sandbox_chain.treasury  # type: ignore[attr-defined]
    with (
        LiveServer(create_app(chained_runtime)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        headers = {"Authorization": f"Bearer {account['api_key']}"}
        assert client.post("/wallets/testnet/funds", headers=headers).status_code == 200
        balance = sandbox_chain.usdc_balance(treasury.address)  # type: ignore[attr-defined]
        samples = scrape(client)
    assert balance > 0
    assert value(samples, "paysign_treasury_balance_base_units", network=TESTNET) == balance


# --- who may read it ----------------------------------------------------------------------


@pytest.fixture
def token_server(runtime: Runtime) -> Iterator[LiveServer]:
    settings = runtime.settings.model_copy(update={"metrics_token": TOKEN})
    with LiveServer(create_app(dataclasses.replace(runtime, settings=settings))) as server:
        yield server


def assert_problem(response: httpx.Response, status: int, slug: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith(f"/{slug}") and problem["status"] == status
    assert "paysign_" not in response.text


@SQLITE_ONLY
def test_with_a_token_configured_every_client_needs_it(token_server: LiveServer) -> None:
    with httpx.Client(base_url=token_server.url, timeout=10) as client:
        missing = client.get("/metrics")
        assert_problem(missing, 401, "metrics-token-required")
        assert missing.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in missing.text
        wrong = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"})
        assert_problem(wrong, 401, "metrics-token-required")
        basic = client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"})
        assert_problem(basic, 401, "metrics-token-required")
        assert (
            "paysign_signatures"
            in client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        )
        # The token is what counts, not where the request came from.
        forwarded = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "203.0.113.9"}
        assert client.get("/metrics", headers=forwarded).status_code == 200
        page = client.get("/problems/metrics-token-required")
        assert page.status_code == 200


def test_the_token_is_not_in_the_settings_repr() -> None:
    assert TOKEN not in repr(Settings(metrics_token=TOKEN))


@SQLITE_ONLY
def test_without_a_token_a_proxied_request_is_not_local(
    live_server: LiveServer, http: httpx.Client
) -> None:
    assert http.get("/metrics").status_code == 200
    # A proxy on this host that sets only the scheme, or a CDN's own header, was taken for
    # the operator's machine: the metrics went to anyone the proxy forwarded.
    for header in (
        "X-Forwarded-For",
        "Forwarded",
        "X-Real-IP",
        "X-Forwarded-Proto",
        "X-Original-Forwarded-For",
        "True-Client-IP",
        "CF-Connecting-IP",
        "Via",
    ):
        refused = http.get("/metrics", headers={header: "127.0.0.1"})
        assert_problem(refused, 404, "not-found")


@SQLITE_ONLY
@pytest.mark.parametrize("claimed", ["203.0.113.7", "127.0.0.1"])
def test_behind_a_trusted_proxy_only_the_token_opens_it(runtime: Runtime, claimed: str) -> None:
    # uvicorn takes the trusted peer's X-Forwarded-For as the client: whatever it says, a
    # forwarded request is not the operator's own machine.
    app = create_app(runtime)
    with LiveServer(app, trusted_proxies=("127.0.0.1",)) as server:
        refused = httpx.get(f"{server.url}/metrics", headers={"X-Forwarded-For": claimed})
    assert_problem(refused, 404, "not-found")


def _outward_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@SQLITE_ONLY
def test_without_a_token_a_client_on_another_address_gets_404(runtime: Runtime) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    server = LiveServer(create_app(runtime))
    server.server.config.host = address  # its clients connect from that address too
    with server:
        refused = httpx.get(f"http://{address}:{server.port}/metrics", timeout=10)
        assert_problem(refused, 404, "not-found")
        assert httpx.get(f"http://{address}:{server.port}/healthz").status_code == 200
