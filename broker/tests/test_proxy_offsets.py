"""The status codes of mqproxy's GetOffset / UpdateOffset / QueryOffset (rocketq.proxy.offsets)
against a fake client instance: the answers a fresh broker never gives (no committed offset, a
broker error) and the checks made before any broker is asked."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from rocketq.client.errors import MQBrokerError, NoRouteError
from rocketq.client.instance import ClientInstance
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.proxy.convert import Refusal
from rocketq.proxy.offsets import get_offset, query_offset, update_offset
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb


class FakeApi:
    def __init__(self) -> None:
        self.committed: dict[tuple[str, str, int], int] = {}
        self.max_offset = 10
        self.calls: list[str] = []

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int | None:
        self.calls.append("query")
        return self.committed.get((group, topic, queue_id))

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        self.calls.append("update")
        self.committed[(group, topic, queue_id)] = offset

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        self.calls.append("max")
        return self.max_offset

    async def get_min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        raise MQBrokerError.for_code(ResponseCode.SYSTEM_BUSY, "busy", addr)


class FakeInstance:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.route = TopicRouteData(
            queue_datas=[QueueData("broker-a", 2, 2)],
            broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
        )

    async def get_route(self, topic: str) -> TopicRouteData:
        if topic != "t":
            raise NoRouteError(topic)
        return self.route

    async def find_master_addr_or_refresh(self, broker_name: str, topic: str) -> str:
        return "127.0.0.1:10911"


def _mq(topic: str = "t", broker: str = "broker-a", queue_id: int = 1) -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id, broker=pb.Broker(name=broker))


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_get_offset_without_a_committed_offset_is_offset_not_found_then_update_sets_it() -> None:
    fake = FakeInstance()
    instance = cast(ClientInstance, fake)
    get = spb.GetOffsetRequest(group=pb.Resource(name="g"), message_queue=_mq())
    missing = _run(get_offset(instance, get))
    assert isinstance(missing, Refusal) and missing.code == pb.Code.OFFSET_NOT_FOUND
    assert "UpdateOffset" in missing.message
    update = spb.UpdateOffsetRequest(group=pb.Resource(name="g"), message_queue=_mq(), offset=7)
    assert _run(update_offset(instance, update)) is None
    assert _run(get_offset(instance, get)) == 7 and fake.api.committed == {("g", "t", 1): 7}


def test_bad_queues_offsets_and_groups_are_refused_before_the_broker_is_asked() -> None:
    fake = FakeInstance()
    instance = cast(ClientInstance, fake)
    cases = [
        (_mq(queue_id=2), 0, pb.Code.BAD_REQUEST),  # the broker has queues 0..1
        (_mq(broker="broker-b"), 0, pb.Code.BAD_REQUEST),
        (_mq(topic="other"), 0, pb.Code.TOPIC_NOT_FOUND),
        (_mq(topic=""), 0, pb.Code.ILLEGAL_TOPIC),
        (_mq(), -1, pb.Code.ILLEGAL_OFFSET),
    ]
    for mq, offset, code in cases:
        request = spb.UpdateOffsetRequest(group=pb.Resource(name="g"), message_queue=mq, offset=offset)
        refused = _run(update_offset(instance, request))
        assert isinstance(refused, Refusal) and refused.code == code, (mq, refused)
    assert fake.api.calls == []
    past_end = spb.UpdateOffsetRequest(group=pb.Resource(name="g"), message_queue=_mq(), offset=11)
    refused = _run(update_offset(instance, past_end))
    assert isinstance(refused, Refusal) and refused.code == pb.Code.ILLEGAL_OFFSET
    assert fake.api.calls == ["max"] and fake.api.committed == {}
    bad_group = spb.GetOffsetRequest(group=pb.Resource(name="a b"), message_queue=_mq())
    refused = _run(get_offset(instance, bad_group))
    assert isinstance(refused, Refusal) and refused.code == pb.Code.ILLEGAL_CONSUMER_GROUP


def test_query_offset_policies_and_broker_errors() -> None:
    instance = cast(ClientInstance, FakeInstance())
    end = spb.QueryOffsetRequest(message_queue=_mq(), query_offset_policy=pb.QueryOffsetPolicy.END)
    assert _run(query_offset(instance, end)) == 10
    busy = spb.QueryOffsetRequest(message_queue=_mq(), query_offset_policy=pb.QueryOffsetPolicy.BEGINNING)
    refused = _run(query_offset(instance, busy))
    assert isinstance(refused, Refusal) and refused.code == pb.Code.TOO_MANY_REQUESTS
    no_time = spb.QueryOffsetRequest(message_queue=_mq(), query_offset_policy=pb.QueryOffsetPolicy.TIMESTAMP)
    refused = _run(query_offset(instance, no_time))
    assert isinstance(refused, Refusal) and refused.code == pb.Code.BAD_REQUEST
