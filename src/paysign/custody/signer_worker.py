"""The signer process: signs digests for the service, beside the event loop's core.

Run by ``custody.signer_process`` as ``python -m paysign.custody.signer_worker``; nothing
else talks to it. Its wire, over its stdin and stdout (pipes the service owns, never a file):

* it writes one byte, ``READY``, once it can sign;
* it reads jobs of 64 bytes: a 32-byte private key, then a 32-byte digest;
* for each job, in order, it writes 65 bytes: ``r ‖ s ‖ v`` exactly as the service would have
  signed it (``protocol.eip712.sign_with_key``), or ``REFUSED`` (65 zero bytes, never a valid
  signature: v is 27 or 28) when libsecp256k1 refuses the key;
* it exits when its stdin closes, which is also what happens when the service dies.

It keeps no key beyond the read that brought it, logs nothing, and ignores Ctrl-C: the
service decides when it ends.
"""

from __future__ import annotations

import contextlib
import os
import signal

from paysign.helper_process import write_all
from paysign.protocol.eip712 import sign_with_key

JOB_BYTES = 64
SIGNATURE_BYTES = 65
READY = b"\x01"
REFUSED = bytes(SIGNATURE_BYTES)


def signatures_for(jobs: bytes) -> bytes:
    """The answers to whole jobs, in order.

    >>> key, digest = bytes(31) + b"\\x01", bytes(32)
    >>> answer = signatures_for(key + digest + bytes(32) + digest)
    >>> len(answer), answer[64] in (27, 28), answer[65:] == REFUSED
    (130, True, True)
    """
    return b"".join(
        sign_with_key(jobs[at : at + 32], jobs[at + 32 : at + JOB_BYTES]) or REFUSED
        for at in range(0, len(jobs) - len(jobs) % JOB_BYTES, JOB_BYTES)
    )


def serve(read_fd: int, write_fd: int) -> None:
    write_all(write_fd, READY)
    pending = b""
    while True:
        data = os.read(read_fd, 1 << 16)
        if not data:
            return
        pending += data
        whole = len(pending) - len(pending) % JOB_BYTES
        if whole:
            answer = signatures_for(pending[:whole])
            pending = pending[whole:]
            write_all(write_fd, answer)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(BrokenPipeError):  # the service went first: nobody to answer
        serve(0, 1)
