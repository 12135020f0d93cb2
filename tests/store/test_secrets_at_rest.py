"""A copy of the database holds no secret in the clear: not in a table, and on SQLite not in the
database file, its write-ahead log or its shared-memory index either.

The account goes through what writes secrets — sign-up (password, authenticator seed, wallet
key), a key issued and used to sign, a portal sign-in — and then every byte at rest is searched
for each secret, raw and in the spellings it travels in (hex, base32, base64)."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import httpx
import pyotp
import sqlalchemy as sa

from conftest import LiveServer, signature_body
from paysign.bootstrap import Runtime
from paysign.custody.master_key import load_master_key
from paysign.custody.vault import SealedSecret
from paysign.services import accounts, keys, policy
from paysign.store.schema import metadata, wallets

PASSWORD = "a long passphrase nobody else has"


def _spellings(secret: bytes) -> list[bytes]:
    return [
        secret,
        secret.hex().encode(),
        secret.hex().upper().encode(),
        base64.b64encode(secret).rstrip(b"="),
        base64.urlsafe_b64encode(secret).rstrip(b"="),
        base64.b32encode(secret).rstrip(b"="),
    ]


def _everything_at_rest(runtime: Runtime) -> bytes:
    """Every value of every table; on SQLite also the raw files beside the database."""
    chunks: list[bytes] = []
    with runtime.db.read() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(sa.select(table)):
                for value in row:
                    chunks.append(value if isinstance(value, bytes) else str(value).encode())
    if runtime.db.is_sqlite:
        path = Path(runtime.db.url.removeprefix("sqlite:///"))
        for file in path.parent.iterdir():
            if file.name.startswith(path.name):
                chunks.append(file.read_bytes())
    return b"\x00".join(chunks)


def test_no_secret_is_stored_in_the_clear(runtime: Runtime) -> None:
    email = f"holder-{secrets.token_hex(4)}@example.com"
    created = accounts.create_account(
        runtime.db, runtime.vault, runtime.clock, email=email, password=PASSWORD
    )
    issued = keys.issue_key(runtime.db, runtime.clock, email=email, expires_in_days=30)
    policy.decide_seller(
        runtime.db, runtime.clock, email=email, seller="api.example.com", kind="allow"
    )
    from paysign.app import create_app

    with LiveServer(create_app(runtime)) as server, httpx.Client(base_url=server.url) as http:
        auth = {"Authorization": f"Bearer {issued.api_key}"}
        for _ in range(3):
            signed = http.post("/wallets/signatures", json=signature_body(), headers=auth)
            assert signed.status_code == 200, signed.text
        form = http.get("/portal/sign-in").text
        csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        code = pyotp.TOTP(created.totp_secret).at(runtime.clock.now())
        signed_in = http.post(
            "/portal/sign-in",
            data={"csrf": csrf, "email": email, "password": PASSWORD, "totp": code},
        )
        assert signed_in.status_code == 303, signed_in.text
        session_cookie = next(iter(http.cookies.values()))

    with runtime.db.read() as conn:
        wallet_id, sealed = conn.execute(
            sa.select(wallets.c.id, wallets.c.sealed_key).where(
                wallets.c.account_id == created.account_id
            )
        ).one()
    wallet_key = runtime.vault.open(
        accounts.wallet_context(wallet_id), SealedSecret.from_bytes(sealed)
    )
    totp_seed = base64.b32decode(created.totp_secret + "=" * (-len(created.totp_secret) % 8))
    secrets_in_play = {
        "API key": [issued.api_key.encode(), issued.api_key.removeprefix("psk_").encode()],
        "password": [PASSWORD.encode()],
        "authenticator seed": [created.totp_secret.encode(), *_spellings(totp_seed)],
        "wallet key": _spellings(wallet_key),
        "master key": _spellings(load_master_key(runtime.settings)),
        "portal session": [session_cookie.encode()],
    }
    at_rest = _everything_at_rest(runtime)
    # The search covers what was written: the sealed key and the account are found.
    assert sealed in at_rest and email.encode() in at_rest
    for what, spellings in secrets_in_play.items():
        for spelling in spellings:
            assert spelling not in at_rest, f"the {what} is stored in the clear"
