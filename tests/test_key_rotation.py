"""``paysign admin rotate-master-key`` beside a running ``paysign serve``, on both databases:
agents sign before, during and after the rotation; afterwards the service starts and signs
with the new key alone, and the old key alone is refused at start with what to do."""

from __future__ import annotations

import base64
import secrets
import subprocess
import time

import pytest

from conftest import PAYSIGN, ServeProcess, free_port, ok_json, paysign
from softhsm_support import SoftHsm
from softhsm_support import softhsm as softhsm  # the fixture
from test_account_admin import Agent, account_with_key, sign

pytestmark = pytest.mark.slow


def new_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def test_rotation_while_signing_then_the_new_key_alone(env: dict[str, str]) -> None:
    old, new = new_key(), new_key()
    under_old = env | {"PAYSIGN_MASTER_KEY": old}
    keys = [account_with_key(under_old, f"holder{n}@example.com") for n in range(3)]
    both = env | {"PAYSIGN_MASTER_KEY": new, "PAYSIGN_PREVIOUS_MASTER_KEYS": old}

    with ServeProcess(both) as url:
        agents = [Agent(url, key) for key in keys]
        for agent in agents:
            agent.start()
        for agent in agents:
            assert agent.signed_once.wait(30), agent.statuses
        during = [len(agent.statuses) for agent in agents]
        rotated = ok_json(paysign(both, "admin", "rotate-master-key"))
        assert rotated["rewrapped"] == {"wallet": 3, "totp": 3, "refresh": 0, "webhook": 0}
        # Each agent signs again after the rotation returned, with its rewrapped wallet key.
        deadline = time.monotonic() + 30
        while any(len(a.statuses) < n + 3 for a, n in zip(agents, during, strict=True)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for agent in agents:
            agent.stopping.set()
            agent.join(30)
            assert set(agent.statuses) == {200}, agent.statuses

    again = ok_json(paysign(both, "admin", "rotate-master-key"))
    assert again["rewrapped"] == {"wallet": 0, "totp": 0, "refresh": 0, "webhook": 0}

    alone = env | {"PAYSIGN_MASTER_KEY": new}
    with ServeProcess(alone) as url:
        for key in keys:
            assert sign(url, key).status_code == 200

    refused = subprocess.run(
        [PAYSIGN, "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        env=env | {"PAYSIGN_MASTER_KEY": old},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 1
    assert "rotate-master-key" in refused.stderr and rotated["kekId"] in refused.stderr
    assert old not in refused.stderr + refused.stdout


def test_rotation_into_a_token_key_while_signing_then_the_token_alone(
    env: dict[str, str], softhsm: SoftHsm
) -> None:
    label = f"kek-{secrets.token_hex(3)}"
    softhsm.new_key(label)
    old = new_key()
    key = account_with_key(env | {"PAYSIGN_MASTER_KEY": old}, "hsm@example.com")
    token = env | softhsm.env() | {"PAYSIGN_MASTER_KEY_PKCS11": softhsm.spec(label)}
    both = token | {"PAYSIGN_PREVIOUS_MASTER_KEYS": old}

    with ServeProcess(both) as url:
        agent = Agent(url, key)
        agent.start()
        assert agent.signed_once.wait(30), agent.statuses
        rotated = ok_json(paysign(both, "admin", "rotate-master-key"))
        assert rotated["rewrapped"] == {"wallet": 1, "totp": 1, "refresh": 0, "webhook": 0}
        assert rotated["kekId"].startswith("p11-")
        signed = len(agent.statuses)
        deadline = time.monotonic() + 30
        while len(agent.statuses) < signed + 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        agent.stopping.set()
        agent.join(30)
        assert set(agent.statuses) == {200}, agent.statuses

    with ServeProcess(token) as url:
        assert sign(url, key).status_code == 200
