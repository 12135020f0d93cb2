"""Withdraw: the holder sends USDC from the custodial wallet to an address they type.

The wallet signs an EIP-3009 ``transferWithAuthorization`` (its key opened through the vault,
used in this process and dropped); the sandbox treasury, or on Base mainnet the configured
relayer, submits it and pays the gas. Every check that needs no code comes first, so a refused
withdrawal spends no authenticator code; then a fresh, unused code (the step-up every money
moving change asks for); then the withdrawal is recorded before it is submitted, so the audit
trail has it whatever the chain answers. One whose outcome this request never learns (the chain
answered "pending", or the process died) is settled later from the chain by the reconciler
(``services.withdrawal_reconcile``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from paysign.chain.errors import ChainError, TransactionPending
from paysign.chain.relay import RelayChain, TransferAuthorization
from paysign.custody import SealedSecret
from paysign.errors import (
    AccountNotFound,
    WithdrawalPending,
    WithdrawalRefused,
    WithdrawalUnavailable,
)
from paysign.protocol import (
    BASE_MAINNET,
    BASE_SEPOLIA,
    WalletSigner,
    checksum_address,
    domain_separator,
    parse_address,
    transfer_authorization_digest,
)
from paysign.protocol.eip712 import wrong_checksum
from paysign.protocol.usdc import format_usdc, parse_typed_usdc
from paysign.services.accounts import wallet_context
from paysign.services.portal_deps import PortalDeps
from paysign.services.signing_context import time_ordered_nonce
from paysign.store import portal_repo, sign_in_repo, withdrawal_repo
from paysign.store.repositories import KeyHolder
from paysign.store.withdrawal_repo import WithdrawalRow

#: How long the signed authorization stays valid on chain: enough for the relayer to get it
#: mined, short enough that a transfer never submitted cannot be used much later.
VALID_SECONDS = 600
DAY = 86_400
#: The count of a withdrawal on its way (checked, not yet recorded) lasts this long at most:
#: one whose process died while it was on its way stops counting then.
IN_FLIGHT_SECONDS = 300
IN_FLIGHT_KEY = "withdrawals-on-their-way:"
NETWORKS = {BASE_SEPOLIA.caip2: "Base Sepolia (sandbox)", BASE_MAINNET.caip2: "Base"}

log = structlog.get_logger("paysign.withdrawals")


@dataclass(frozen=True, slots=True)
class WithdrawalPlan:
    """A withdrawal checked and ready to confirm: what the confirmation page shows."""

    network: str
    to_address: str  # checksummed
    amount: int  # base units
    balance: int
    from_address: str


@dataclass(frozen=True, slots=True)
class Withdrawal:
    id: int
    network: str
    to_address: str
    amount: int
    transaction_hash: str


def review(
    deps: PortalDeps, account_id: str, network: str, to_text: str, amount_text: str
) -> WithdrawalPlan:
    """Check a withdrawal before it is confirmed; raises ``WithdrawalRefused`` (a bad address
    or amount) or ``WithdrawalUnavailable`` (the network cannot carry it now)."""
    plan, _, _ = _plan(deps, account_id, network, to_text, amount_text)
    return plan


def withdraw(
    deps: PortalDeps,
    account_id: str,
    network: str,
    to_text: str,
    amount_text: str,
    code: str,
) -> Withdrawal:
    """Send the USDC. Raises ``WithdrawalRefused`` / ``WithdrawalUnavailable`` (nothing sent,
    no code spent), ``CredentialsRefused`` (a wrong, used or missing code: nothing sent),
    ``WithdrawalPending`` (submitted, not yet confirmed)."""
    plan, holder, chain = _plan(deps, account_id, network, to_text, amount_text)
    in_flight = _count_against_limit(deps, account_id)
    try:
        deps.credentials.fresh_code(account_id, code)
        code_verified_at = deps.clock.now()
        try:
            # The dev chain mines only when asked: its newest block may be long past, and an
            # authorization valid until then plus ten minutes would already have expired.
            valid_before = max(chain.block_time(), deps.clock.now()) + VALID_SECONDS
        except ChainError as exc:
            raise _unavailable(exc, plan.network) from None
        authorization = _signed_authorization(deps, holder, chain, plan, valid_before)
        with deps.db.write() as conn:
            withdrawal_id = withdrawal_repo.record(
                conn,
                account_id=account_id,
                created_at=deps.clock.now(),
                network=plan.network,
                sandbox=plan.network == BASE_SEPOLIA.caip2,
                from_address=plan.from_address,
                to_address=plan.to_address,
                amount=plan.amount,
                nonce=authorization.nonce,
                valid_before=valid_before,
                fresh_code=True,
                code_verified_at=code_verified_at,
            )
            sign_in_repo.uncount_event(conn, in_flight)  # counted from now on as recorded
    except BaseException:
        with deps.db.write() as conn:  # nothing recorded, nothing sent: no longer on its way
            sign_in_repo.uncount_event(conn, in_flight)
        raise
    try:
        receipt = chain.relay_transfer(authorization)
    except TransactionPending as pending:
        _finish(deps, withdrawal_id, "pending", pending.transaction_hash)
        raise WithdrawalPending(
            f"the transfer {pending.transaction_hash} was sent but is not confirmed yet",
            transactionHash=pending.transaction_hash,
        ) from None
    except ChainError as exc:
        _finish(deps, withdrawal_id, "failed", None)
        raise _unavailable(exc, plan.network) from None
    _finish(deps, withdrawal_id, "sent", receipt.transaction_hash)
    log.info(
        "withdrawal_sent",
        account_id=account_id,
        network=plan.network,
        amount=plan.amount,
        transaction=receipt.transaction_hash,
    )
    return Withdrawal(
        withdrawal_id, plan.network, plan.to_address, plan.amount, receipt.transaction_hash
    )


def _count_against_limit(deps: PortalDeps, account_id: str) -> str:
    """Count this withdrawal against the limit of any 24 hours, before its code is checked:
    those recorded in the 24 hours before now, and those on their way (counted here, not yet
    recorded). One past the limit is refused, its code unspent. Returns the key of the count
    on its way, which the caller takes back once the withdrawal is recorded or given up.

    The count and the read share one write transaction, which on PostgreSQL holds the
    counter's row until it ends: withdrawals sent at once each see the others."""
    key = IN_FLIGHT_KEY + account_id
    now = deps.clock.now()
    with deps.db.write() as conn:
        on_their_way, _ = sign_in_repo.count_event(conn, key, now, IN_FLIGHT_SECONDS)
        recorded = withdrawal_repo.recorded_since(conn, account_id, now - DAY)
        if len(recorded) + on_their_way > deps.withdrawals_per_day:
            # Raised in the transaction, which rolls back: a refused one is not on its way.
            raise _over_the_limit(deps.withdrawals_per_day, recorded, on_their_way)
    return key


