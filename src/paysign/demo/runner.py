"""Running the demo: servers on threads, and ``paysign demo`` itself.

``paysign demo`` is three servers:

- **the paysign service**, as a child process running ``paysign serve`` itself (same command,
  same settings and environment): the same dev chain and database as a plain ``serve``, and no
  second copy of its start-up to drift from it. It owns the dev chain; the demo finds the
  chain's RPC address where ``paysign devchain info`` does. Before it starts, the demo seeds
  the demo catalog into a database whose catalog was never written (``serve`` never does:
  production starts empty) and, unless ``PAYSIGN_CATALOG_PAY_TO`` is set, names the demo payee.
- **the facilitator** and **the sellers**, in the demo process, each a uvicorn server on its own
  thread and event loop. They cannot share one loop: the SDK's middleware fetches the
  facilitator's ``/supported`` with a blocking call, and its facilitator blocks on JSON-RPC.

The service runs in its own session, so a terminal's Ctrl-C reaches the demo alone, which stops
the sellers and the facilitator and passes one SIGINT on: ``serve`` then stops as it always
does (the dev chain's state is dumped first). On Linux the child also gets
``PR_SET_PDEATHSIG``, so it never outlives a demo that was killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import click
import httpx
import uvicorn

from paysign.bootstrap import open_database
from paysign.chain.devchain_files import running_devchain
from paysign.clock import SystemClock
from paysign.config import Settings
from paysign.datadir import DataDirExposed
from paysign.demo.facilitator import LocalFacilitator
from paysign.demo.sellers import DemoSellers
from paysign.demo.terms import (
    DEMO_PAY_TO,
    DemoListing,
    DemoSettings,
    Mode,
    Terms,
    demo_listings,
    terms_for,
)
from paysign.logging import configure_logging
from paysign.services.catalog import seed_demo_catalog

_START_SECONDS = 10.0
_SERVE_START_SECONDS = 60.0
_SERVE_STOP_SECONDS = 30.0


class DemoError(RuntimeError):
    """A part of the demo could not start."""


class ThreadedServer:
    """One uvicorn server on its own thread (and event loop)."""

    def __init__(
        self, app: Any, host: str, port: int, name: str, *, trusted_proxies: list[str]
    ) -> None:
        self.name = name
        self.host = host
        self.requested_port = port
        # Named explicitly, as for the service: uvicorn's defaults trust loopback (and
        # FORWARDED_ALLOW_IPS) to say who the client is.
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=trusted_proxies,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        with contextlib.suppress(SystemExit):  # uvicorn exits when it cannot bind
            self.server.run()

    def start(self) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + _START_SECONDS
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise DemoError(
                    f"the {self.name} could not listen on {self.host}:{self.requested_port} "
                    "(is the port in use?)"
                )
            time.sleep(0.01)
        return self

    @property
    def port(self) -> int:
        """The bound port (the chosen one when started with port 0)."""
        sockets = self.server.servers[0].sockets
        return int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{_connect_host(self.host)}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=10)


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104 -- a comparison


class DemoStack:
    """The facilitator and the demo sellers, for the sandbox chain at
    ``settings.testnet_rpc_url``; the sellers listen at ``settings.demo_sellers_url``."""

    def __init__(self, settings: Settings, demo: DemoSettings | None = None) -> None:
        if not settings.testnet_rpc_url:
            raise DemoError("the demo needs a sandbox chain (settings.testnet_rpc_url)")
        self.settings = settings
        self.demo = demo or DemoSettings()
        self.terms: dict[Mode, Terms] = terms_for(settings, self.demo)
        self.listings: list[DemoListing] = demo_listings(settings.demo_sellers_url)
        self.facilitator = LocalFacilitator(
            settings.testnet_rpc_url, self.demo.facilitator_key, self.terms
        )
        self._servers: list[ThreadedServer] = []

    @property
    def facilitator_url(self) -> str:
        return self._servers[0].url

    @property
    def sellers_url(self) -> str:
        return self.settings.demo_sellers_url.rstrip("/")

    def start(self) -> DemoStack:
        try:
            facilitator = ThreadedServer(
                self.facilitator.app(),
                self.demo.facilitator_host,
                self.demo.facilitator_port,
                "demo facilitator",
                trusted_proxies=self.settings.trusted_proxy_list,
            )
            self._servers.append(facilitator.start())
            sellers = DemoSellers(self.listings, self.terms, facilitator.url)
            where = urlsplit(self.settings.demo_sellers_url)
            if where.hostname is None:
                raise DemoError(f"demo_sellers_url has no host: {self.settings.demo_sellers_url}")
            port = where.port or (443 if where.scheme == "https" else 80)
            server = ThreadedServer(
                sellers.app(),
                where.hostname,
                port,
                "demo sellers",
                trusted_proxies=self.settings.trusted_proxy_list,
            )
            self._servers.append(server.start())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.stop()
        self._servers.clear()

    def __enter__(self) -> DemoStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- paysign demo ----


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()  # resolved in the parent: the child must not touch the loader after fork
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:  # runs in the child between fork and exec
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:
            os._exit(1)


def _start_serve(host: str | None, port: int | None) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-c",
        "import sys; from paysign.cli import main; sys.exit(main())",
        "serve",
    ]
    if host is not None:
        args += ["--host", host]
    if port is not None:
        args += ["--port", str(port)]
    parent = os.getpid()
    # The demo sellers are on 127.0.0.1: let the connector (MCP) call them; the catalog says
    # they are paid where the sellers ask.
    env = {
        "PAYSIGN_CONNECTOR_ALLOW_PRIVATE": "1",
        "PAYSIGN_CATALOG_PAY_TO": DEMO_PAY_TO,
        # search_bazaar reads the demo's own index (demo/bazaar.py), served by the sellers.
        "PAYSIGN_BAZAAR_URL": Settings().demo_sellers_url.rstrip("/"),
        **os.environ,
    }
    return subprocess.Popen(  # noqa: S603 -- our own interpreter and command
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=lambda: _die_with_parent(parent),
    )


def _seed_demo_catalog(settings: Settings) -> None:
    """The demo catalog, pointed at the demo sellers, when the catalog was never written."""
    try:
        db = open_database(settings)
    except DataDirExposed as exc:
        raise DemoError(str(exc)) from None
    try:
        if seed_demo_catalog(db, SystemClock(), settings.demo_sellers_url):
            click.echo(
                f"seeded the demo catalog (sellers at {settings.demo_sellers_url})", err=True
            )
    finally:
        db.dispose()


def _wait_for_service(child: subprocess.Popen[bytes], url: str, stop: threading.Event) -> bool:
    """True once the service answers; False when told to stop first."""
    deadline = time.monotonic() + _SERVE_START_SECONDS
    while not stop.is_set():
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        if child.poll() is not None:
            raise DemoError(f"paysign serve exited with code {child.returncode}")
        if time.monotonic() > deadline:
            raise DemoError(f"paysign serve did not answer at {url} in time")
        stop.wait(0.1)
    return False


def _stop_serve(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C would have sent
        try:
            child.wait(_SERVE_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _sandbox_rpc_url(settings: Settings) -> str:
    if settings.testnet_rpc_url:
        return settings.testnet_rpc_url
    running = running_devchain(settings.data_dir)
    if running is None:
        raise DemoError(f"paysign serve runs no dev chain for {settings.data_dir}")
    return running.rpc_url


def _banner(service: str, stack: DemoStack, rpc_url: str) -> str:
    terms = stack.terms["sandbox"]
    lines = [
        "paysign demo is running (Ctrl-C stops everything):",
        f"  service      {service}  (POST /wallets/signatures, GET /catalog)",
        f"  sellers      {stack.sellers_url}  (GET / lists them)",
        f"  bazaar       {stack.sellers_url}/discovery  (search_bazaar's index: Open Ecosystem)",
        f"  facilitator  {stack.facilitator_url}  (/supported, /verify, /settle)",
        f"  chain        {rpc_url}  (sandbox: {terms.network}, USDC {terms.asset})",
        "  listings:",
    ]
    for listing in stack.listings:
        sandbox = "sandbox" if listing.sandbox_available else "no sandbox"
        price = f"{listing.listing.price_usdc} USDC"
        lines.append(
            f"    {listing.name:<17} {listing.method:<4} {stack.sellers_url}{listing.route_path}"
            f"  {price}, x402 v{listing.x402_version}, {sandbox}"
        )
    lines.append("  walkthrough: docs/demo.md")
    return "\n".join(lines)


def _run_beside(
    settings: Settings, demo: DemoSettings, child: subprocess.Popen[bytes], stop: threading.Event
) -> int:
    """Once the service is up: the facilitator and the sellers, until told to stop."""
    service = f"http://{_connect_host(settings.host)}:{settings.port}"
    if not _wait_for_service(child, service, stop):
        return 0
    rpc_url = _sandbox_rpc_url(settings)
    with DemoStack(settings.model_copy(update={"testnet_rpc_url": rpc_url}), demo) as stack:
        click.echo(_banner(settings.resolved_base_url, stack, rpc_url), err=True)
        while not stop.wait(0.2):
            if child.poll() is not None:
                click.echo(f"paysign serve exited with code {child.returncode}", err=True)
                return 1
    return 0


def run_demo(host: str | None, port: int | None) -> int:
    """``paysign demo``: start everything, wait for Ctrl-C (or SIGTERM), stop everything."""
    settings = Settings.listening_on(host, port)
    configure_logging(settings.log_level)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    try:
        _seed_demo_catalog(settings)
    except DemoError as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    child = _start_serve(host, port)
    try:
        code = _run_beside(settings, DemoSettings(), child, stop)
    except DemoError as exc:
        click.echo(f"error: {exc}", err=True)
        code = 1
    finally:
        _stop_serve(child)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("paysign demo stopped", err=True)
    return code
