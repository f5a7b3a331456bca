"""BlockingReplicaReads: which replica a blocking read goes to, and the failover between them.

The NameServer is a stand-in object answering routes (this is a unit test of the choice, not of
the wire); the reads are plain functions that fail for the addresses they are told are down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import RemotingConnectError
from rocketq.client.instance import FindBrokerResult
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.replica_reads import BlockingReplicaReads

GROUP, TOPIC = "broker-a", "T"
MASTER, SLAVE = "127.0.0.1:1", "127.0.0.1:2"


class Routes:
    """Answers GET_ROUTEINFO_BY_TOPIC with whatever replicas the test lists."""

    def __init__(self, addrs: dict[int, str]) -> None:
        self.addrs = addrs
        self.asked = 0

    def get_topic_route(self, topic: str, timeout_ms: int) -> TopicRouteData:
        self.asked += 1
        return TopicRouteData([QueueData(GROUP, 4, 4)], [BrokerData("c", GROUP, dict(self.addrs))])


def reads(routes: Routes) -> BlockingReplicaReads:
    return BlockingReplicaReads(cast(BlockingMQClientAPI, routes), timeout_ms=1000)


def read_with(down: set[str], served: list[str]) -> Callable[[FindBrokerResult], str]:
    def call(found: FindBrokerResult) -> str:
        served.append(found.broker_addr)
        if found.broker_addr in down:
            raise RemotingConnectError(found.broker_addr, "connection refused")
        return found.broker_addr

    return call


def test_a_planned_master_back_after_a_restart_is_read_again() -> None:
    routes = Routes({0: MASTER, 1: SLAVE})
    replicas = reads(routes)
    replicas.update_topic_route(TOPIC)
    served: list[str] = []
    # the master dies: the read fails over to the slave and the route no longer lists the master
    routes.addrs = {1: SLAVE}
    assert replicas.invoke_on_replica(GROUP, TOPIC, read_with({MASTER}, served)) == SLAVE
    assert served == [MASTER, SLAVE]
    # reads planned on the slave while it is down stay there
    served.clear()
    call = read_with(set(), served)
    assert replicas.invoke_on_replica(GROUP, TOPIC, call, planned=SLAVE) == SLAVE
    # the master is back and a fresher plan names it: the route is fetched again and it is read,
    # although this process still has it marked unreachable from the failover
    routes.addrs = {0: MASTER, 1: SLAVE}
    replicas.unreachable.clear(MASTER)
    asked = routes.asked
    served.clear()
    assert replicas.invoke_on_replica(GROUP, TOPIC, call, planned=MASTER) == MASTER
    assert served == [MASTER]
    assert routes.asked == asked + 1


def test_a_planned_replica_marked_unreachable_is_passed_over() -> None:
    routes = Routes({0: MASTER, 1: SLAVE})
    replicas = reads(routes)
    replicas.update_topic_route(TOPIC)
    replicas.unreachable.mark(MASTER)
    served: list[str] = []
    assert replicas.invoke_on_replica(GROUP, TOPIC, read_with(set(), served), planned=MASTER) == SLAVE
    assert served == [SLAVE]


def test_a_suggested_broker_id_wins_over_the_plan() -> None:
    routes = Routes({0: MASTER, 1: SLAVE})
    replicas = reads(routes)
    replicas.update_topic_route(TOPIC)
    served: list[str] = []
    assert replicas.invoke_on_replica(GROUP, TOPIC, read_with(set(), served), 1, planned=MASTER) == SLAVE
    assert served == [SLAVE]


def test_every_replica_down_raises_the_last_transport_error() -> None:
    routes = Routes({0: MASTER, 1: SLAVE})
    replicas = reads(routes)
    served: list[str] = []
    with pytest.raises(RemotingConnectError):
        replicas.invoke_on_replica(GROUP, TOPIC, read_with({MASTER, SLAVE}, served), planned=MASTER)
    assert served == [MASTER, SLAVE]
