"""What the portal's use cases run on, built once from the wiring's runtime: the database, the
key vault, the clock, the sandbox chain, the session store and the credential check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from paysign.chain.balances import LiveUsdc
from paysign.chain.relay import MainnetRelay
from paysign.chain.testnet import SandboxChain
from paysign.clock import Clock
from paysign.config import Settings
from paysign.custody import KeyVault
from paysign.services.sessions import Sessions
from paysign.services.sign_in import CredentialCheck, SignInLimits
from paysign.store.database import Database


class PortalRuntime(Protocol):
    """The part of the wiring's runtime the portal needs."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def vault(self) -> KeyVault: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def sandbox_chain(self) -> SandboxChain | None: ...
    @property
    def mainnet_relay(self) -> MainnetRelay | None: ...
    @property
    def live_usdc(self) -> LiveUsdc | None: ...


@dataclass(frozen=True, slots=True)
class PortalDeps:
    db: Database
    vault: KeyVault
    clock: Clock
    sessions: Sessions
    credentials: CredentialCheck
    #: The dashboard's balance and test funds; None when no sandbox chain is configured.
    sandbox_chain: SandboxChain | None
    test_funds_amount: int
    #: Withdrawals on Base mainnet; None when no relayer is configured.
    mainnet_relay: MainnetRelay | None = None
    #: The wallet's balance on Base for the overview; None without a mainnet RPC endpoint.
    live_usdc: LiveUsdc | None = None
    #: The USDC contracts' EIP-712 domain (name per network, version), for withdrawals.
    usdc_names: tuple[tuple[str, str], ...] = ()
    usdc_version: str = "2"
    #: The most withdrawals one account sends in 24 hours: the relayer pays each one's gas,
    #: and sends one at a time, so an account (or many) must not be able to spend its ETH on
    #: dust transfers or hold other holders' withdrawals behind theirs.
    withdrawals_per_day: int = 20


def portal_deps(runtime: PortalRuntime) -> PortalDeps:
    settings = runtime.settings
    return PortalDeps(
        db=runtime.db,
        vault=runtime.vault,
        clock=runtime.clock,
        sessions=Sessions(
            runtime.db,
            runtime.clock,
            idle=settings.portal_session_idle_seconds,
            absolute=settings.portal_session_absolute_seconds,
        ),
        credentials=CredentialCheck(
            runtime.db,
            runtime.vault,
            runtime.clock,
            SignInLimits(
                settings.oauth_max_failures_per_account,
                settings.oauth_max_failures_per_address,
                settings.oauth_failure_window_seconds,
                settings.portal_max_sign_ups_per_address,
            ),
        ),
        sandbox_chain=runtime.sandbox_chain,
        test_funds_amount=settings.test_funds_amount,
        mainnet_relay=runtime.mainnet_relay,
        live_usdc=runtime.live_usdc,
        usdc_names=(
            ("eip155:8453", settings.usdc_mainnet_name),
            ("eip155:84532", settings.usdc_testnet_name),
        ),
        usdc_version=settings.usdc_version,
    )
