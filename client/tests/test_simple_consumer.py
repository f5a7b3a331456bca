"""SimpleConsumer against a scripted POP server (a test double of the wire, not a broker).

``PopServer`` plays a NameServer and a broker that answers POP_MESSAGE, ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME with the header strings RocketMQ 5 brokers send, built with the
protocol module's own builders; a message whose handle is not acked in time comes back.  The
real-process round trip lives in integration_tests/test_simple_consumer.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.consumer.pop_rpc import PopNotSupportedError
from rocketq.client.consumer.simple import AsyncSimpleConsumer, InvalidReceiptHandleError, SimpleConsumer
from rocketq.client.errors import (
    ClientError,
    MQClientError,
    NoRouteError,
    RemotingError,
    SubscriptionGroupNotExistError,
)
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import AsyncProducer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    join_info,
    msg_offset_info_entry,
    real_topic,
    start_offset_info_entry,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

QUEUES = 2


class PopServer:
    """NameServer + POP broker double: per (topic, queue) message lists, leases by offset."""

    def __init__(self, name: str, *, pop: bool = True, batch_ack: bool = True) -> None:
        self.name = name
        self.server = RemotingServer()
        self.addr = ""
        self.topics: dict[str, list[PopServer]] = {}
        self.store: dict[tuple[str, int], list[bytes]] = {}
        self.visible_at: dict[tuple[str, int, int], int] = {}  # leased offsets -> ms
        self.acked: set[tuple[str, int, int]] = set()
        self.requests: list[RemotingCommand] = []
        self.pop_code: int | None = None  # a canned failure answer to POP_MESSAGE
        self.polls: list[int] = []
        self.pop_headers: list[PopMessageRequestHeader] = []
        self.stall_pops = 0  # pops left to answer too late (the client's answer is lost)
        codes = [
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.SEND_MESSAGE_V2,
        ]
        if pop:
            codes += [
                RequestCode.POP_MESSAGE,
                RequestCode.ACK_MESSAGE,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            ]
        if pop and batch_ack:
            codes.append(RequestCode.BATCH_ACK_MESSAGE)
        for code in codes:
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    def put(self, topic: str, queue_id: int, body: bytes, properties: str = "") -> int:
        records = self.store.setdefault((topic, queue_id), [])
        host, _, port = self.addr.rpartition(":")
        records.append(
            encode_stored_message(
                topic=topic, queue_id=queue_id, born_timestamp=1, born_host=("10.0.0.9", 5),
                store_host=(host, int(port)), body=body, queue_offset=len(records),
                physical_offset=1000 + len(records), store_timestamp=int(time.time() * 1000),
                properties=properties or f"{MessageConst.UNIQ_KEY}\x01{topic}-{queue_id}-{len(records)}\x02",
            )
        )  # fmt: skip
        return len(records) - 1

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(cmd)
        result = getattr(self, f"_on_{RequestCode(cmd.code).name.lower()}")(cmd)
        return await result if asyncio.iscoroutine(result) else result  # type: ignore[no-any-return]

    def _on_get_routeinfo_by_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        brokers = self.topics.get(cmd.ext_fields["topic"])
        if brokers is None:
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info in name server")
        route = TopicRouteData(
            [QueueData(b.name, QUEUES, QUEUES, 6) for b in brokers],
            [BrokerData("c", b.name, {0: b.addr}) for b in brokers],
        )
        return cmd.make_response(ResponseCode.SUCCESS, None, None, route.to_json())

    def _on_send_message_v2(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
        offset = self.put(hd.topic, hd.queue_id, cmd.body, hd.properties or "")
        host, _, port = self.addr.rpartition(":")
        ext = {"msgId": encode_offset_msg_id(host, int(port), offset), "queueId": str(hd.queue_id),
               "queueOffset": str(offset)}  # fmt: skip
        return cmd.make_response(ResponseCode.SUCCESS, None, ext)

    def _on_heart_beat(self, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        for consumer in data["consumerDataSet"]:
            assert consumer["consumeType"] == "CONSUME_POP"
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_unregister_client(self, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, None)

    async def _on_pop_message(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = PopMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        self.polls.append(hd.poll_time)
        self.pop_headers.append(hd)
        if self.stall_pops:  # answered after the client gave up (and leasing nothing)
            self.stall_pops -= 1
            await asyncio.sleep(1.0)
            return cmd.make_response(ResponseCode.PULL_NOT_FOUND, "too late")
        if self.pop_code is not None:
            return cmd.make_response(self.pop_code, f"canned {self.pop_code}")
        now = int(time.time() * 1000)
        found: list[tuple[str, int, int]] = []
        for topic in (f"%RETRY%{hd.consumer_group}_{hd.topic}", hd.topic):
            for qid in range(QUEUES):
                for off, _ in enumerate(self.store.get((topic, qid), [])):
                    key = (topic, qid, off)
                    if (
                        key in self.acked
                        or self.visible_at.get(key, 0) > now
                        or len(found) >= hd.max_msg_nums
                    ):
                        continue
                    found.append(key)
        if not found:
            await asyncio.sleep(min(hd.poll_time, 200) / 1000)  # a short stand-in for the long poll
            return cmd.make_response(ResponseCode.PULL_NOT_FOUND, "no message", {"popTime": "0",
                                     "invisibleTime": "0", "reviveQid": "0", "restNum": "0"})  # fmt: skip
        starts, offsets = [], []
        for topic, qid in sorted({(t, q) for t, q, _ in found}):
            offs = [o for t, q, o in found if (t, q) == (topic, qid)]
            starts.append(start_offset_info_entry(topic, qid, offs[0]))
            offsets.append(msg_offset_info_entry(topic, qid, offs))
        for key in found:
            self.visible_at[key] = now + hd.invisible_time
        ext = {
            "popTime": str(now), "invisibleTime": str(hd.invisible_time), "reviveQid": "3", "restNum": "0",
            "startOffsetInfo": join_info(starts) or "", "msgOffsetInfo": join_info(offsets) or "",
        }  # fmt: skip
        body = b"".join(self.store[(t, q)][o] for t, q, o in found)
        return cmd.make_response(ResponseCode.SUCCESS, None, ext, body)

    def _on_ack_message(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = AckMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        info = ExtraInfo.parse(hd.extra_info)
        assert info.queue_id == hd.queue_id and info.broker_name == self.name
        key = (hd.topic, hd.queue_id, hd.offset)
        if key not in self.visible_at:
            return cmd.make_response(ResponseCode.NO_MESSAGE, f"no such message {key}")
        self.acked.add(key)
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_batch_ack_message(self, cmd: RemotingCommand) -> RemotingCommand:
        body = BatchAckMessageRequestBody.decode(cmd.body)
        assert body.broker_name == self.name
        for ack in body.acks:
            topic = real_topic(ack.topic, ack.consumer_group, ack.retry_flag)
            for index in ack.ack_indexes:
                self.acked.add((topic, ack.queue_id, ack.start_offset + index))
        return cmd.make_response(ResponseCode.SUCCESS, None)

    def _on_change_message_invisibletime(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = ChangeInvisibleTimeRequestHeader.from_ext_fields(cmd.ext_fields)
        key = (hd.topic, hd.queue_id, hd.offset)
        if key not in self.visible_at:
            return cmd.make_response(ResponseCode.NO_MESSAGE, f"no such message {key}")
        now = int(time.time() * 1000)
        self.visible_at[key] = now + hd.invisible_time
        ext = {"popTime": str(now), "invisibleTime": str(hd.invisible_time), "reviveQid": "5"}
        return cmd.make_response(ResponseCode.SUCCESS, None, ext)


@asynccontextmanager
async def pop_cluster(
    n: int = 1, *, pop: bool = True, batch_ack: bool = True
) -> AsyncIterator[list[PopServer]]:
    servers = [PopServer(f"broker-{chr(97 + i)}", pop=pop, batch_ack=batch_ack) for i in range(n)]
    for s in servers:
        await s.start()
    servers[0].topics["T"] = servers
    try:
        yield servers
    finally:
        for s in servers:
            await s.server.stop(0)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def _consumer(addr: str, **kw: Any) -> AsyncSimpleConsumer:
    kw.setdefault("await_duration_s", 0.1)
    return AsyncSimpleConsumer(addr, "g", {"T": "*"}, **kw)


def test_receive_ack_and_redelivery_after_the_invisible_time() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            for i in range(3):
                a.put("T", i % QUEUES, b"m%d" % i)
            async with _consumer(a.addr) as c:
                got = await c.receive(16, invisible_duration_s=1.5)
                assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
                assert all(m.topic == "T" and m.properties[MessageConst.POP_CK] for m in got)
                assert await c.receive(16, 1.5) == []  # all leased
                await c.ack(got[0])
                await asyncio.sleep(1.7)
                again = await c.receive(16, 10)
                assert sorted(m.body for m in again) == sorted(m.body for m in got[1:])
                with pytest.raises(InvalidReceiptHandleError, match="expired"):
                    await c.ack(got[1])  # the old handle of a redelivered message
                for m in again:
                    await c.ack(m)
                assert await c.receive(16, 10) == []

    run(main())


def test_change_invisible_duration_returns_the_new_handle_that_acks() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("T", 1, b"x")
            async with _consumer(a.addr) as c:
                (m,) = await c.receive(1, 1.5)
                old = m.properties[MessageConst.POP_CK]
                new = await c.change_invisible_duration(m, 30)
                assert new != old and m.properties[MessageConst.POP_CK] == new
                info = ExtraInfo.parse(new)
                assert (info.ck_queue_offset, info.queue_offset, info.invisible_time, info.revive_qid) == (
                    0, 0, 30000, 5,
                )  # fmt: skip
                await asyncio.sleep(1.7)  # past the first invisible time: extended, still hidden
                assert await c.receive(1, 10) == []
                await c.ack(m)
                assert ("T", 1, 0) in a.acked

    run(main())


def test_retry_topic_messages_ack_with_the_real_topic() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("%RETRY%g_T", 0, b"again")
            async with _consumer(a.addr) as c:
                (m,) = await c.receive(4, 10)
                assert (
                    m.topic == "T"
                    and ExtraInfo.parse(m.properties[MessageConst.POP_CK]).retry_flag.value == "1"
                )
                await c.ack(m)
                ack = [r for r in a.requests if r.code == RequestCode.ACK_MESSAGE][-1]
                assert ack.ext_fields["topic"] == "%RETRY%g_T"
                assert ("%RETRY%g_T", 0, 0) in a.acked

    run(main())


def test_receive_rotates_brokers_and_long_polls_when_all_are_empty() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            b.put("T", 0, b"on-b")
            async with _consumer(a.addr, await_duration_s=0.2) as c:
                (m,) = await c.receive(4, 10)
                assert (
                    m.body == b"on-b"
                    and ExtraInfo.parse(m.properties[MessageConst.POP_CK]).broker_name == "broker-b"
                )
                assert a.polls == [0] and b.polls == [0]  # asked each without waiting first
                assert await c.receive(4, 10) == []
                assert a.polls[-1] == 200 or b.polls[-1] == 200  # then one long poll
                await c.ack(m)
                assert ("T", 0, 0) in b.acked

    run(main())


def test_clear_errors() -> None:
    async def main() -> None:
        async with pop_cluster(pop=False) as (a,):
            async with _consumer(a.addr) as c:
                with pytest.raises(PopNotSupportedError, match="RocketMQ 5 broker"):
                    await c.receive()
            bad_topic = AsyncSimpleConsumer(a.addr, "g", {"Nope": "*"})
            with pytest.raises(NoRouteError, match="Nope"):
                await bad_topic.start()
            await bad_topic.shutdown()
        async with pop_cluster() as (a,):
            a.pop_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            async with _consumer(a.addr) as c:
                with pytest.raises(SubscriptionGroupNotExistError):
                    await c.receive()
                with pytest.raises(MQClientError, match="max_messages"):
                    await c.receive(33)
                with pytest.raises(MQClientError, match="invisible_duration_s"):
                    await c.receive(1, 0)
                fake = MessageExt.__new__(MessageExt)
                object.__setattr__(fake, "properties", {})
                object.__setattr__(fake, "physical_offset", 0)
                object.__setattr__(fake, "store_host", ("127.0.0.1", 1))
                with pytest.raises(InvalidReceiptHandleError, match="no receipt handle"):
                    await c.ack(fake)
                object.__setattr__(fake, "properties", {MessageConst.POP_CK: "1 2 3"})
                with pytest.raises(InvalidReceiptHandleError, match="extraInfo"):
                    await c.ack(fake)
        with pytest.raises(MQClientError, match="consumer group"):
            AsyncSimpleConsumer("127.0.0.1:1", "bad group", {"T": "*"})

    run(main())


def test_blocking_twin() -> None:
    async def serve(ready: asyncio.Event, stop: asyncio.Event, out: list[PopServer]) -> None:
        async with pop_cluster() as (a,):
            a.put("T", 0, b"b1")
            out.append(a)
            ready.set()
            await stop.wait()

    loop = asyncio.new_event_loop()
    ready, stop, out = asyncio.Event(), asyncio.Event(), []  # type: ignore[var-annotated]
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop, out),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not out and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        consumer = SimpleConsumer(out[0].addr, "g", await_duration_s=0.1)
        consumer.subscribe("T", "*")
        with consumer as c:
            (m,) = c.receive(2, 10)
            assert m.body == b"b1"
            c.change_invisible_duration(m, 20)
            c.ack(m)
            assert c.receive(2, 10) == []
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def test_message_group_picks_the_queue_by_the_group_hash_and_keeps_order() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            groups = [f"order-{i}" for i in range(8)]
            async with AsyncProducer(a.addr, producer_group="pg") as producer:
                queues = list(producer.routes.selector_queues(await producer.routes.get("T")))
                for n in range(3):
                    for g in groups:
                        msg = Message("T", f"{g}:{n}".encode(), message_group=g)
                        assert msg.sharding_key == g and msg.wire_properties()[MessageConst.SHARDING_KEY] == g
                        result = await producer.send(msg)
                        assert result.message_queue == SelectMessageQueueByHash()(queues, msg, None)
                await producer.send_oneway(Message("T", b"order-0:3", message_group="order-0"))
                plain = {(await producer.send(Message("T", b"plain"))).message_queue for _ in range(6)}
                assert len(plain) > 1  # no group: the queues take turns as before
            used = {(s.name, q) for s in (a, b) for (t, q), recs in s.store.items() if t == "T" and recs}
            assert len(used) > 1  # the groups spread over queues and brokers
            for g in groups:
                bodies = [
                    rec for s in (a, b) for (t, q), recs in s.store.items() if t == "T"
                    for rec in recs if f"{g}:".encode() in rec
                ]  # fmt: skip
                sent = 4 if g == "order-0" else 3
                assert len(bodies) == sent  # all in one queue (checked above per send), in order:
                assert [int(r.split(f"{g}:".encode())[1][:1]) for r in bodies] == list(range(sent))
        with pytest.raises(ClientError, match="same"):
            Message("T", b"x", message_group="a", sharding_key="b")

    run(main())


def test_fifo_pops_are_orderly_and_a_lost_answer_is_asked_again_with_its_attempt_id() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("T", 0, b"f0")
            config = ClientConfig(mq_client_api_timeout_ms=300)
            async with _consumer(a.addr, fifo=True, config=config) as c:
                a.stall_pops = 1
                with pytest.raises(RemotingError):
                    await c.receive(4, 10)
                (m,) = await c.receive(4, 10)
                assert m.body == b"f0"
                await c.receive(4, 10)
            first, retried, fresh = a.pop_headers[:3]
            assert first.order and first.attempt_id
            assert retried.attempt_id == first.attempt_id  # the same batch is asked for again
            assert fresh.attempt_id not in (None, first.attempt_id)
            async with _consumer(a.addr) as plain:
                await plain.receive(4, 10)
            assert not a.pop_headers[-1].order and a.pop_headers[-1].attempt_id is None

    run(main())


def test_receive_passes_over_a_broker_that_is_down() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            b.put("T", 1, b"alive")
            async with _consumer(a.addr) as c:
                await a.server.stop(0)  # broker-a (also the NameServer) goes away; routes are cached
                for _ in range(2):  # whichever broker the rotation starts with
                    got = await c.receive(4, 10)
                    if got:
                        break
                assert [m.body for m in got] == [b"alive"]
                await c.ack(got[0])
                assert ("T", 1, 0) in b.acked
                await b.server.stop(0)
                with pytest.raises(RemotingError):  # every broker down: the transport error
                    await c.receive(4, 10)

    run(main())


@pytest.mark.parametrize("batch_ack", [True, False])
def test_ack_many_batches_per_broker_and_names_the_handles_it_could_not_use(batch_ack: bool) -> None:
    async def main() -> None:
        async with pop_cluster(2, batch_ack=batch_ack) as (a, b):
            for s in (a, b):
                for i in range(4):
                    s.put("T", i % QUEUES, b"%s-%d" % (s.name.encode(), i))
            s.put("%RETRY%g_T", 0, b"retried")
            async with _consumer(a.addr) as c:
                got: list[MessageExt] = []
                for _ in range(4):
                    got += await c.receive(32, 10)
                assert len(got) == 9
                expired = got[0]
                expired.properties[MessageConst.POP_CK] = str(
                    dataclasses.replace(ExtraInfo.parse(expired.properties[MessageConst.POP_CK]), pop_time=1)
                )
                with pytest.raises(InvalidReceiptHandleError, match="1 of 9 messages were not acked"):
                    await c.ack_many(got)
                assert len(a.acked) + len(b.acked) == 8
                assert ("%RETRY%g_T", 0, 0) in b.acked
                codes = [r.code for s in (a, b) for r in s.requests]
                if batch_ack:
                    assert (
                        codes.count(RequestCode.BATCH_ACK_MESSAGE) == 2
                        and RequestCode.ACK_MESSAGE not in codes
                    )
                else:
                    assert codes.count(RequestCode.ACK_MESSAGE) == 8

    run(main())
