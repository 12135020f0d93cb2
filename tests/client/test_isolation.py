"""``paysign.client`` stands alone (DESIGN §2): importing it, its CLI commands included, loads
``protocol/`` and nothing of the server — no store, services, API, starlette or sqlalchemy."""

from __future__ import annotations

import json
import subprocess
import sys

SERVER_SIDE = (
    "paysign.store",
    "paysign.services",
    "paysign.api",
    "paysign.bootstrap",
    "paysign.config",
    "paysign.custody",
    "paysign.chain",
    "paysign.policy",
    "paysign.catalog",
    "paysign.demo",
    "starlette",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "fastapi",
    "uvicorn",
    "x402",
    "web3",
)

PROBE = """
import json, sys
import paysign.client
import paysign.client.cli
paysign.client.PaysignClient(api_key="psk_x", paysign_url="http://127.0.0.1:9").close()
print(json.dumps(sorted(sys.modules)))
"""


def test_the_client_imports_nothing_of_the_server() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    modules = json.loads(done.stdout)
    server = [m for m in modules if any(m == s or m.startswith(s + ".") for s in SERVER_SIDE)]
    assert server == []
    ours = {m for m in modules if m.startswith("paysign.")}
    allowed = ("paysign.client", "paysign.protocol", "paysign.errors")
    assert {m for m in ours if not m.startswith(allowed)} == set()
    assert "paysign.client.auth" in ours and "paysign.protocol.networks" in ours
