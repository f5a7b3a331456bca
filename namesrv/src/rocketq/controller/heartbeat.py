"""Broker liveness as the controller sees it (Java's ``DefaultBrokerHeartbeatManager``).

Brokers send BROKER_HEARTBEAT (904) every ``brokerHeartbeatInterval`` to every controller; each
controller keeps the last one per (cluster, broker name, broker id) in memory.  Liveness is not
replicated: it is the leader's own observation, as in RocketMQ.  A broker is *active* while its
last heartbeat is younger than the timeout it announced (``heartbeatTimeoutMills``, else the
controller's ``controllerHeartBeatTimeoutMills``); a closed connection makes it inactive at once.

Theory of operation.  The manager is plain synchronous code over an injected clock, so the
policy is testable without sockets.  :meth:`BrokerHeartbeatManager.scan` drops expired entries
and returns them; the server then checks each group whose master is no longer active.  A broker
never heard of is inactive, but a controller that has been running for less than the default
timeout cannot tell "dead" from "not heard yet", so :meth:`BrokerHeartbeatManager.knows_enough`
gates elections triggered by a master that is merely unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.client.remoting.controller import BrokerHeartbeatRequestHeader
from rocketq.controller.state import CandidateInfo

__all__ = ["BrokerHeartbeatManager", "BrokerIdentity", "BrokerLiveInfo"]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """The last heartbeat of one broker."""

    identity: BrokerIdentity
    broker_addr: str
    last_update_ms: int
    timeout_ms: int
    epoch: int
    max_offset: int
    confirm_offset: int
    election_priority: int
    channel: object | None  # the connection it came on (compared by identity only)

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.last_update_ms > self.timeout_ms

    def candidate(self) -> CandidateInfo:
        return CandidateInfo(self.identity.broker_id, self.epoch, self.max_offset, self.election_priority)


class BrokerHeartbeatManager:
    """Last heartbeat per broker; ``is_active`` and ``scan`` decide liveness."""

    def __init__(self, default_timeout_ms: int, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._clock_ms = clock_ms
        self._started_ms = clock_ms()
        self._live: dict[BrokerIdentity, BrokerLiveInfo] = {}

    def on_heartbeat(
        self, header: BrokerHeartbeatRequestHeader, channel: object | None = None
    ) -> BrokerLiveInfo:
        """Record a heartbeat; the header must carry ``brokerId`` (the processor checks)."""
        identity = BrokerIdentity(header.cluster_name, header.broker_name, int(header.broker_id or 0))
        timeout = header.heartbeat_timeout_ms or self.default_timeout_ms
        info = BrokerLiveInfo(
            identity=identity,
            broker_addr=header.broker_addr,
            last_update_ms=self._clock_ms(),
            timeout_ms=timeout,
            epoch=header.epoch or 0,
            max_offset=header.max_offset or 0,
            confirm_offset=header.confirm_offset or 0,
            election_priority=header.election_priority or 0,
            channel=channel,
        )
        self._live[identity] = info
        return info

    def on_channel_close(self, channel: object) -> list[BrokerLiveInfo]:
        """Forget every broker whose heartbeats came on ``channel``; returns them."""
        gone = [info for info in self._live.values() if info.channel is channel]
        for info in gone:
            del self._live[info.identity]
        return gone

    def scan(self) -> list[BrokerLiveInfo]:
        """Drop and return the brokers whose heartbeats stopped."""
        now = self._clock_ms()
        expired = [info for info in self._live.values() if info.expired(now)]
        for info in expired:
            del self._live[info.identity]
        return expired

    def get(self, cluster_name: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        info = self._live.get(BrokerIdentity(cluster_name, broker_name, broker_id))
        if info is None or info.expired(self._clock_ms()):
            return None
        return info

    def is_active(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        return self.get(cluster_name, broker_name, broker_id) is not None

    def knows_enough(self) -> bool:
        """True once this controller has listened for longer than the default timeout."""
        return self._clock_ms() - self._started_ms > self.default_timeout_ms

    def active_in_group(self, cluster_name: str, broker_name: str) -> list[BrokerLiveInfo]:
        now = self._clock_ms()
        return [
            info
            for ident, info in self._live.items()
            if ident.cluster_name == cluster_name
            and ident.broker_name == broker_name
            and not info.expired(now)
        ]
