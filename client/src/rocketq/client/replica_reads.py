"""Reads on the replicas of broker groups for blocking callers, as :class:`ClientInstance` reads.

:class:`BlockingReplicaReads` keeps the broker address table (``brokerName -> {brokerId: addr}``)
of the routes it has seen and runs a read on the replica :func:`~rocketq.client.instance.pick_replica`
chooses (Java's ``findBrokerAddressInSubscribe``: the suggested broker id, else the master, else
a slave), with the failover of :meth:`ClientInstance.invoke_on_replica
<rocketq.client.instance.ClientInstance.invoke_on_replica>`: a replica that fails at the transport
level is marked unreachable for ``unreachable_backoff_ms``, the route is fetched again and the
read is made on the next replica of the group, each at most once.  It is the same choice over the
same :class:`~rocketq.client.instance.UnreachableReplicas`, driven by a caller that blocks on a
:class:`~rocketq.client.api.BlockingMQClientAPI` instead of awaiting on the client's event loop
(the Spark connector's driver and executors).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection
from typing import TypeVar

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import NoRouteError, RemotingError, RocketQError
from rocketq.client.instance import FindBrokerResult, UnreachableReplicas, pick_replica
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID

__all__ = ["DEFAULT_UNREACHABLE_BACKOFF_MS", "BlockingReplicaReads"]

log = logging.getLogger("rocketq.client")
_T = TypeVar("_T")

#: how long a replica that failed at the transport level is passed over (the client's default)
DEFAULT_UNREACHABLE_BACKOFF_MS = 5_000


class BlockingReplicaReads:
    """The replicas of the broker groups of the topics read, and reads that fail over between them."""

    def __init__(
        self,
        api: BlockingMQClientAPI,
        *,
        timeout_ms: int,
        unreachable_backoff_ms: int = DEFAULT_UNREACHABLE_BACKOFF_MS,
    ) -> None:
        self.api = api
        self.timeout_ms = timeout_ms
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.unreachable = UnreachableReplicas(unreachable_backoff_ms)

    def learn(self, route: TopicRouteData) -> None:
        """Take the replicas of every broker group ``route`` lists."""
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)

    def update_topic_route(self, topic: str) -> TopicRouteData:
        """Fetch the route of ``topic`` from the NameServer and learn its replicas."""
        route = self.api.get_topic_route(topic, self.timeout_ms)
        self.learn(route)
        return route

    def knows(self, broker_name: str) -> bool:
        return broker_name in self.broker_addr_table

    def replica_at(self, broker_name: str, topic: str, addr: str) -> FindBrokerResult | None:
        """The replica of ``broker_name`` at ``addr``; the route of ``topic`` is fetched again
        when the replicas learned so far do not include it (a master back after a restart)."""
        for _ in range(2):
            for bid, known in self.broker_addr_table.get(broker_name, {}).items():
                if known == addr:
                    return FindBrokerResult(addr, bid)
            try:
                self.update_topic_route(topic)
            except RocketQError:
                return None
        return None

    def find_broker_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, *, exclude: Collection[str] = ()
    ) -> FindBrokerResult | None:
        """The replica of ``broker_name`` a read goes to (:func:`pick_replica`), passing over
        replicas marked unreachable."""
        addrs = self.broker_addr_table.get(broker_name, {})
        return pick_replica(addrs, broker_id, exclude=exclude, unreachable=self.unreachable)

    def invoke_on_replica(
        self,
        broker_name: str,
        topic: str,
        call: Callable[[FindBrokerResult], _T],
        broker_id: int = MASTER_ID,
        *,
        planned: str | None = None,
    ) -> _T:
        """Run the read ``call`` on the replica :meth:`find_broker_in_subscribe` picks, and on a
        transport error on the next one (see the module docstring); the last transport error is
        raised when none answers, broker answers (MQBrokerError) as they are.

        ``planned`` is the replica a caller with a fresher view chose (the Spark driver's plan for
        an executor): the first try goes there unless a broker id was suggested or it is marked
        unreachable, so a master back after a restart is read again as soon as it is planned.
        """
        tried: set[str] = set()
        last: RemotingError | None = None
        while True:
            found = None
            if (
                not tried
                and planned is not None
                and broker_id == MASTER_ID
                and planned not in self.unreachable
            ):
                found = self.replica_at(broker_name, topic, planned)
            if found is None:
                found = self.find_broker_in_subscribe(broker_name, broker_id, exclude=tried)
            if found is None and not tried:
                self.update_topic_route(topic)
                found = self.find_broker_in_subscribe(broker_name, broker_id)
            if found is None:
                if last is not None:
                    raise last
                raise NoRouteError(topic, f"the broker group {broker_name} is not in the route")
            try:
                result = call(found)
            except RemotingError as exc:
                log.info("%s of %s does not answer (%s); trying another replica", found, broker_name, exc)
                self.unreachable.mark(found.broker_addr)
                tried.add(found.broker_addr)
                last = exc
                with contextlib.suppress(RocketQError):
                    self.update_topic_route(topic)
                continue
            self.unreachable.clear(found.broker_addr)
            return result
