"""``paysign admin list-accounts / disable-account / enable-account / reset-authenticator``
against a running ``paysign serve``, on both databases: a disabled account's API key is refused
at every door, even while its agent is signing, and nothing of the account is deleted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pyotp
import pytest

from conftest import ServeProcess, ok_json, paysign, signature_body

pytestmark = pytest.mark.slow

UNAUTHORIZED = {"message": "Unauthorized"}
PASSWORD = "long enough pass"


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[str]:
    with ServeProcess(env) as url:
        yield url


def account_with_key(env: dict[str, str], email: str) -> str:
    ok_json(paysign(env, "admin", "create-account", "--email", email, "--password", PASSWORD))
    ok_json(
        paysign(env, "admin", "approve-seller", "--email", email, "--seller", "api.example.com")
    )
    return str(ok_json(paysign(env, "admin", "issue-key", "--email", email))["apiKey"])


def sign(
    url: str, key: str, client: httpx.Client | None = None, *, live: bool = False
) -> httpx.Response:
    """A sandbox payment, or a live one of 1 base unit (it counts toward the caps)."""
    post = client.post if client is not None else httpx.post
    sandbox = {} if live else {"X-Sandbox-Mode": "true"}
    return post(
        f"{url}/wallets/signatures",
        json=signature_body(amount="1" if live else "10000"),
        headers={"Authorization": f"Bearer {key}"} | sandbox,
    )


class Agent(threading.Thread):
    """Signs with one key, over one connection, until told to stop; keeps every status."""

    def __init__(self, url: str, key: str, *, live: bool = False) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.live = url, key, live
        self.statuses: list[int] = []
        self.stopping = threading.Event()
        self.signed_once = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stopping.is_set():
                try:
                    status = sign(self.url, self.key, client, live=self.live).status_code
                except httpx.TransportError:
                    self.statuses.append(-1)  # the server went away: a failure to report
                    return
                self.statuses.append(status)
                if status == 200:
                    self.signed_once.set()


def test_a_disabled_accounts_key_is_refused_at_every_door_and_nothing_is_deleted(
    env: dict[str, str], server: str
) -> None:
    key = account_with_key(env, "agent@example.com")
    bystander = account_with_key(env, "other@example.com")

    agent = Agent(server, key)
    agent.start()
    assert agent.signed_once.wait(30), agent.statuses
    disabled = ok_json(paysign(env, "admin", "disable-account", "--email", "Agent@example.com"))
    assert disabled == {
        "email": "agent@example.com",
        "disabled": True,
        "changed": True,
        "sessionsEnded": 0,
    }
    # The running agent's very next request after the command returned is refused.
    refused = sign(server, key)
    agent.stopping.set()
    agent.join(30)
    assert refused.status_code == 401 and refused.json() == UNAUTHORIZED
    first_refusal = agent.statuses.index(401)
    assert set(agent.statuses[:first_refusal]) == {200}
    assert set(agent.statuses[first_refusal:]) == {401}

    bearer = {"Authorization": f"Bearer {key}"}
    for response in (
        httpx.get(f"{server}/catalog", headers=bearer),
        httpx.get(f"{server}/buyers/catalog", headers=bearer),
        httpx.post(f"{server}/wallets/testnet/funds", headers=bearer),
    ):
        assert response.status_code == 401 and response.json() == UNAUTHORIZED
    connector = httpx.post(
        f"{server}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers=bearer | {"Accept": "application/json, text/event-stream"},
    )
    assert connector.status_code == 401
    # Another account is untouched.
    assert sign(server, bystander).status_code == 200

    listed = ok_json(paysign(env, "admin", "list-accounts", "--json"))["accounts"]
    by_email = {row["email"]: row for row in listed}
    assert by_email["agent@example.com"]["disabled"] is True
    assert by_email["agent@example.com"]["apiKeyExpiresAt"] is not None  # the key is kept
    assert by_email["other@example.com"]["disabled"] is False
    table = paysign(env, "admin", "list-accounts")
    assert table.returncode == 0 and "agent@example.com" in table.stdout
    assert "disabled" in table.stdout and "psk_" not in table.stdout + json.dumps(listed)

    history = ok_json(
        paysign(env, "admin", "activity", "--email", "agent@example.com", "--limit", "10000")
    )
    assert sum(1 for entry in history["activity"] if entry.get("status") == "signed") == (
        agent.statuses.count(200)
    )

    again = ok_json(paysign(env, "admin", "disable-account", "--email", "agent@example.com"))
    assert again["changed"] is False
    enabled = ok_json(paysign(env, "admin", "enable-account", "--email", "agent@example.com"))
    assert enabled == {"email": "agent@example.com", "disabled": False, "changed": True}
    assert sign(server, key).status_code == 200  # the same key works again

    unknown = paysign(env, "admin", "disable-account", "--email", "ghost@example.com")
    assert unknown.returncode == 1 and "no account" in unknown.stderr


def portal_sign_in(
    url: str,
    email: str,
    secret: str,
    *,
    step: int = 0,
    password: str = PASSWORD,
    browser: httpx.Client | None = None,
) -> httpx.Response:
    """``step``: the code of a later 30-second step (one step of drift is accepted), for a
    second sign-in within the step the first one used up. ``browser`` keeps the session."""
    with httpx.Client(base_url=url, timeout=10) as own:
        client = browser or own
        page = client.get(f"{url}/portal/sign-in")
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        return client.post(
            f"{url}/portal/sign-in",
            data={
                "csrf": csrf,
                "email": email,
                "password": password,
                "totp": pyotp.TOTP(secret).at(time.time() + 30 * step),
            },
        )


def test_reset_authenticator_enrols_the_holder_again(env: dict[str, str], server: str) -> None:
    created = ok_json(
        paysign(
            env, "admin", "create-account", "--email", "lost@example.com", "--password", PASSWORD
        )
    )
    reset = paysign(env, "admin", "reset-authenticator", "--email", "lost@example.com")
    shown = ok_json(reset)
    assert "not shown again" in reset.stderr
    assert shown["totpSecret"] != created["totpSecret"]
    assert shown["otpauthUri"].startswith("otpauth://totp/")
    assert shown["sessionsEnded"] == 0 and shown["grantsRevoked"] == 0

    old = portal_sign_in(server, "lost@example.com", created["totpSecret"])
    assert old.status_code == 401 and "not correct" in old.text
    new = portal_sign_in(server, "lost@example.com", shown["totpSecret"])
    assert new.status_code == 303 and new.headers["location"] == "/portal/"

    ok_json(paysign(env, "admin", "disable-account", "--email", "lost@example.com"))
    refused = portal_sign_in(server, "lost@example.com", shown["totpSecret"], step=1)
    assert refused.status_code == 401 and "This account is disabled" in refused.text


def test_reset_password_lets_a_holder_who_forgot_it_back_in_and_ends_their_sessions(
    env: dict[str, str], server: str
) -> None:
    """Without it a forgotten password locked the holder out of the portal for good, and so out
    of withdrawals, while the agent's key went on spending."""
    email = "forgot@example.com"
    created = ok_json(
        paysign(env, "admin", "create-account", "--email", email, "--password", PASSWORD)
    )
    with httpx.Client(timeout=10) as browser:
        assert portal_sign_in(server, email, created["totpSecret"], browser=browser).is_redirect
        assert browser.get(f"{server}/portal/").status_code == 200

        new_password = "a brand new passphrase"
        reset = ok_json(
            paysign(
                env,
                "admin",
                "reset-password",
                "--email",
                email,
                "--password-file",
                "-",
                stdin=new_password + "\n",
            )
        )
        assert reset == {"email": email, "sessionsEnded": 1, "grantsRevoked": 0}
        ended = browser.get(f"{server}/portal/")
        assert ended.status_code == 303 and ended.headers["location"] == "/portal/sign-in"

    old = portal_sign_in(server, email, created["totpSecret"], step=1)
    assert old.status_code == 401
    new = portal_sign_in(server, email, created["totpSecret"], step=1, password=new_password)
    assert new.status_code == 303 and new.headers["location"] == "/portal/"

    short = paysign(
        env, "admin", "reset-password", "--email", email, "--password-file", "-", stdin="short\n"
    )
    assert short.returncode == 1 and "characters long" in short.stderr
    no_terminal = paysign(env, "admin", "reset-password", "--email", email, stdin="")
    assert no_terminal.returncode == 2 and "--password-file" in no_terminal.stderr
