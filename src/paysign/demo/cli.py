"""``paysign demo``: the command. Only click is imported until it runs, so the rest of the CLI
works without the ``demo`` extra."""

from __future__ import annotations

import sys

import click


@click.command("demo")
@click.option("--host", default=None, help="Address of the paysign service (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port of the paysign service (default 8402).")
def demo(host: str | None, port: int | None) -> None:
    """Run the service with demo sellers to pay and a local facilitator (docs/demo.md).

    Starts `paysign serve` (dev chain, database, demo catalog), the x402 facilitator
    (PAYSIGN_DEMO_FACILITATOR_PORT, default 8404) and the sellers of the demo catalog at
    PAYSIGN_DEMO_SELLERS_URL (default http://127.0.0.1:8403); Ctrl-C stops all of it.
    """
    try:
        from paysign.demo.runner import run_demo
    except ImportError as exc:
        raise click.ClickException(
            f"paysign demo needs the demo extra: pip install 'paysign[demo]' ({exc})"
        ) from None
    sys.exit(run_demo(host, port))
