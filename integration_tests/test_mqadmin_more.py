"""More mqadmin subcommands against a real NameServer and broker, one cluster for the module.

``queryMsgById -i id -g G -d clientId``: CONSUME_MESSAGE_DIRECTLY goes to the broker storing the
message, which hands it to the named rocketq push consumer; its listener runs on the message and
the printed ConsumeMessageDirectlyResult carries the listener's outcome (success, later, raised).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.consumer import PushConsumer
from rocketq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

TOPIC = "mqadmin-more-t"
DIRECT_GROUP = "cg-direct"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("mqadmin-more")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        yield ns, b


def test_query_msg_by_id_has_a_push_consumer_consume_the_message(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, _ = cluster
    with Producer(ns.addr, producer_group="pg-direct") as producer:
        sent = {b: producer.send(Message(TOPIC, b.encode(), tags="direct")) for b in ("ok", "later", "boom")}
    seen: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        body = msgs[0].body.decode()
        with lock:
            seen.append(f"{body}@{ctx.message_queue.broker_name}")
        if body == "boom":
            raise ValueError("listener refuses boom")
        if body == "later":
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(ns.addr, consumer_group=DIRECT_GROUP)
    consumer.subscribe(TOPIC, "nothing-matches")  # the normal flow delivers none of them
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        probe = ("consumerConnection", "-n", ns.addr, "-g", DIRECT_GROUP)
        wait_for(lambda: run_mqadmin(*probe).returncode == 0, "the consumer online", 30)
        client_id = consumer.async_consumer.instance.client_id
        done = {
            body: run_mqadmin(
                "queryMsgById", "-n", ns.addr, "-i", result.offset_msg_id, "-g", DIRECT_GROUP, "-d", client_id
            )
            for body, result in sent.items()
        }
        unique = run_mqadmin(
            "queryMsgById",
            "-n",
            ns.addr,
            "-t",
            TOPIC,
            "-i",
            sent["ok"].msg_id,
            "-g",
            DIRECT_GROUP,
            "-d",
            client_id,
        )
        offline = run_mqadmin(
            "queryMsgById",
            "-n",
            ns.addr,
            "-i",
            sent["ok"].offset_msg_id,
            "-g",
            DIRECT_GROUP,
            "-d",
            "x@nobody",
        )
        half = run_mqadmin("queryMsgById", "-n", ns.addr, "-i", sent["ok"].offset_msg_id, "-g", DIRECT_GROUP)
    finally:
        consumer.shutdown()
    for body, expected in (("ok", "CR_SUCCESS"), ("later", "CR_LATER"), ("boom", "CR_THROW_EXCEPTION")):
        assert done[body].returncode == 0, done[body].stderr
        assert re.fullmatch(
            rf"ConsumeMessageDirectlyResult \[order=false, autoCommit=true, consumeResult={expected}, "
            r"remark=(.*), spentTimeMills=\d+\]\n",
            done[body].stdout,
        ), done[body].stdout
    assert "remark=ValueError: listener refuses boom" in done["boom"].stdout
    assert "remark=None" in done["ok"].stdout
    assert unique.returncode == 0 and "consumeResult=CR_SUCCESS" in unique.stdout, unique.stderr
    assert sorted(seen) == sorted(["ok@broker-a", "later@broker-a", "boom@broker-a", "ok@broker-a"]), seen
    assert (
        offline.returncode == 1 and f"The Consumer <{DIRECT_GROUP}> <x@nobody> not online" in offline.stderr
    )
    assert half.returncode != 0 and "-d clientId" in half.stderr, half.stderr
