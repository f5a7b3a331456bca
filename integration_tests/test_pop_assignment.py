"""QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE through the client's Admin API against a real broker.

Two push consumers of one group heartbeat to the broker; the broker's PULL assignment splits the
topic's queues between them as the client-side AVG strategy does, a mode set to POP gives every
queue with queue id -1, and the mode survives a broker restart (config/messageRequestMode.json).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketq.client.errors import MQBrokerError
from rocketq.client.launcher import broker_store_dir
from rocketq.client.remoting.assignment import MessageRequestMode
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.testing import ServerProcess, create_topic, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import wait_value

BROKER, TOPIC, GROUP = "broker-a", "assign-topic", "assign-group"


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def _listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def start_consumers(ns: str, n: int) -> list[PushConsumer]:
    consumers = []
    for _ in range(n):
        c = PushConsumer(ns, consumer_group=GROUP)
        c.subscribe(TOPIC, "*")
        c.register_message_listener(_listener)
        c.start()
        consumers.append(c)
    return consumers


def client_ids(admin: Admin, n: int) -> list[str]:
    def probe() -> list[str] | None:
        ids = sorted(x.client_id for x in admin.consumer_connections(GROUP).connections)
        return ids if len(ids) == n else None

    return wait_value(probe, f"{n} consumers of {GROUP} registered")


def test_assignment_and_request_mode_through_admin(tmp_path: Path, namesrv_proc: ServerProcess) -> None:
    ns = namesrv_proc.addr
    all_queues_pop = {(MessageQueue(TOPIC, BROKER, -1), MessageRequestMode.POP)}
    with spawn_broker(tmp_path, ns, brokerName=BROKER) as broker, Admin(ns) as admin:
        create_topic(ns, TOPIC, 6)
        consumers = start_consumers(ns, 2)
        try:
            ids = client_ids(admin, 2)
            shares = []
            for cid in ids:
                body = admin.query_assignment(broker.addr, TOPIC, GROUP, cid)
                assert body.message_queue_assignments is not None
                assert {a.mode for a in body.message_queue_assignments} == {MessageRequestMode.PULL}
                shares.append([a.message_queue.queue_id for a in body.message_queue_assignments])
            assert shares == [[0, 1, 2], [3, 4, 5]]  # AVG over the sorted client ids
            assert (
                admin.query_assignment(
                    broker.addr, TOPIC, GROUP, ids[0], strategy_name="NOPE"
                ).message_queue_assignments
                is None
            )

            with pytest.raises(MQBrokerError) as refused:
                admin.set_message_request_mode(broker.addr, "no-such-topic", GROUP, MessageRequestMode.POP)
            assert refused.value.code == ResponseCode.TOPIC_NOT_EXIST
            admin.set_message_request_mode(broker.addr, TOPIC, GROUP, MessageRequestMode.POP)
            pop = admin.query_assignment(broker.addr, TOPIC, GROUP, ids[0])
            assert pop.message_queue_assignments is not None
            assert {(a.message_queue, a.mode) for a in pop.message_queue_assignments} == all_queues_pop
        finally:
            for c in consumers:
                c.shutdown()
    doc = json.loads((broker_store_dir(tmp_path, BROKER) / "config" / "messageRequestMode.json").read_text())
    assert doc["messageRequestModeMap"][TOPIC][GROUP] == {
        "consumerGroup": GROUP,
        "mode": "POP",
        "popShareQueueNum": 0,
        "topic": TOPIC,
    }
    with spawn_broker(tmp_path, ns, brokerName=BROKER) as broker, Admin(ns) as admin:
        consumers = start_consumers(ns, 1)
        try:
            (cid,) = client_ids(admin, 1)
            again = admin.query_assignment(broker.addr, TOPIC, GROUP, cid)
            assert again.message_queue_assignments is not None
            assert {(a.message_queue, a.mode) for a in again.message_queue_assignments} == all_queues_pop
        finally:
            for c in consumers:
                c.shutdown()
