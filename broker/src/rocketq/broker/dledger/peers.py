"""The ``dLegerPeers`` value: ``n0-host:port;n1-host:port;...`` parsed and checked once.

A peer id is ``n`` followed by a number, as Java's DLedger brokers require (their broker id is
that number + 1, so ``n0`` is broker 1); the port is the group's Raft port, not the broker's
``listenPort``.  :func:`parse_peers` raises :class:`BrokerConfigError` naming the key and the
part that is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocketq.broker.errors import BrokerConfigError

__all__ = ["DLedgerPeer", "majority", "parse_peers"]

_PEER_RE = re.compile(r"(n\d+)-(\S+):(\d+)")


@dataclass(frozen=True, slots=True)
class DLedgerPeer:
    """One member of a DLedger group."""

    node_id: str  # "n0"
    host: str
    port: int

    @property
    def index(self) -> int:
        return int(self.node_id[1:])

    @property
    def broker_id(self) -> int:
        """The broker id this member registers with while it is a slave (Java: index + 1)."""
        return self.index + 1

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.port}"


def majority(group_size: int) -> int:
    """How many members (the master included) must hold a write before it is acknowledged."""
    if group_size < 1:
        raise ValueError(f"a group has at least one member, got {group_size}")
    return group_size // 2 + 1


def parse_peers(value: str, *, self_id: str = "", preferred_leader_id: str = "") -> tuple[DLedgerPeer, ...]:
    """The peers of ``dLegerPeers``; checks ``self_id`` and ``preferred_leader_id`` against them."""
    peers: list[DLedgerPeer] = []
    for part in (p.strip() for p in value.split(";")):
        if not part:
            continue
        match = _PEER_RE.fullmatch(part)
        if match is None:
            raise BrokerConfigError(
                "dLegerPeers", f"{part!r} is not id-host:port with an id like n0 (e.g. n0-127.0.0.1:40911)"
            )
        port = int(match[3])
        if not 0 < port <= 65535:
            raise BrokerConfigError("dLegerPeers", f"{part!r}: port must be 1..65535")
        peers.append(DLedgerPeer(match[1], match[2], port))
    if not peers:
        raise BrokerConfigError("dLegerPeers", "lists no peer (expected n0-host:port;n1-host:port;...)")
    ids = [p.node_id for p in peers]
    if len(set(ids)) != len(ids):
        raise BrokerConfigError("dLegerPeers", f"peer ids must be unique, got {';'.join(ids)}")
    indexes = [p.index for p in peers]
    if len(set(indexes)) != len(indexes):
        raise BrokerConfigError("dLegerPeers", f"peer numbers must be unique (n0 and n00 clash): {ids}")
    addrs = [p.raft_address for p in peers]
    if len(set(addrs)) != len(addrs):
        raise BrokerConfigError("dLegerPeers", f"two peers share one address: {';'.join(addrs)}")
    if self_id and self_id not in ids:
        raise BrokerConfigError("dLegerSelfId", f"{self_id!r} is not one of the dLegerPeers ids {ids}")
    if preferred_leader_id and preferred_leader_id not in ids:
        raise BrokerConfigError(
            "preferredLeaderId", f"{preferred_leader_id!r} is not one of the dLegerPeers ids {ids}"
        )
    return tuple(peers)