def _over_the_limit(limit: int, recorded: list[int], on_their_way: int) -> WithdrawalRefused:
    if len(recorded) < limit:
        return WithdrawalRefused(
            f"{limit} withdrawals in 24 hours is this account's most, and others are being "
            "sent right now; send this one again in a minute",
            pointer="/amount",
        )
    # Enough of the oldest must turn 24 hours old to leave room for this one and the others
    # on their way.
    next_at = recorded[min(len(recorded) - limit + on_their_way - 1, len(recorded) - 1)] + DAY
    return WithdrawalRefused(
        f"this account has sent {limit} withdrawals in the last 24 hours, the most it may; "
        f"the next one can be sent from {_shown(next_at)}, or send fewer, larger ones",
        pointer="/amount",
    )


def _shown(unix_seconds: int) -> str:
    moment = datetime.fromtimestamp(unix_seconds, tz=UTC)
    return f"{moment.day} {moment:%b %Y, %H:%M:%S} UTC"


def history(deps: PortalDeps, account_id: str) -> list[WithdrawalRow]:
    """The account's withdrawals, newest first."""
    with deps.db.read() as conn:
        return withdrawal_repo.of_account(conn, account_id)


def chain_for(deps: PortalDeps, network: str) -> RelayChain:
    """The network a withdrawal goes through; ``WithdrawalUnavailable`` when it has none."""
    if network == BASE_SEPOLIA.caip2:
        if deps.sandbox_chain is None:
            raise WithdrawalUnavailable(
                "this paysign has no sandbox chain configured (PAYSIGN_TESTNET_RPC_URL)"
            )
        return deps.sandbox_chain
    if network == BASE_MAINNET.caip2:
        if deps.mainnet_relay is None:
            raise WithdrawalUnavailable(
                "withdrawals on Base are not configured on this paysign: the operator must "
                "set PAYSIGN_MAINNET_RPC_URL and PAYSIGN_MAINNET_RELAYER_KEY"
            )
        return deps.mainnet_relay
    raise WithdrawalRefused("choose Base or Base Sepolia (sandbox)", pointer="/network")


