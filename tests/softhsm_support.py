"""A real PKCS#11 token for the tests: Debian's SoftHSM v2, one token for the test run, with an
AES-256 key made inside it (never extractable) and the user PIN in a 0600 file."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MODULE = "/usr/lib/softhsm/libsofthsm2.so"


@dataclass(frozen=True)
class SoftHsm:
    conf: Path  # SOFTHSM2_CONF for every process that opens the token
    token: str
    pin_file: Path

    def spec(self, key: str) -> str:
        """The ``PAYSIGN_MASTER_KEY_PKCS11`` value for one of its keys."""
        return f"module={MODULE},token={self.token},key={key},pin_file={self.pin_file}"

    def env(self) -> dict[str, str]:
        return {"SOFTHSM2_CONF": str(self.conf)}

    def new_key(self, label: str) -> None:
        """An AES-256 key made inside the token (never extractable), by a process of its own as
        an operator's HSM tool would: this one's login is the service code's."""
        subprocess.run(
            [sys.executable, "-c", _NEW_KEY, MODULE, self.token, str(self.pin_file), label],
            check=True,
            capture_output=True,
            env=os.environ | self.env(),
        )


_NEW_KEY = """
import sys, pkcs11
module, token, pin_file, label = sys.argv[1:]
with pkcs11.lib(module).get_token(token_label=token).open(
    rw=True, user_pin=open(pin_file).read().strip()
) as session:
    session.generate_key(pkcs11.KeyType.AES, 256, label=label, store=True)
"""


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SoftHsm]:
    if not Path(MODULE).exists():
        pytest.skip("softhsm2 is not installed (make test installs it)")
    root = tmp_path_factory.mktemp("softhsm")
    (root / "tokens").mkdir()
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {root / 'tokens'}\nobjectstore.backend = file\n")
    pin = secrets.token_hex(8)
    pin_file = root / "user.pin"
    pin_file.write_text(pin + "\n")
    pin_file.chmod(0o600)
    previous = os.environ.get("SOFTHSM2_CONF")
    # Read when the module is first initialised in this process: set before any test opens it.
    os.environ["SOFTHSM2_CONF"] = str(conf)
    label = f"paysign-{secrets.token_hex(3)}"
    subprocess.run(
        [
            "softhsm2-util",
            "--init-token",
            "--free",
            "--label",
            label,
            "--pin",
            pin,
            "--so-pin",
            secrets.token_hex(8),
        ],
        check=True,
        capture_output=True,
        env=os.environ | {"SOFTHSM2_CONF": str(conf)},
    )
    try:
        yield SoftHsm(conf, label, pin_file)
    finally:
        if previous is None:
            os.environ.pop("SOFTHSM2_CONF", None)
        else:
            os.environ["SOFTHSM2_CONF"] = previous
