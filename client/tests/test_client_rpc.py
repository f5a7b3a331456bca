"""MQClientAPI, producer and consumers against tiny in-test remoting servers with canned answers.

``FakeBroker`` is one asyncio RemotingServer that plays a NameServer (routes of the topics it
knows, pointing at the fake brokers) and a broker (stores sent messages per queue in memory,
serves pulls, offsets, heartbeats and the consumer list).  It is a test double for the RPC
layer, not a broker: the real-process tests live in integration_tests/.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from rocketq.client.api import BlockingMQClientAPI, MQClientAPI, PullSysFlag
from rocketq.client.errors import (
    MessageFormatError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    RemotingError,
    TopicNotExistError,
)
from rocketq.client.model import Message, MessageExt, PullStatus, SendStatus
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.batch import decode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import SysFlag, encode_stored_message
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.properties import decode_properties
from rocketq.client.remoting.route import BrokerData, MessageQueue, QueueData, TopicRouteData
from rocketq.client.testing import async_wait_for, wait_for
from rocketq.client.transport.aio import Channel
from rocketq.server import RemotingServer

Handler = Callable[[RemotingCommand], Awaitable[RemotingCommand | None] | RemotingCommand | None]


class FakeBroker:
    """NameServer + broker double: messages in memory, canned send codes."""

    def __init__(self, name: str = "broker-a", queues: int = 4) -> None:
        self.name = name
        self.queues = queues
        self.server = RemotingServer()
        self.addr = ""
        self.topics: dict[str, dict[str, FakeBroker]] = {}  # topic -> {broker name: broker}
        self.store: dict[tuple[str, int], list[bytes]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.requests: list[RemotingCommand] = []
        self.send_codes: list[int] = []  # popped per send; empty = SUCCESS
        self.clients: dict[str, set[str]] = {}
        self.overrides: dict[int, Handler] = {}
        for code in (
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.PULL_MESSAGE,
            RequestCode.LITE_PULL_MESSAGE,
            RequestCode.QUERY_CONSUMER_OFFSET,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            RequestCode.GET_MAX_OFFSET,
            RequestCode.GET_MIN_OFFSET,
            RequestCode.HEART_BEAT,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            RequestCode.LOCK_BATCH_MQ,
            RequestCode.UNLOCK_BATCH_MQ,
            RequestCode.CHECK_CLIENT_CONFIG,
        ):
            self.server.register(code, self._handle)

    async def start(self) -> None:
        host, port = await self.server.start()
        self.addr = f"{host}:{port}"

    def add_topic(self, topic: str, *brokers: FakeBroker) -> None:
        self.topics[topic] = {b.name: b for b in brokers}

    async def _handle(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(cmd)
        override = self.overrides.get(cmd.code)
        if override is not None:
            result = override(cmd)
            return await result if asyncio.iscoroutine(result) else result  # type: ignore[return-value]
        method = getattr(self, f"_on_{RequestCode(cmd.code).name.lower()}")
        result = method(cmd)
        return await result if asyncio.iscoroutine(result) else result  # type: ignore[no-any-return]

    def _ok(
        self,
        cmd: RemotingCommand,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        code: int = ResponseCode.SUCCESS,
    ) -> RemotingCommand:
        return cmd.make_response(code, None, ext, body)

    def _on_get_routeinfo_by_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        brokers = self.topics.get(cmd.ext_fields["topic"])
        if brokers is None:
            return cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {cmd.ext_fields['topic']}",
            )
        route = TopicRouteData(
            [QueueData(b.name, b.queues, b.queues, 6) for b in brokers.values()],
            [BrokerData("c", b.name, {0: b.addr}) for b in brokers.values()],
        )
        return self._ok(cmd, body=route.to_json())

    def _store(self, topic: str, qid: int, body: bytes, props: str, flag: int, sys_flag: int) -> int:
        records = self.store.setdefault((topic, qid), [])
        host, _, port = self.addr.rpartition(":")
        records.append(
            encode_stored_message(
                topic=topic,
                queue_id=qid,
                born_timestamp=1,
                born_host=("10.0.0.9", 5),
                store_host=(host, int(port)),
                body=body,
                queue_offset=len(records),
                physical_offset=1000 + len(records),
                flag=flag,
                sys_flag=sys_flag,
                store_timestamp=int(time.time() * 1000),
                properties=props,
            )
        )
        return len(records) - 1

    def _on_send_message_v2(self, cmd: RemotingCommand) -> RemotingCommand:
        code = self.send_codes.pop(0) if self.send_codes else ResponseCode.SUCCESS
        if code not in (0, 10, 11, 12):
            return cmd.make_response(code, f"canned failure {code}")
        hd = h.SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
        qid = hd.queue_id
        if hd.batch:
            offsets = [
                self._store(hd.topic, qid, m.body, _props(m.properties), m.flag, 0)
                for m in decode_batch(cmd.body)
            ]
            first = offsets[0]
        else:
            first = self._store(hd.topic, qid, cmd.body, hd.properties or "", hd.flag, hd.sys_flag)
        host, _, port = self.addr.rpartition(":")
        ext = {
            "msgId": encode_offset_msg_id(host, int(port), first),
            "queueId": str(qid),
            "queueOffset": str(first),
        }
        return self._ok(cmd, ext, code=code)

    _on_send_batch_message = _on_send_message_v2

    async def _on_pull_message(self, cmd: RemotingCommand) -> RemotingCommand:
        hd = h.PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        if hd.sys_flag & PullSysFlag.SUSPEND and hd.queue_offset >= len(
            self.store.get((hd.topic, hd.queue_id), [])
        ):
            await asyncio.sleep(0.05)  # a short stand-in for the broker's long poll
        if hd.sys_flag & PullSysFlag.COMMIT_OFFSET:
            self.offsets[(hd.consumer_group, hd.topic, hd.queue_id)] = hd.commit_offset
        records = self.store.get((hd.topic, hd.queue_id), [])
        ext = {"suggestWhichBrokerId": "0", "minOffset": "0", "maxOffset": str(len(records))}
        if hd.queue_offset > len(records):
            return self._ok(
                cmd, {**ext, "nextBeginOffset": str(len(records))}, code=ResponseCode.PULL_OFFSET_MOVED
            )
        found = records[hd.queue_offset : hd.queue_offset + hd.max_msg_nums]
        if not found:
            return self._ok(
                cmd, {**ext, "nextBeginOffset": str(hd.queue_offset)}, code=ResponseCode.PULL_NOT_FOUND
            )
        return self._ok(cmd, {**ext, "nextBeginOffset": str(hd.queue_offset + len(found))}, b"".join(found))

    _on_lite_pull_message = _on_pull_message

    def _on_query_consumer_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        e = cmd.ext_fields
        off = self.offsets.get((e["consumerGroup"], e["topic"], int(e["queueId"])))
        if off is None:
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, "Not found")
        return self._ok(cmd, {"offset": str(off)})

    def _on_update_consumer_offset(self, cmd: RemotingCommand) -> RemotingCommand | None:
        e = cmd.ext_fields
        self.offsets[(e["consumerGroup"], e["topic"], int(e["queueId"]))] = int(e["commitOffset"])
        return None if cmd.is_oneway else self._ok(cmd)

    def _on_get_max_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        e = cmd.ext_fields
        return self._ok(cmd, {"offset": str(len(self.store.get((e["topic"], int(e["queueId"])), [])))})

    def _on_get_min_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ok(cmd, {"offset": "0"})

    def _on_search_offset_by_timestamp(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ok(cmd, {"offset": "1"})

    def _on_heart_beat(self, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        for consumer in data["consumerDataSet"]:
            self.clients.setdefault(consumer["groupName"], set()).add(data["clientID"])
        return self._ok(cmd)

    def _on_get_consumer_list_by_group(self, cmd: RemotingCommand) -> RemotingCommand:
        ids = sorted(self.clients.get(cmd.ext_fields["consumerGroup"], set()))
        return self._ok(cmd, body=json.dumps({"consumerIdList": ids}).encode())

    def _on_unregister_client(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ok(cmd)

    def _on_consumer_send_msg_back(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ok(cmd)

    def _on_lock_batch_mq(self, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        return self._ok(cmd, body=json.dumps({"lockOKMQSet": data["mqSet"]}).encode())

    def _on_unlock_batch_mq(self, cmd: RemotingCommand) -> RemotingCommand | None:
        return None if cmd.is_oneway else self._ok(cmd)

    def _on_check_client_config(self, cmd: RemotingCommand) -> RemotingCommand:
        return self._ok(cmd)


def _props(props: dict[str, str]) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


@asynccontextmanager
async def cluster(n: int = 1, topics: tuple[str, ...] = ("T", "TBW102")) -> AsyncIterator[list[FakeBroker]]:
    brokers = [FakeBroker(f"broker-{chr(97 + i)}") for i in range(n)]
    for b in brokers:
        await b.start()
    for topic in topics:
        brokers[0].add_topic(topic, *brokers)
    try:
        yield brokers
    finally:
        for b in brokers:
            await b.server.stop(0)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


# ---------------------------------------------------------------------------------------- RPC layer


def test_route_and_no_route_error() -> None:
    async def scenario() -> None:
        async with cluster(2) as (ns, b):
            api = MQClientAPI(f"127.0.0.1:1;{ns.addr}")  # the first NameServer is dead: fail over
            try:
                route = await api.get_topic_route("T")
                assert {bd.broker_name: bd.master_addr for bd in route.broker_datas} == {
                    "broker-a": ns.addr,
                    "broker-b": b.addr,
                }
                with pytest.raises(NoRouteError) as err:
                    await api.get_topic_route("Nope")
                text = str(err.value)
                assert "No route info of this topic: Nope" in text and "';'" in text
                assert all(r.version >= 401 for r in ns.requests)
            finally:
                await api.close()

    run(scenario())


def test_namesrv_address_list_is_validated() -> None:
    with pytest.raises(MQClientError, match="separated by ';'"):
        MQClientAPI("a:1,b:2")
    with pytest.raises(MQClientError):
        MQClientAPI(" ; ")


def test_send_status_mapping_and_errors_carry_code_and_remark() -> None:
    async def scenario() -> None:
        async with cluster() as (ns,):
            api = MQClientAPI(ns.addr)
            msg = Message("T", b"hello", tags="A")
            header = h.SendMessageRequestHeaderV2(
                producer_group="pg",
                topic="T",
                default_topic="TBW102",
                default_topic_queue_nums=4,
                queue_id=1,
                sys_flag=0,
                born_timestamp=1,
                flag=0,
                properties="UNIQ_KEY\x01ABC\x02",
            )
            msg.properties["UNIQ_KEY"] = "ABC"
            try:
                result = await api.send_message(ns.addr, "broker-a", msg, header, 3000)
                assert result.send_status is SendStatus.SEND_OK and result.msg_id == "ABC"
                assert result.message_queue == MessageQueue("T", "broker-a", 1) and result.queue_offset == 0
                assert len(result.offset_msg_id) == 32
                ns.send_codes = [ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.TOPIC_NOT_EXIST]
                assert (
                    await api.send_message(ns.addr, "broker-a", msg, header, 3000)
                ).send_status is SendStatus.FLUSH_DISK_TIMEOUT
                with pytest.raises(TopicNotExistError) as err:
                    await api.send_message(ns.addr, "broker-a", msg, header, 3000)
                assert err.value.code == 17 and err.value.remark == "canned failure 17"
                assert err.value.broker_addr == ns.addr and err.value.retriable
                assert ns.requests[-1].code == RequestCode.SEND_MESSAGE_V2
            finally:
                await api.close()

    run(scenario())


def test_pull_statuses_lazy_decoding_and_tag_filter() -> None:
    async def scenario() -> None:
        async with cluster() as (ns,):
            for i, tag in enumerate(["A", "B", "A"]):
                ns._store("T", 0, f"m{i}".encode(), f"TAGS\x01{tag}\x02", 0, 0)
            ns._store("T", 0, zlib.compress(b"big" * 100), "TAGS\x01A\x02", 0, int(SysFlag.COMPRESSED))
            api = MQClientAPI(ns.addr)

            def header(offset: int, flag: int = PullSysFlag.SUBSCRIPTION) -> h.PullMessageRequestHeader:
                return h.PullMessageRequestHeader(
                    consumer_group="g",
                    topic="T",
                    queue_id=0,
                    queue_offset=offset,
                    max_msg_nums=32,
                    sys_flag=flag,
                    commit_offset=0,
                    suspend_timeout_millis=0,
                    subscription="A",
                    sub_version=0,
                    expression_type="TAG",
                )

            try:
                found = await api.pull_message(ns.addr, header(0), 3000, tags_filter={"A"})
                assert (
                    found.status is PullStatus.FOUND
                    and found.next_begin_offset == 4
                    and found.max_offset == 4
                )
                assert [m.body for m in found.messages] == [b"m0", b"m2", b"big" * 100]
                assert found.messages[0].properties["MAX_OFFSET"] == "4"
                none = await api.pull_message(ns.addr, header(4), 3000)
                assert none.status is PullStatus.NO_NEW_MSG and none.messages == []
                moved = await api.pull_message(ns.addr, header(99), 3000)
                assert moved.status is PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset == 4
                lite = await api.pull_message(ns.addr, header(0, PullSysFlag.LITE_PULL), 3000)
                assert (
                    lite.status is PullStatus.FOUND and ns.requests[-1].code == RequestCode.LITE_PULL_MESSAGE
                )
            finally:
                await api.close()

    run(scenario())


def test_lite_pull_falls_back_to_pull_message() -> None:
    async def scenario() -> None:
        async with cluster() as (ns,):
            ns.overrides[RequestCode.LITE_PULL_MESSAGE] = lambda c: c.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 361 not supported"
            )
            api = MQClientAPI(ns.addr)
            hd = h.PullMessageRequestHeader(
                consumer_group="g",
                topic="T",
                queue_id=0,
                queue_offset=0,
                max_msg_nums=1,
                sys_flag=int(PullSysFlag.LITE_PULL),
                commit_offset=0,
                suspend_timeout_millis=0,
                sub_version=0,
            )
            try:
                assert (await api.pull_message(ns.addr, hd, 3000)).status is PullStatus.NO_NEW_MSG
                assert ns.requests[-1].code == RequestCode.PULL_MESSAGE
            finally:
                await api.close()

    run(scenario())


def test_offsets_rpcs_and_oneway_commit() -> None:
    async def scenario() -> None:
        async with cluster() as (ns,):
            api = MQClientAPI(ns.addr)
            try:
                assert await api.query_consumer_offset(ns.addr, "g", "T", 0) is None
                await api.update_consumer_offset(ns.addr, "g", "T", 0, 42)
                assert await api.query_consumer_offset(ns.addr, "g", "T", 0) == 42
                await api.update_consumer_offset(ns.addr, "g", "T", 0, 43, oneway=True)
                for _ in range(100):
                    if ns.offsets[("g", "T", 0)] == 43:
                        break
                    await asyncio.sleep(0.01)
                assert ns.offsets[("g", "T", 0)] == 43
                assert await api.get_max_offset(ns.addr, "T", 0) == 0
                assert await api.search_offset(ns.addr, "T", 0, 123) == 1
                assert await api.lock_batch_mq(ns.addr, "g", [MessageQueue("T", "broker-a", 2)]) == {
                    MessageQueue("T", "broker-a", 2)
                }
                with pytest.raises(MQBrokerError) as err:
                    await api.get_earliest_msg_storetime(ns.addr, "T", 0)
                assert err.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            finally:
                await api.close()

    run(scenario())


def test_transport_errors_surface_as_remoting_errors() -> None:
    async def scenario() -> None:
        api = MQClientAPI("127.0.0.1:1")
        try:
            with pytest.raises(RemotingError):
                await api.get_max_offset("127.0.0.1:1", "T", 0)
        finally:
            await api.close()

    run(scenario())


def test_blocking_api_delegates_to_the_loop() -> None:
    from rocketq.client.loop import BackgroundLoop

    loop = BackgroundLoop("fake-servers")
    try:
        ns = FakeBroker()
        loop.run(ns.start())
        ns.add_topic("T", ns)
        with BlockingMQClientAPI(ns.addr) as api:
            assert api.get_topic_route("T").master_addr("broker-a") == ns.addr
            assert api.query_consumer_offset(ns.addr, "g", "T", 1) is None
            api.update_consumer_offset(ns.addr, "g", "T", 1, 7)
            assert api.query_consumer_offset(ns.addr, "g", "T", 1) == 7
            assert api.client_id.count("@") == 1
        loop.run(ns.server.stop(0))
    finally:
        loop.stop()


# ---------------------------------------------------------------------------------------- producer


def test_producer_sends_retries_on_another_broker_and_compresses() -> None:
    from rocketq.client.producer import AsyncProducer, SelectMessageQueueByHash

    async def scenario() -> None:
        async with cluster(2) as (a, b):
            async with AsyncProducer(a.addr, producer_group="pg", send_latency_fault_enable=True) as producer:
                first = await producer.send(Message("T", b"one", tags="A", keys="k1"))
                assert first.send_status is SendStatus.SEND_OK and len(first.msg_id) == 32
                stored_on = a if first.message_queue.broker_name == "broker-a" else b
                other = b if stored_on is a else a
                # the next round-robin queue's broker fails with a retriable code: retried elsewhere
                stored_on.send_codes = [ResponseCode.SYSTEM_BUSY] * 8
                other.send_codes = [ResponseCode.SYSTEM_BUSY] * 8
                with pytest.raises(MQBrokerError) as err:
                    await producer.send(Message("T", b"two"))
                assert err.value.code == ResponseCode.SYSTEM_BUSY
                assert "Send [3] times" in "".join(getattr(err.value, "__notes__", []))
                stored_on.send_codes, other.send_codes = [], []
                producer.fault_strategy.fault_tolerance = type(producer.fault_strategy.fault_tolerance)()
                a.send_codes = [ResponseCode.SYSTEM_ERROR]
                b.send_codes = [ResponseCode.SYSTEM_ERROR]
                ok = await producer.send(Message("T", b"three"))  # one broker fails, the other stores
                assert ok.send_status is SendStatus.SEND_OK
                a.send_codes = [ResponseCode.MESSAGE_ILLEGAL]
                b.send_codes = [ResponseCode.MESSAGE_ILLEGAL]
                with pytest.raises(MQBrokerError) as illegal:
                    await producer.send(Message("T", b"four"))
                assert illegal.value.code == 13 and not illegal.value.retriable
                a.send_codes, b.send_codes = [], []
                big = await producer.send(
                    Message("T", b"z" * 5000), selector=SelectMessageQueueByHash(), arg="abc"
                )
                assert big.message_queue == MessageQueue("T", "broker-a", 2)  # 96354 % 8 of a-0..3, b-0..3
                sent = [r for r in a.requests if r.code == RequestCode.SEND_MESSAGE_V2]
                last = h.SendMessageRequestHeaderV2.from_ext_fields(sent[-1].ext_fields)
                assert last.sys_flag == SysFlag.COMPRESSED and zlib.decompress(sent[-1].body) == b"z" * 5000
                props = decode_properties(last.properties or "")
                assert props["WAIT"] == "true" and len(props["UNIQ_KEY"]) == 32

    run(scenario())


def test_producer_lz4_batch_oneway_async_and_auto_create() -> None:
    from rocketq.client.config import CompressionType
    from rocketq.client.producer import AsyncProducer

    async def scenario() -> None:
        async with cluster(1) as (a,):
            async with AsyncProducer(
                a.addr, producer_group="pg", compression_type=CompressionType.LZ4
            ) as producer:
                await producer.send(Message("T", b"y" * 5000), queue=MessageQueue("T", "broker-a", 3))
                hd = h.SendMessageRequestHeaderV2.from_ext_fields(a.requests[-1].ext_fields)
                assert hd.sys_flag == SysFlag.COMPRESSED | (1 << 8) and hd.queue_id == 3
                results = await producer.send_batch([Message("T", f"b{i}".encode()) for i in range(3)])
                assert len(results) == 1 and len(results[0].msg_id.split(",")) == 3
                assert a.requests[-1].code == RequestCode.SEND_BATCH_MESSAGE
                await producer.send_oneway(Message("T", b"ow"))
                done: list[Any] = []
                task = producer.send_async(Message("T", b"as"), on_success=done.append)
                assert (await task).send_status is SendStatus.SEND_OK
                await asyncio.sleep(0)
                assert done and done[0].send_status is SendStatus.SEND_OK
                auto = await producer.send(Message("NewTopic", b"x"))  # no route: TBW102 template
                assert auto.message_queue.topic == "NewTopic" and auto.message_queue.queue_id < 4
                with pytest.raises(MQClientError):
                    await producer.send(Message("bad topic!", b"x"))
                with pytest.raises(MQClientError):
                    await producer.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
            for _ in range(50):
                if sum(len(v) for v in a.store.values()) >= 7:
                    break
                await asyncio.sleep(0.01)
            assert sum(len(v) for v in a.store.values()) == 7

    run(scenario())


# ---------------------------------------------------------------------------------------- consumers


async def _fill(a: FakeBroker, n: int, topic: str = "T") -> None:
    for i in range(n):
        a._store(topic, i % a.queues, f"m{i}".encode(), f"TAGS\x01{'A' if i % 2 == 0 else 'B'}\x02", 0, 0)


def test_lite_pull_assign_poll_seek_commit() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 12)
            consumer = AsyncLitePullConsumer(
                a.addr,
                consumer_group="lg",
                auto_commit=False,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            mqs = sorted(await _queues(consumer, a.addr))
            await consumer.assign(mqs)
            await consumer.start()
            try:
                got: list[bytes] = []
                while len(got) < 12:
                    got += [m.body for m in await consumer.poll(2000)]
                assert sorted(got) == sorted(f"m{i}".encode() for i in range(12))
                await consumer.commit()
                assert a.offsets[("lg", "T", 0)] == 3 and await consumer.committed(mqs[0]) == 3
                await consumer.seek(mqs[1], 1)
                again = await consumer.poll(2000)
                assert [m.queue_offset for m in again] == [1, 2] and again[0].queue_id == 1
                assert (await consumer.pull(mqs[2], 0, 2)).messages[1].queue_offset == 1
                with pytest.raises(MQClientError):
                    await consumer.seek(mqs[1], 99)
            finally:
                await consumer.shutdown()

    run(scenario())


def test_lite_pull_corrupt_pull_raises_and_rewinds_filtered_pull_is_consumed() -> None:
    """A pull that does not decode raises from poll with the position and its queue goes back
    there (nothing skipped); a pull the tag filter empties still moves the consumed offset."""
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer

    async def scenario() -> None:
        async with cluster(1) as (a,):
            a._store("T", 0, b"good", "TAGS\x01A\x02", 0, 0)
            good = a.store[("T", 0)][0]
            a.store[("T", 0)].append(good[:4] + b"\x00\x00\x00\x01" + good[8:])  # bad magic at offset 1
            for i in range(3):
                a._store("T", 1, f"b{i}".encode(), "TAGS\x01B\x02", 0, 0)
            consumer = AsyncLitePullConsumer(
                a.addr,
                consumer_group="cg",
                auto_commit=False,
                pull_batch_size=1,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            consumer.subscribe("T", "A")
            await consumer.start()
            try:
                mq0 = next(mq for mq in consumer.assignment() if mq.queue_id == 0)
                mq1 = next(mq for mq in consumer.assignment() if mq.queue_id == 1)
                assert [m.body for m in await consumer.poll(2000)] == [b"good"]
                for _ in range(2):  # the bad pull is met again after the rewind
                    with pytest.raises(
                        MessageFormatError, match=r"from queue offset 1 does not decode.*magic"
                    ):
                        while True:
                            await consumer.poll(2000)
                    await consumer.commit()
                    assert a.offsets[("cg", "T", 0)] == 1  # never past the record that does not decode
                assert a.offsets[("cg", "T", 1)] == 3  # only tag B there: filtered, and consumed
                assert mq0 in consumer.assignment() and mq1 in consumer.assignment()
            finally:
                await consumer.shutdown()

    run(scenario())


def test_lite_pull_poll_batch_gives_columns_commits_and_rewinds_a_bad_pull() -> None:
    """poll_batch: one pull of one queue as queue offsets and bodies (same-size messages in bulk,
    the tag filter applied), the consumed offset moved as poll moves it, None after the timeout,
    and a pull that does not decode raises and puts its queue back."""
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer, PolledBatch

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 12)  # queues 0, 1: same-size bodies (the bulk read); 2: m2, m6, m10
            for _ in range(3):
                a._store("T", 3, b"x" * 5, "TAGS\x01A\x02", 0, 0)
            good = a.store[("T", 3)][-1]
            a.store[("T", 3)].append(good[:4] + b"\x00\x00\x00\x01" + good[8:])  # bad magic at offset 6
            consumer = AsyncLitePullConsumer(
                a.addr,
                consumer_group="bg",
                auto_commit=False,
                pull_batch_size=3,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            mqs = sorted(await _queues(consumer, a.addr))
            await consumer.assign(mqs[:3])
            await consumer.start()
            try:
                got: dict[int, list[tuple[int, bytes]]] = {}
                deadline = time.monotonic() + 10
                while sum(map(len, got.values())) < 9 and time.monotonic() < deadline:
                    batch = await consumer.poll_batch(500)
                    if batch is None:
                        continue
                    assert isinstance(batch, PolledBatch) and len(batch) == len(batch.queue_offsets)
                    assert batch.next_offset == batch.queue_offsets[-1] + 1
                    views = batch.messages
                    assert [m.body for m in views] == batch.bodies
                    assert [m.queue_offset for m in views] == batch.queue_offsets
                    assert {m.queue_id for m in views} == {batch.mq.queue_id}
                    pairs = zip(batch.queue_offsets, batch.bodies, strict=True)
                    got.setdefault(batch.mq.queue_id, []).extend(pairs)
                assert got == {q: [(k, f"m{q + 4 * k}".encode()) for k in range(3)] for q in range(3)}
                assert await consumer.poll_batch(100) is None
                await consumer.commit()
                assert [a.offsets[("bg", "T", q)] for q in range(3)] == [3, 3, 3]
                await consumer.assign(mqs[3:])
                await consumer.seek(mqs[3], 3)
                batch = await consumer.poll_batch(2000)
                assert batch is not None and batch.queue_offsets == [3, 4, 5]
                assert batch.bodies == [b"xxxxx"] * 3
                for _ in range(2):  # the bad pull is met again after the rewind
                    bad = r"from queue offset 6 does not decode.*magic"
                    with pytest.raises(MessageFormatError, match=bad):
                        while True:
                            await consumer.poll_batch(2000)
                    await consumer.commit()
                    assert a.offsets[("bg", "T", 3)] == 6
            finally:
                await consumer.shutdown()

    run(scenario())


def test_lite_pull_poll_batch_applies_the_tag_filter() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 8)
            consumer = AsyncLitePullConsumer(
                a.addr, consumer_group="tg", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe("T", "A")
            await consumer.start()
            try:
                bodies: list[bytes] = []
                deadline = time.monotonic() + 10
                while len(bodies) < 4 and time.monotonic() < deadline:
                    batch = await consumer.poll_batch(500)
                    if batch is not None:
                        assert {m.tags for m in batch.messages} == {"A"}
                        bodies += batch.bodies
                assert sorted(bodies) == [b"m0", b"m2", b"m4", b"m6"]
            finally:
                await consumer.shutdown()

    run(scenario())


async def _queues(consumer: Any, addr: str) -> set[MessageQueue]:
    api = MQClientAPI(addr)
    try:
        return set((await api.get_topic_route("T")).readable_queues("T"))
    finally:
        await api.close()


def test_lite_pull_subscribe_rebalances_and_filters_tags() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 8)
            consumer = AsyncLitePullConsumer(
                a.addr, consumer_group="sg", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe("T", "A")
            await consumer.start()
            try:
                assert len(consumer.assignment()) == 4
                got: list[MessageExt] = []
                deadline = time.monotonic() + 10
                while len(got) < 4 and time.monotonic() < deadline:
                    got += await consumer.poll(500)
                assert sorted(m.body for m in got) == [b"m0", b"m2", b"m4", b"m6"]
                assert {m.tags for m in got} == {"A"}
            finally:
                await consumer.shutdown()
            assert any(r.code == RequestCode.HEART_BEAT for r in a.requests)

    run(scenario())


def test_push_consumer_concurrently_with_retry_and_offsets() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncPushConsumer, ConsumeConcurrentlyStatus

    async def scenario() -> None:
        async with cluster(1, topics=("T", "TBW102", "%RETRY%pg")) as (a,):
            await _fill(a, 8)
            seen: list[bytes] = []

            async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
                seen.extend(m.body for m in msgs)
                if msgs[0].body == b"m3":
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer = AsyncPushConsumer(
                a.addr, consumer_group="pg", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe("T", "*")
            consumer.register_message_listener(listener)
            await consumer.start()
            try:
                await async_wait_for(lambda: len(seen) >= 8, "8 messages consumed", 10, interval_s=0.05)
            finally:
                await consumer.shutdown()
            assert sorted(seen) == sorted(f"m{i}".encode() for i in range(8))
            assert any(r.code == RequestCode.CONSUMER_SEND_MSG_BACK for r in a.requests)
            assert [a.offsets[("pg", "T", q)] for q in range(4)] == [2, 2, 2, 2]
            assert any(r.code == RequestCode.UNREGISTER_CLIENT for r in a.requests)

    run(scenario())


def test_push_consumer_orderly_locks_and_keeps_queue_order() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import ConsumeOrderlyStatus, PushConsumer
    from rocketq.client.loop import BackgroundLoop

    loop = BackgroundLoop("fake-servers")
    a = FakeBroker()
    loop.run(a.start())
    a.add_topic("T", a)
    a.add_topic("%RETRY%og", a)
    loop.run(_fill(a, 16))
    seen: dict[int, list[int]] = {}
    suspended: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        m = msgs[0]
        if m.queue_id == 1 and m.queue_offset == 2 and not suspended:
            suspended.append(1)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen.setdefault(m.queue_id, []).append(m.queue_offset)
        return ConsumeOrderlyStatus.SUCCESS

    try:
        consumer = PushConsumer(
            a.addr,
            consumer_group="og",
            suspend_current_queue_time_ms=10,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("T", "*")
        consumer.register_message_listener_orderly(listener)
        consumer.start()
        try:
            wait_for(lambda: sum(len(v) for v in seen.values()) >= 16, "16 messages consumed orderly", 10)
        finally:
            consumer.shutdown()
        assert seen == {q: [0, 1, 2, 3] for q in range(4)}
        assert suspended == [1]
        assert any(r.code == RequestCode.LOCK_BATCH_MQ for r in a.requests)
        assert a.offsets[("og", "T", 2)] == 4
    finally:
        loop.run(a.server.stop(0))
        loop.stop()


def test_blocking_producer_round_trip() -> None:
    from rocketq.client.loop import BackgroundLoop
    from rocketq.client.producer import Producer

    loop = BackgroundLoop("fake-servers")
    a = FakeBroker()
    loop.run(a.start())
    a.add_topic("T", a)
    try:
        with Producer(a.addr, producer_group="bp") as producer:
            result = producer.send(Message("T", b"hi"))
            assert result.send_status is SendStatus.SEND_OK
            fut = producer.send_async(Message("T", b"later"))
            assert fut.result(10).send_status is SendStatus.SEND_OK
            assert len(producer.send_batch([Message("T", b"1"), Message("T", b"2")])) == 1
    finally:
        loop.run(a.server.stop(0))
        loop.stop()


def test_broker_driven_offset_reset_and_rebalance_notification() -> None:
    from rocketq.client.consumer import AsyncPushConsumer, ConsumeConcurrentlyStatus

    async def scenario() -> None:
        async with cluster(1, topics=("T", "TBW102", "%RETRY%rg")) as (a,):
            await _fill(a, 8)
            consumer = AsyncPushConsumer(a.addr, consumer_group="rg")
            consumer.subscribe("T", "*")
            consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            await consumer.start()
            try:
                assert len(consumer.assigned_queues()) == 8  # T and %RETRY%rg, 4 queues each (fake)
                channel = a.server.channels[0]
                body = b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:1}}'
                request = RemotingCommand.request(
                    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                    {"topic": "T", "group": "rg", "timestamp": "0", "isForce": "true"},
                    body,
                )
                response = await channel.invoke(request, 5000)
                assert response.code == ResponseCode.SUCCESS
                assert a.offsets[("rg", "T", 0)] == 1
                notify = RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "rg"}, oneway=True
                )
                await channel.invoke_oneway(notify)
                for _ in range(100):
                    if MessageQueue("T", "broker-a", 0) in consumer.assigned_queues():
                        break
                    await asyncio.sleep(0.02)
                assert MessageQueue("T", "broker-a", 0) in consumer.assigned_queues()
            finally:
                await consumer.shutdown()

    run(scenario())


# ---------------------------------------------------------------------------------------- SQL92


def test_lite_pull_subscribes_by_sql_in_pulls_heartbeats_and_check() -> None:
    from rocketq.client.config import ConsumeFromWhere
    from rocketq.client.consumer import AsyncLitePullConsumer, MessageSelector

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 8)
            consumer = AsyncLitePullConsumer(
                a.addr, consumer_group="sql", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe("T", MessageSelector.by_sql("a > 5"))
            await consumer.start()
            try:
                got: list[MessageExt] = []
                deadline = time.monotonic() + 10
                while len(got) < 8 and time.monotonic() < deadline:
                    got += await consumer.poll(500)
            finally:
                await consumer.shutdown()
        # the fake broker does not filter: no client-side tag check may drop anything
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(8))
        pulls = [r for r in a.requests if r.code == RequestCode.LITE_PULL_MESSAGE]
        assert pulls
        for r in pulls:
            hd = h.PullMessageRequestHeader.from_ext_fields(r.ext_fields)
            assert (hd.expression_type, hd.subscription) == ("SQL92", "a > 5")
            assert hd.sys_flag & PullSysFlag.SUBSCRIPTION
        beat = json.loads(next(r for r in a.requests if r.code == RequestCode.HEART_BEAT).body)
        subs = [s for c in beat["consumerDataSet"] for s in c["subscriptionDataSet"]]
        assert [(s["expressionType"], s["subString"], s["tagsSet"]) for s in subs] == [("SQL92", "a > 5", [])]
        check = json.loads(next(r for r in a.requests if r.code == RequestCode.CHECK_CLIENT_CONFIG).body)
        assert check["group"] == "sql"
        assert check["subscriptionData"]["expressionType"] == "SQL92"

    run(scenario())


def test_push_consumer_start_fails_when_the_broker_refuses_sql92() -> None:
    from rocketq.client.consumer import (
        AsyncPushConsumer,
        ConsumeConcurrentlyStatus,
        MessageSelector,
        SubscriptionRefusedError,
    )

    async def scenario() -> None:
        async with cluster(1, topics=("T", "TBW102", "%RETRY%pq")) as (a,):
            a.overrides[RequestCode.CHECK_CLIENT_CONFIG] = lambda cmd: cmd.make_response(
                ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92"
            )
            consumer = AsyncPushConsumer(a.addr, consumer_group="pq")
            consumer.subscribe("T", MessageSelector.by_sql("a > 5"))
            consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            with pytest.raises(SubscriptionRefusedError, match="enablePropertyFilter=true") as info:
                await consumer.start()
            assert info.value.code == ResponseCode.SYSTEM_ERROR
            assert "'a > 5' of topic T" in info.value.remark
            assert not consumer.running
            assert any(r.code == RequestCode.UNREGISTER_CLIENT for r in a.requests)

    run(scenario())


def test_lite_pull_poll_raises_when_pulls_refuse_sql92() -> None:
    from rocketq.client.consumer import AsyncLitePullConsumer, MessageSelector, SubscriptionRefusedError

    refusal = "The broker does not support consumer to filter message by SQL92: set enablePropertyFilter=true"

    async def scenario() -> None:
        async with cluster(1) as (a,):
            await _fill(a, 4)
            a.overrides[RequestCode.LITE_PULL_MESSAGE] = lambda cmd: cmd.make_response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, refusal
            )
            consumer = AsyncLitePullConsumer(
                a.addr, consumer_group="lq", pull_time_delay_when_exception_ms=50
            )
            consumer.subscribe("T", MessageSelector.by_sql("a > 5"))
            await consumer.start()
            try:
                with pytest.raises(SubscriptionRefusedError, match="refused the SQL92 subscription 'a > 5'"):
                    for _ in range(20):
                        await consumer.poll(200)
            finally:
                await consumer.shutdown()

    run(scenario())


def test_subscribe_refuses_sql_text_as_a_tag_expression() -> None:
    from rocketq.client.consumer import AsyncLitePullConsumer, AsyncPushConsumer

    push = AsyncPushConsumer("127.0.0.1:9876", consumer_group="g")
    with pytest.raises(MQClientError, match=r"MessageSelector\.by_sql\(\"a > 5 AND b = 'x'\"\)"):
        push.subscribe("T", "a > 5 AND b = 'x'")
    lite = AsyncLitePullConsumer("127.0.0.1:9876", consumer_group="g")
    with pytest.raises(MQClientError, match="by_sql"):
        lite.subscribe("T", "a>5")
    assert push.subscriptions() == {} and lite.subscriptions() == {}