def parse_destination(text: str) -> bytes:
    """The typed address; a mixed-case one must carry a correct EIP-55 checksum (it catches a
    mistyped character), an all-lower- or all-upper-case one has none to check.

    >>> parse_destination("0x52908400098527886E0F7030069857D2E4169EE7").hex()[:6]
    '529084'
    >>> parse_destination("0x52908400098527886e0F7030069857D2E4169EE7")
    Traceback (most recent call last):
    paysign.errors.WithdrawalRefused: the address's checksum does not match (a mistyped character?)
    """
    text = text.strip()
    try:
        address = parse_address(text)
    except ValueError:
        raise WithdrawalRefused(
            "enter the address as 0x followed by 40 hexadecimal digits", pointer="/to"
        ) from None
    if wrong_checksum(text, address):
        raise WithdrawalRefused(
            "the address's checksum does not match (a mistyped character?)",
            pointer="/to",
        )
    return address


def _plan(
    deps: PortalDeps, account_id: str, network: str, to_text: str, amount_text: str
) -> tuple[WithdrawalPlan, KeyHolder, RelayChain]:
    with deps.db.read() as conn:
        holder = portal_repo.wallet_holder(conn, account_id)
    if holder is None:
        raise AccountNotFound("the signed-in account has no wallet")
    chain = chain_for(deps, network)
    to = parse_destination(to_text)
    wallet = parse_address(holder.wallet_address)
    if to == bytes(20):
        raise WithdrawalRefused("USDC sent to the zero address is lost for good", pointer="/to")
    if to == wallet:
        raise WithdrawalRefused("that is this wallet's own address", pointer="/to")
    if to == chain.usdc:
        raise WithdrawalRefused(
            "that is the USDC contract itself; USDC sent there is lost", pointer="/to"
        )
    amount = _amount(amount_text)
    try:
        balance = chain.usdc_balance(wallet)
    except ChainError as exc:
        raise _unavailable(exc, network) from None
    if amount > balance:
        raise WithdrawalRefused(
            f"the wallet holds {format_usdc(balance)} USDC; "
            f"{format_usdc(amount)} USDC is more than that",
            pointer="/amount",
        )
    plan = WithdrawalPlan(network, checksum_address(to), amount, balance, checksum_address(wallet))
    return plan, holder, chain


def _amount(text: str) -> int:
    cleaned = text.strip()
    try:
        amount = parse_typed_usdc(cleaned) if cleaned else 0
    except ValueError as exc:
        raise WithdrawalRefused(str(exc), pointer="/amount") from None
    if amount <= 0:
        raise WithdrawalRefused("enter an amount of USDC above zero", pointer="/amount")
    return amount


def _signed_authorization(
    deps: PortalDeps,
    holder: KeyHolder,
    chain: RelayChain,
    plan: WithdrawalPlan,
    valid_before: int,
) -> TransferAuthorization:
    names = dict(deps.usdc_names)
    domain = domain_separator(names[plan.network], deps.usdc_version, chain.chain_id, chain.usdc)
    wallet = parse_address(holder.wallet_address)
    to = parse_address(plan.to_address)
    nonce = time_ordered_nonce()
    digest = transfer_authorization_digest(domain, wallet, to, plan.amount, 0, valid_before, nonce)
    # The key lives only in this frame and the signer; neither outlives the call.
    sealed = SealedSecret.from_bytes(holder.sealed_wallet_key)
    signer = WalletSigner(deps.vault.open(wallet_context(holder.wallet_id), sealed), wallet)
    signature = signer.sign_digest(digest)
    return TransferAuthorization(wallet, to, plan.amount, 0, valid_before, nonce, signature)


def _finish(deps: PortalDeps, withdrawal_id: int, status: str, tx: str | None) -> None:
    with deps.db.write() as conn:
        withdrawal_repo.finish(conn, withdrawal_id, status, tx)


def _unavailable(exc: ChainError, network: str) -> WithdrawalUnavailable:
    log.warning("withdrawal_chain_error", network=network, error=type(exc).__name__)
    return WithdrawalUnavailable(
        f"{NETWORKS.get(network, network)} did not take the transfer; nothing was sent. "
        "Try again shortly."
    )
