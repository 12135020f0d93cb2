"""A 500 says nothing of what failed inside: the agent gets a generic problem document, the
operator's log gets the reason. Real HTTP, a real vault holding the wrong master key."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from structlog.testing import capture_logs

from conftest import LiveServer, signature_body
from paysign.app import create_app
from paysign.bootstrap import Runtime
from paysign.custody import EnvelopeVault

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
ANOTHER_MASTER_KEY = bytes(range(100, 132))


@SQLITE_ONLY
def test_a_wallet_the_vault_cannot_open_gives_a_generic_500(
    runtime: Runtime, account: dict[str, str]
) -> None:
    # The wallet was sealed under the runtime's key; this service holds another one, as after
    # a command created a second master key.
    wrong_key = dataclasses.replace(runtime, vault=EnvelopeVault(ANOTHER_MASTER_KEY))
    with capture_logs() as logged, LiveServer(create_app(wrong_key)) as server:
        answer = httpx.post(
            f"{server.url}/wallets/signatures",
            json=signature_body(),
            headers={"Authorization": f"Bearer {account['api_key']}"},
            timeout=10,
        )
    assert answer.status_code == 500, answer.text
    problem = answer.json()
    assert problem["type"].endswith("/internal-error")
    assert problem["detail"] == "the request failed inside paysign; nothing was signed"
    assert set(problem) == {"type", "title", "status", "detail"}
    for internal in ("wallet:", "key-encryption key", "cannot open", "secret"):
        assert internal not in answer.text
    # The operator still learns why, at ERROR.
    reasons = [entry for entry in logged if entry["event"] == "internal_error_answered"]
    assert [entry["log_level"] for entry in reasons] == ["error"]
    assert reasons[0]["slug"] == "secret-unreadable" and "wallet:" in reasons[0]["reason"]
