"""Networks paysign signs on and the USDC contract each one accepts (the asset registry).

>>> resolve_network("base-sepolia").caip2
'eip155:84532'
>>> resolve_network("eip155:1") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Network:
    caip2: str
    chain_id: int
    v1_name: str
    testnet: bool


BASE_MAINNET = Network("eip155:8453", 8453, "base", testnet=False)
BASE_SEPOLIA = Network("eip155:84532", 84532, "base-sepolia", testnet=True)

_BY_NAME: dict[str, Network] = {
    n: net for net in (BASE_MAINNET, BASE_SEPOLIA) for n in (net.caip2, net.v1_name)
}


def resolve_network(name: str) -> Network | None:
    """The network for a CAIP-2 id or its v1 alias; ``None`` when paysign does not sign on it."""
    return _BY_NAME.get(name)


@dataclass(frozen=True, slots=True)
class UsdcToken:
    """The USDC contract of one network and the EIP-712 domain it verifies signatures with."""

    network: Network
    address: bytes  # 20 bytes
    name: str
    version: str

    @property
    def address_hex(self) -> str:
        return "0x" + self.address.hex()


class AssetRegistry:
    """Which token is USDC on each network. Built from configuration, never from the request."""

    def __init__(self, tokens: list[UsdcToken]) -> None:
        self._by_chain = {t.network.chain_id: t for t in tokens}

    def usdc_for(self, network: Network) -> UsdcToken | None:
        return self._by_chain.get(network.chain_id)

    @classmethod
    def from_addresses(
        cls,
        *,
        mainnet: str,
        mainnet_name: str,
        testnet: str,
        testnet_name: str,
        version: str,
    ) -> AssetRegistry:
        return cls(
            [
                UsdcToken(BASE_MAINNET, parse_address(mainnet), mainnet_name, version),
                UsdcToken(BASE_SEPOLIA, parse_address(testnet), testnet_name, version),
            ]
        )


def parse_address(text: str) -> bytes:
    """20 bytes from a ``0x``-prefixed hex address; ``ValueError`` otherwise.

    The EIP-55 checksum is not enforced: sellers send lower-case addresses too, and the
    facilitators compare case-insensitively.
    """
    if not isinstance(text, str) or len(text) != 42 or text[:2] not in ("0x", "0X"):
        raise ValueError("must be a 0x-prefixed 20-byte hex address")
    try:
        address = bytes.fromhex(text[2:])
    except ValueError:
        raise ValueError("must be a 0x-prefixed 20-byte hex address") from None
    if len(address) != 20:  # fromhex skips whitespace, so 42 chars can hold fewer bytes
        raise ValueError("must be a 0x-prefixed 20-byte hex address")
    return address
