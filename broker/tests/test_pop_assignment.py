"""QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE: Java-shaped bodies, Java's allocation, the mode file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest

from rocketq.broker.client_manager import ClientChannelInfo, ConsumerData
from rocketq.broker.config_loader import build_store_config, load_broker_config
from rocketq.broker.pop.assignment import (
    MESSAGE_REQUEST_MODE_JSON,
    STRATEGIES,
    AssignmentProcessor,
    MessageRequestModeManager,
    allocate_for_pop,
)
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.testing import SMALL_STORE_CONF
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import MessageQueue, TopicConfig
from rocketq.server import Channel

TOPIC, GROUP, BROKER = "TopicA", "GroupA", "broker-a"

# -- bodies as fastjson writes them ------------------------------------------------------------------

JAVA_QUERY = (
    b'{"clientId":"127.0.0.1@1","consumerGroup":"GroupA","messageModel":"CLUSTERING",'
    b'"strategyName":"AVG","topic":"TopicA"}'
)
JAVA_RESPONSE = (
    b'{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","queueId":-1,"topic":"TopicA"},'
    b'"mode":"POP"}]}'
)
JAVA_SET_MODE = b'{"consumerGroup":"GroupA","mode":"POP","popShareQueueNum":1,"topic":"TopicA"}'


def test_bodies_round_trip_java_json() -> None:
    query = QueryAssignmentRequestBody.decode(JAVA_QUERY)
    assert query == QueryAssignmentRequestBody(TOPIC, GROUP, "127.0.0.1@1", "AVG", "CLUSTERING")
    assert query.encode() == JAVA_QUERY
    response = QueryAssignmentResponseBody.decode(JAVA_RESPONSE)
    assert response.message_queue_assignments == (
        MessageQueueAssignment(MessageQueue(TOPIC, BROKER, -1), MessageRequestMode.POP),
    )
    assert response.encode() == JAVA_RESPONSE
    assert QueryAssignmentResponseBody.decode(b"{}").message_queue_assignments is None
    mode = SetMessageRequestModeRequestBody.decode(JAVA_SET_MODE)
    assert mode == SetMessageRequestModeRequestBody(TOPIC, GROUP, MessageRequestMode.POP, 1)
    assert mode.encode() == JAVA_SET_MODE
    # Java's field default: a body without mode means PULL
    assert (
        SetMessageRequestModeRequestBody.decode(b'{"consumerGroup":"g","topic":"t"}').mode
        is MessageRequestMode.PULL
    )


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"topic":"t","consumerGroup":"g"}',
        b'{"topic":"t","consumerGroup":"g","clientId":"c","messageModel":"X"}',
    ],
)
def test_bad_query_bodies_are_named(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        QueryAssignmentRequestBody.decode(body)


def test_bad_mode_is_named() -> None:
    with pytest.raises(ProtocolError, match="PULL or POP"):
        SetMessageRequestModeRequestBody.decode(b'{"consumerGroup":"g","mode":"PUSH","topic":"t"}')


# -- Java's allocate4Pop --------------------------------------------------------------------------------

MQS = [MessageQueue(TOPIC, BROKER, q) for q in range(8)]
CIDS = ["c0", "c1", "c2", "c3"]


def test_pop_share_all_gives_every_queue_with_queue_id_minus_one() -> None:
    avg = STRATEGIES["AVG"]
    for share in (-1, 0, 3, 5):  # <= 0 or >= consumers - 1
        got = allocate_for_pop(avg, GROUP, "c1", MQS, CIDS, share)
        assert got == [MessageQueue(TOPIC, BROKER, -1)] * 8


def test_pop_share_adds_the_following_consumers_queues() -> None:
    avg = STRATEGIES["AVG"]
    assert allocate_for_pop(avg, GROUP, "c1", MQS, CIDS, 1) == MQS[2:6]  # own 2,3 then c2's 4,5
    assert allocate_for_pop(avg, GROUP, "c3", MQS, CIDS, 2) == MQS[6:8] + MQS[0:4]  # wraps to c0, c1


def test_pop_with_more_consumers_than_queues_gives_each_one_queue() -> None:
    cids = [f"c{i}" for i in range(5)]
    two = MQS[:2]
    got = [allocate_for_pop(STRATEGIES["AVG"], GROUP, c, two, cids, 1) for c in cids]
    assert got == [[two[0]], [two[1]], [two[0]], [two[1]], [two[0]]]
    assert allocate_for_pop(STRATEGIES["AVG"], GROUP, "stranger", two, cids, 1) == []


# -- the processor over a real context ------------------------------------------------------------


def run(
    tmp_path: Path, scenario: Callable[[BrokerContext, AssignmentProcessor], Awaitable[None]], **conf: str
) -> None:
    cfg = load_broker_config(
        None,
        overrides={
            **SMALL_STORE_CONF,
            "storePathRootDir": str(tmp_path / "store"),
            "brokerName": BROKER,
            **conf,
        },
    )

    async def main() -> None:
        store = MessageStore(build_store_config(cfg))
        await asyncio.to_thread(store.start)
        ctx = build_context(cfg, store, asyncio.get_running_loop())
        ctx.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=8, write_queue_nums=8))
        for cid in ("c2", "c0", "c1"):
            ctx.consumers.register(
                ConsumerData(group_name=GROUP),
                ClientChannelInfo(channel=cast(Channel, object()), client_id=cid),
            )
        modes = MessageRequestModeManager(str(tmp_path / MESSAGE_REQUEST_MODE_JSON))
        try:
            await scenario(ctx, AssignmentProcessor(ctx, modes))
        finally:
            ctx.hold.shutdown()
            for ex in (ctx.send_executor, ctx.pull_executor, ctx.query_executor):
                ex.shutdown(wait=True)
            await asyncio.to_thread(store.shutdown)

    asyncio.run(main())


async def query(p: AssignmentProcessor, client_id: str, strategy: str = "AVG", topic: str = TOPIC) -> bytes:
    body = QueryAssignmentRequestBody(topic, GROUP, client_id, strategy).encode()
    response = await p.query_assignment(
        RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, body=body), cast(Channel, None)
    )
    assert response.code == ResponseCode.SUCCESS
    return response.body


async def set_mode(p: AssignmentProcessor, body: bytes) -> RemotingCommand:
    return await p.set_message_request_mode(
        RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body), cast(Channel, None)
    )


def queue_ids(body: bytes) -> list[int]:
    return [a["messageQueue"]["queueId"] for a in json.loads(body)["messageQueueAssignments"]]


def test_pull_mode_allocates_by_strategy_over_sorted_client_ids(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, p: AssignmentProcessor) -> None:
        assert queue_ids(await query(p, "c0")) == [0, 1, 2]
        assert queue_ids(await query(p, "c2")) == [6, 7]
        assert queue_ids(await query(p, "c1", "AVG_BY_CIRCLE")) == [1, 4, 7]
        assert json.loads(await query(p, "c1"))["messageQueueAssignments"][0]["mode"] == "PULL"
        assert await query(p, "c1", "CONSISTENT_HASH") == b"{}"  # not a strategy Java's broker registers
        assert await query(p, "c1", topic="NoSuchTopic") == b"{}"
        assert queue_ids(await query(p, "stranger")) == []

    run(tmp_path, scenario)


def test_default_pop_mode_from_broker_config(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, p: AssignmentProcessor) -> None:
        body = json.loads(await query(p, "c0"))
        assert body["messageQueueAssignments"] == [
            {"messageQueue": {"brokerName": BROKER, "queueId": -1, "topic": TOPIC}, "mode": "POP"}
        ]
        # a retry topic is pulled whatever the default
        ctx.topics.update(TopicConfig(topic_name="%RETRY%" + GROUP, read_queue_nums=1, write_queue_nums=1))
        retry = json.loads(await query(p, "c0", topic="%RETRY%" + GROUP))
        assert [a["mode"] for a in retry["messageQueueAssignments"]] == ["PULL"]

    run(tmp_path, scenario, defaultMessageRequestMode="pop")


def test_server_load_balancer_off_gives_every_queue(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, p: AssignmentProcessor) -> None:
        assert queue_ids(await query(p, "c1")) == list(range(8))

    run(tmp_path, scenario, serverLoadBalancerEnable="false")


def test_set_mode_is_persisted_in_java_shape_and_used(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, p: AssignmentProcessor) -> None:
        assert (
            await set_mode(p, JAVA_SET_MODE.replace(b"GroupA", GROUP.encode()))
        ).code == ResponseCode.SUCCESS
        # popShareQueueNum 1 of 3 consumers: own share and the next consumer's
        assert queue_ids(await query(p, "c0")) == [0, 1, 2, 3, 4, 5]
        assert queue_ids(await query(p, "c2")) == [0, 1, 2, 6, 7]
        doc = json.loads((tmp_path / MESSAGE_REQUEST_MODE_JSON).read_text())
        assert doc == {
            "messageRequestModeMap": {
                TOPIC: {GROUP: {"consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 1, "topic": TOPIC}}
            }
        }
        reloaded = MessageRequestModeManager(str(tmp_path / MESSAGE_REQUEST_MODE_JSON))
        reloaded.load()
        assert reloaded.get(TOPIC, GROUP) == SetMessageRequestModeRequestBody(
            TOPIC, GROUP, MessageRequestMode.POP, 1
        )

    run(tmp_path, scenario)


def test_set_mode_refusals(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, p: AssignmentProcessor) -> None:
        retry = SetMessageRequestModeRequestBody("%RETRY%x", GROUP).encode()
        assert (await set_mode(p, retry)).code == ResponseCode.NO_PERMISSION
        missing = SetMessageRequestModeRequestBody("NoSuchTopic", GROUP).encode()
        response = await set_mode(p, missing)
        assert (response.code, response.remark) == (
            ResponseCode.TOPIC_NOT_EXIST,
            "topic[NoSuchTopic] not exist",
        )
        bad = await set_mode(p, b"{")
        assert bad.code == ResponseCode.SYSTEM_ERROR and "SetMessageRequestModeRequestBody" in (
            bad.remark or ""
        )
        assert not (tmp_path / MESSAGE_REQUEST_MODE_JSON).exists()

    run(tmp_path, scenario)


def test_a_corrupt_mode_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / MESSAGE_REQUEST_MODE_JSON
    path.write_text('{"messageRequestModeMap":{"t":{"g":{"mode":"PUSH","topic":"t","consumerGroup":"g"}}}}')
    with pytest.raises(ProtocolError, match="move it away"):
        MessageRequestModeManager(str(path)).load()
