"""Reading a request's form before an ASGI endpoint does, and handing it on unchanged (or
amended): for wrappers that must look at a small body first, such as the OAuth token endpoint's."""

from __future__ import annotations

from starlette.types import Message, Receive


async def read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The body's messages until ``limit`` bytes are passed or the body ends; and whether more
    is still unread (then the wrapper should leave the body alone)."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more and size <= limit:
        message = await receive()
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
    return b"".join(chunks), more


def replaying(body: bytes, more: bool, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` first, then whatever the client still sends."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": more}

    return replay
