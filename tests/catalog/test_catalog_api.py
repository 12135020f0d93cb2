"""The catalog over real HTTP, its import, and the tier it gives the source policy."""

from __future__ import annotations

import copy
import json
import time

import pytest

from conftest import PAY_TO, ok_json, paysign, signature_body
from paysign.config import Settings
from paysign.services.catalog import demo_catalog, import_catalog, seed_demo_catalog


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """An operator who names whom listings are paid (there is no default payee)."""
    return settings.model_copy(update={"catalog_pay_to": PAY_TO})


@pytest.fixture
def seeded(runtime):
    assert seed_demo_catalog(runtime.db, runtime.clock, "http://sellers.example")
    assert not seed_demo_catalog(runtime.db, runtime.clock, "http://sellers.example")
    return runtime


def test_both_catalog_endpoints_serve_the_same_public_document(http, seeded) -> None:
    first = http.get("/catalog")
    second = http.get("/buyers/catalog")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    document = first.json()
    assert {x["tier"] for x in document["catalog"]} == {"PREMIUM", "STANDARD"}
    assert [d["network"] for d in document["paymentDetails"]] == ["eip155:8453"]
    assert [d["network"] for d in document["sandboxPaymentDetails"]] == ["eip155:84532"]
    details = document["paymentDetails"][0]
    assert set(details) >= {"scheme", "network", "payTo", "maxTimeoutSeconds", "extra"}
    assert details["extra"] == {"name": "USD Coin", "version": "2"}


def test_full_file_has_all_three_tiers(http, seeded) -> None:
    document = http.get("/catalog/full.json").json()
    tiers = {x["tier"] for x in document["catalog"]}
    assert tiers == {"PREMIUM", "STANDARD", "OPEN_ECOSYSTEM"}
    listed = demo_catalog("http://sellers.example")["catalog"]
    assert sorted(x["id"] for x in document["catalog"]) == sorted(x["id"] for x in listed)


def test_etag_lets_clients_poll_cheaply_and_changes_with_the_catalog(http, seeded) -> None:
    first = http.get("/catalog")
    etag = first.headers["etag"]
    assert http.get("/catalog", headers={"If-None-Match": etag}).status_code == 304
    document = demo_catalog("http://sellers.example")
    document["catalog"][2]["description"] = "changed"
    import_catalog(seeded.db, seeded.clock, document)
    again = http.get("/catalog", headers={"If-None-Match": etag})
    assert again.status_code == 200 and again.headers["etag"] != etag
    assert "changed" in again.text


def test_a_presented_key_must_be_valid(http, seeded, account) -> None:
    assert (
        http.get("/catalog", headers={"Authorization": f"Bearer {account['api_key']}"}).status_code
        == 200
    )
    bad = http.get("/buyers/catalog", headers={"Authorization": "Bearer psk_" + "x" * 43})
    assert bad.status_code == 401 and bad.json() == {"message": "Unauthorized"}


def test_listed_sellers_take_their_tier_in_the_policy(seeded, account, http) -> None:
    headers = {"Authorization": f"Bearer {account['api_key']}"}
    listed = "http://sellers.example/weather/v1/forecast/Paris?units=metric"  # STANDARD
    at_its_price = signature_body(seller_url=listed, amount="2000")  # listed at 0.002 USDC
    signed = http.post("/wallets/signatures", json=at_its_price, headers=headers)
    assert signed.status_code == 200, signed.text
    # The Open Ecosystem listing and unlisted paths still need approval.
    for url, amount in (
        ("http://sellers.example/facts/v1/fact", "1000"),  # listed at 0.001 USDC
        ("http://sellers.example/weather/v1/forecast/a/b", "10000"),
    ):
        body = signature_body(seller_url=url, amount=amount)
        refused = http.post("/wallets/signatures", json=body, headers=headers)
        assert refused.status_code == 403 and refused.json()["type"].endswith("/allow-pending")


def test_import_cli_validates_and_upserts(env, tmp_path) -> None:
    document = demo_catalog("http://sellers.example")
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(document))
    assert ok_json(paysign(env, "catalog", "import", str(path))) == {"inserted": 5, "updated": 0}
    assert ok_json(paysign(env, "catalog", "import", str(path))) == {"inserted": 0, "updated": 5}
    broken = copy.deepcopy(document)
    broken["catalog"][3]["name"] = "bad name!"
    path.write_text(json.dumps(broken))
    refused = paysign(env, "catalog", "import", str(path))
    assert refused.returncode == 1 and "/catalog/3/name" in refused.stderr


def test_a_running_process_sees_a_catalog_imported_elsewhere(runtime) -> None:
    from paysign.policy.decide import Tier
    from paysign.policy.seller import seller_location
    from paysign.services.catalog import Catalog

    catalog = Catalog(runtime.db, runtime.settings, recheck_seconds=0)
    where = seller_location("http://sellers.example/market/v1/quote/ACME")
    assert catalog.tier_of(where) is Tier.OPEN_ECOSYSTEM
    import_catalog(runtime.db, runtime.clock, demo_catalog("http://sellers.example"))
    # tier_of answers from the snapshot it has and refreshes it on a thread of its own.
    deadline = time.monotonic() + 10
    while catalog.tier_of(where) is not Tier.PREMIUM:
        assert time.monotonic() < deadline, "the import never reached the tier lookup"
        time.sleep(0.01)
    assert catalog.listing_for(where).name == "market_quote"


def test_a_listing_the_policy_cannot_judge_is_refused_and_nothing_changes(seeded) -> None:
    from paysign.errors import InvalidCatalog
    from paysign.policy.decide import Tier
    from paysign.policy.seller import seller_location
    from paysign.services.catalog import Catalog
    from paysign.store import catalog_repo

    def stored() -> tuple[int, list[dict]]:
        with seeded.db.read() as conn:
            return (
                catalog_repo.catalog_version(conn),
                [x.document for x in catalog_repo.all_listings(conn)],
            )

    before = stored()
    document = demo_catalog("http://sellers.example")
    document["catalog"][1]["description"] = "changed"
    document["catalog"][2]["path"] = "/v1/forecast/{city}/file."
    with pytest.raises(InvalidCatalog) as refused:
        import_catalog(seeded.db, seeded.clock, document)
    assert refused.value.extensions["pointer"] == "/catalog/2/path"
    assert "'weather_forecast'" in refused.value.detail
    assert "'file.'" in refused.value.detail
    assert stored() == before
    # Had it been stored, the tier index of every process would no longer build.
    catalog = Catalog(seeded.db, seeded.settings, recheck_seconds=0)
    where = seller_location("http://sellers.example/weather/v1/forecast/Paris")
    assert catalog.tier_of(where) is Tier.STANDARD
