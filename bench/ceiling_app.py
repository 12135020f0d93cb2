"""The framework ceiling for ``bench/sign.py``: a bare Starlette JSON endpoint.

``POST /wallets/signatures`` reads the whole request body and answers 200 with a precomputed
JSON object of ``--response-bytes`` bytes (the size of paysign's real answer) -- no parsing,
no auth, no middleware, no database. It is served as a Starlette app is by default: one uvicorn
worker, ``loop="auto"``/``http="auto"`` (uvloop + httptools), no access log, no lifespan.
Whatever paysign does beyond this is its own cost, and so is what it saves: ``paysign serve``
writes each response in one piece (``paysign.serving.one_write``), which ``--one-write`` gives
this app too (``bench/one_write.py`` compares the two).

    .venv/bin/python bench/ceiling_app.py --port 8499 --response-bytes 1400 [--one-write]
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_PREFIX = b'{"paymentSignatureHeader":"'
_SUFFIX = b'"}'


def filler_json(size: int) -> bytes:
    """A valid JSON object of exactly ``size`` bytes (at least 29)."""
    pad = size - len(_PREFIX) - len(_SUFFIX)
    if pad < 0:
        raise ValueError(f"a response is at least {len(_PREFIX) + len(_SUFFIX)} bytes")
    return _PREFIX + b"A" * pad + _SUFFIX


def make_app(response_bytes: int) -> Starlette:
    answer = filler_json(response_bytes)

    async def sign(request: Request) -> Response:
        await request.body()
        return Response(answer, media_type="application/json")

    async def healthz(request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    return Starlette(
        routes=[
            Route("/wallets/signatures", sign, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--response-bytes", type=int, default=1400)
    parser.add_argument(
        "--one-write", action="store_true", help="serve with paysign's OneWriteProtocol"
    )
    args = parser.parse_args()
    http: type[asyncio.Protocol] | str = "auto"
    if args.one_write:
        from paysign.serving.one_write import OneWriteProtocol

        http = OneWriteProtocol
    # The uvicorn arguments of `paysign serve` (src/paysign/serving/process.py), but `http`.
    uvicorn.run(
        make_app(args.response_bytes),
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        loop="auto",
        http=http,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
