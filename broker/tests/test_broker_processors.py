"""Request processors end to end inside one process: a real BrokerController on a real store in a
temporary directory, spoken to over TCP by the asyncio RemotingClient."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rocketq.broker.executor import BoundedExecutor, Busy
from rocketq.broker.server import BrokerController
from rocketq.broker.testing import run_broker
from rocketq.client import testing
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    CreateTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.testing import send_header
from rocketq.client.transport.aio import RemotingClient


def send_fields(
    topic: str = "T1",
    *,
    queue_id: int = 0,
    props: str = "TAGS\x01TagA\x02KEYS\x01k1\x02",
    queue_nums: int = 4,
) -> dict[str, str]:
    return send_header(
        topic, queue_id=queue_id, properties=props, default_topic_queue_nums=queue_nums
    ).to_ext_fields()


async def send(client: RemotingClient, addr: str, body: bytes = b"hello", **kw: Any) -> RemotingCommand:
    return await client.invoke(
        addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, send_fields(**kw), body), 5000
    )


def pull_header(
    topic: str = "T1",
    queue_id: int = 0,
    offset: int = 0,
    *,
    sub: str = "*",
    suspend_ms: int = 0,
    sys_flag: int = 0x4,
) -> dict[str, str]:
    return testing.pull_header(
        topic, queue_id, offset, group="cg", max_msg_nums=32, sys_flag=sys_flag, suspend_ms=suspend_ms,
        subscription=sub, expression_type=None,
    ).to_ext_fields()  # fmt: skip


async def pull(client: RemotingClient, addr: str, **kw: Any) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, pull_header(**kw)), 10_000)


def bodies(resp: RemotingCommand) -> list[bytes]:
    return [m.body for m in iter_stored_messages(resp.body)]


def test_send_pull_round_trip_and_tag_filter(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        r = await send(client, addr, b"a")
        assert r.code == R.SUCCESS and r.ext_fields["queueOffset"] == "0"
        await send(client, addr, b"b", props="TAGS\x01TagB\x02")
        assert c.store.wait_dispatched()
        r = await pull(client, addr)
        assert r.code == R.SUCCESS and bodies(r) == [b"a", b"b"]
        assert (r.ext_fields["nextBeginOffset"], r.ext_fields["maxOffset"]) == ("2", "2")
        r = await pull(client, addr, sub="TagB")
        assert r.code == R.SUCCESS and bodies(r) == [b"b"]
        r = await pull(client, addr, sub="TagC")
        assert r.code == R.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "2"
        r = await pull(client, addr, offset=2)
        assert r.code == R.PULL_NOT_FOUND
        r = await pull(client, addr, offset=100)
        assert (
            r.code == R.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
        )  # Java: min when min == 0
        r = await pull(client, addr, queue_id=99)
        assert r.code == R.SYSTEM_ERROR and "queueId[99]" in (r.remark or "")
        r = await pull(client, addr, topic="NoSuchTopic")
        assert r.code == R.TOPIC_NOT_EXIST

    run_broker(tmp_path, scenario)


def test_long_polling_wakes_on_arrival_and_times_out(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        await send(client, addr, b"first")
        assert c.store.wait_dispatched()
        started = time.monotonic()
        parked = asyncio.ensure_future(pull(client, addr, offset=1, suspend_ms=20_000))
        await asyncio.sleep(0.3)
        assert not parked.done()
        await send(client, addr, b"second")
        r = await asyncio.wait_for(parked, 10)
        assert r.code == R.SUCCESS and bodies(r) == [b"second"]
        assert time.monotonic() - started < 15  # woken by the arrival, not by the timeout
        r = await pull(client, addr, offset=2, suspend_ms=200)
        assert r.code == R.PULL_NOT_FOUND

    run_broker(tmp_path, scenario)


def test_offsets_and_time_queries(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        before = int(time.time() * 1000) - 1
        for i in range(3):
            await send(client, addr, b"m%d" % i)
        assert c.store.wait_dispatched()

        async def call(code: int, ext: dict[str, str]) -> RemotingCommand:
            return await client.invoke(addr, RemotingCommand.request(code, ext), 5000)

        q = QueryConsumerOffsetRequestHeader(consumer_group="cg", topic="T1", queue_id=0)
        r = await call(RC.QUERY_CONSUMER_OFFSET, q.to_ext_fields())
        assert r.code == R.SUCCESS and r.ext_fields["offset"] == "0"  # young queue: from the start
        r = await call(RC.QUERY_CONSUMER_OFFSET, q.replace(set_zero_if_not_found=False).to_ext_fields())
        assert r.code == R.QUERY_NOT_FOUND
        u = UpdateConsumerOffsetRequestHeader(consumer_group="cg", topic="T1", queue_id=0, commit_offset=2)
        assert (await call(RC.UPDATE_CONSUMER_OFFSET, u.to_ext_fields())).code == R.SUCCESS
        r = await call(RC.QUERY_CONSUMER_OFFSET, q.to_ext_fields())
        assert r.ext_fields["offset"] == "2"
        # piggy-backed commit on a pull
        ext = pull_header(sys_flag=0x4 | 0x1)
        ext["commitOffset"] = "3"
        await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, ext), 5000)
        assert c.ctx is not None and c.ctx.offsets.query_offset("cg", "T1", 0) == 3
        m = GetMaxOffsetRequestHeader(topic="T1", queue_id=0).to_ext_fields()
        assert (await call(RC.GET_MAX_OFFSET, m)).ext_fields["offset"] == "3"
        assert (await call(RC.GET_MIN_OFFSET, {"topic": "T1", "queueId": "0"})).ext_fields["offset"] == "0"
        s = SearchOffsetRequestHeader(topic="T1", queue_id=0, timestamp=before).to_ext_fields()
        assert (await call(RC.SEARCH_OFFSET_BY_TIMESTAMP, s)).ext_fields["offset"] == "0"
        r = await call(RC.GET_EARLIEST_MSG_STORETIME, {"topic": "T1", "queueId": "0"})
        assert int(r.ext_fields["timestamp"]) >= before
        r = await call(RC.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": "T1"})
        assert r.code == R.SUCCESS and b'"brokerOffset":3,"consumerOffset":3' in r.body

    run_broker(tmp_path, scenario)


def test_query_by_key_unique_key_and_view_by_id(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        uniq = "0A0000050000000000000000000000AB"
        r = await send(client, addr, b"keyed", props=f"KEYS\x01order-1 order-2\x02UNIQ_KEY\x01{uniq}\x02")
        offset_msg_id = r.ext_fields["msgId"]
        assert c.store.wait_dispatched()

        async def query(key: str, unique: bool | None = None) -> RemotingCommand:
            h = QueryMessageRequestHeader(
                topic="T1",
                key=key,
                max_num=32,
                begin_timestamp=0,
                end_timestamp=2**62,
                unique_key_query=unique,
            )
            return await client.invoke(
                addr, RemotingCommand.request(RC.QUERY_MESSAGE, h.to_ext_fields()), 5000
            )

        assert bodies(await query("order-2")) == [b"keyed"]
        assert bodies(await query(uniq, True)) == [b"keyed"]
        assert (await query("nope")).code == R.QUERY_NOT_FOUND
        _host, port, offset = decode_offset_msg_id(offset_msg_id)
        assert port == c.ctx.config.listen_port if c.ctx else False
        v = ViewMessageRequestHeader(offset=offset).to_ext_fields()
        r = await client.invoke(addr, RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, v), 5000)
        assert r.code == R.SUCCESS and bodies(r) == [b"keyed"]
        v = ViewMessageRequestHeader(offset=10**9).to_ext_fields()
        r = await client.invoke(addr, RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, v), 5000)
        assert r.code == R.SYSTEM_ERROR

    run_broker(tmp_path, scenario)


def test_send_rejections(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        r = await send(client, addr, topic="NotThere")
        assert r.code == R.TOPIC_NOT_EXIST and "NotThere" in (r.remark or "")
        r = await send(client, addr, topic="bad topic!")
        assert r.code == R.MESSAGE_ILLEGAL and "illegal" in (r.remark or "")
        r = await send(client, addr, topic="x" * 128)
        assert r.code == R.MESSAGE_ILLEGAL
        r = await send(client, addr, topic="TBW102")
        assert r.code == R.NO_PERMISSION
        # create a topic by admin, then check size limits on it
        h = CreateTopicRequestHeader(
            topic="T2", default_topic="TBW102", read_queue_nums=2, write_queue_nums=2, perm=6
        )
        r = await client.invoke(
            addr, RemotingCommand.request(RC.UPDATE_AND_CREATE_TOPIC, h.to_ext_fields()), 5000
        )
        assert r.code == R.SUCCESS
        r = await send(client, addr, b"x" * (64 * 1024 + 1), topic="T2")
        assert r.code == R.MESSAGE_ILLEGAL and "65537" in (r.remark or "") and "65536" in (r.remark or "")
        r = await send(client, addr, topic="T2", props="K\x01" + "v" * 33_000 + "\x02")
        assert r.code == R.MESSAGE_ILLEGAL and "32767" in (r.remark or "")
        r = await send(client, addr, topic="T2", queue_id=5)
        assert r.code == R.SYSTEM_ERROR and "queueId[5]" in (r.remark or "")
        r = await client.invoke(addr, RemotingCommand.request(31_999), 5000)
        assert r.code == R.REQUEST_CODE_NOT_SUPPORTED
        assert (await send(client, addr, topic="T2")).code == R.SUCCESS

    run_broker(tmp_path, scenario, autoCreateTopicEnable="false")


def test_concurrent_first_sends_create_topic_once(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        assert c.ctx is not None
        version = c.ctx.topics.data_version.counter
        clients = [RemotingClient() for _ in range(4)]
        try:
            results = await asyncio.gather(
                *(
                    cl.invoke(
                        addr,
                        RemotingCommand.request(
                            RC.SEND_MESSAGE_V2,
                            send_fields("Fresh", queue_id=i % 4, queue_nums=4 + i % 3),
                            b"x",
                        ),
                        5000,
                    )
                    for i in range(24)
                    for cl in clients[i % 4 : i % 4 + 1]
                )
            )
        finally:
            for cl in clients:
                await cl.close()
        assert all(r.code == R.SUCCESS for r in results)
        tc = c.ctx.topics.select("Fresh")
        assert tc is not None and tc.write_queue_nums == tc.read_queue_nums
        assert tc.write_queue_nums in (4, 5, 6)
        assert c.ctx.topics.data_version.counter == version + 1  # created exactly once

    run_broker(tmp_path, scenario)


def test_batch_send(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        body = encode_batch([(0, b"b%d" % i, {"UNIQ_KEY": f"U{i}", "KEYS": f"bk{i}"}) for i in range(3)])
        ext = send_fields(props="")
        ext["m"] = "true"
        r = await client.invoke(addr, RemotingCommand.request(RC.SEND_BATCH_MESSAGE, ext, body), 5000)
        assert r.code == R.SUCCESS and len(r.ext_fields["msgId"].split(",")) == 3
        assert c.store.wait_dispatched()
        assert bodies(await pull(client, addr)) == [b"b0", b"b1", b"b2"]
        r = await client.invoke(
            addr, RemotingCommand.request(RC.SEND_BATCH_MESSAGE, ext, b"\x00\x01garbage"), 5000
        )
        assert r.code == R.MESSAGE_ILLEGAL

    run_broker(tmp_path, scenario)


HEARTBEAT = {
    "clientID": "127.0.0.1@c1",
    "consumerDataSet": [
        {
            "groupName": "cg",
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "unitMode": False,
            "subscriptionDataSet": [
                {
                    "topic": "T1",
                    "subString": "*",
                    "tagsSet": [],
                    "codeSet": [],
                    "subVersion": 1,
                    "expressionType": "TAG",
                }
            ],
        }
    ],
    "producerDataSet": [{"groupName": "pg"}],
}


def test_heartbeat_membership_notify_lock_and_reset(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        for i in range(3):
            await send(client, addr, b"r%d" % i)
        assert c.store.wait_dispatched()
        notified: list[str] = []
        resets: list[bytes] = []

        async def on_notify(cmd: RemotingCommand, ch: Any) -> RemotingCommand | None:
            notified.append(cmd.ext_fields.get("consumerGroup", ""))
            return None

        async def on_reset(cmd: RemotingCommand, ch: Any) -> RemotingCommand | None:
            resets.append(cmd.body)
            return cmd.make_response(R.SUCCESS)

        client.register(RC.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        client.register(RC.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
        hb = json.dumps(HEARTBEAT).encode()
        r = await client.invoke(addr, RemotingCommand.request(RC.HEART_BEAT, body=hb), 5000)
        assert r.code == R.SUCCESS
        assert c.ctx is not None and c.ctx.topics.select("%RETRY%cg") is not None
        r = await client.invoke(
            addr, RemotingCommand.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"}), 5000
        )
        assert json.loads(r.body) == {"consumerIdList": ["127.0.0.1@c1"]}
        for _ in range(100):
            if notified:
                break
            await asyncio.sleep(0.02)
        assert notified == ["cg"]
        # pull without the SUBSCRIPTION flag uses the heartbeat's subscription
        r = await pull(client, addr, sys_flag=0)
        assert r.code == R.SUCCESS and len(bodies(r)) == 3
        lock = {
            "consumerGroup": "cg",
            "clientId": "127.0.0.1@c1",
            "onlyThisBroker": False,
            "mqSet": [{"brokerName": "broker-t", "queueId": 0, "topic": "T1"}],
        }
        r = await client.invoke(
            addr, RemotingCommand.request(RC.LOCK_BATCH_MQ, body=json.dumps(lock).encode()), 5000
        )
        assert json.loads(r.body)["lockOKMQSet"] == lock["mqSet"]
        other = dict(lock, clientId="someone-else")
        r = await client.invoke(
            addr, RemotingCommand.request(RC.LOCK_BATCH_MQ, body=json.dumps(other).encode()), 5000
        )
        assert json.loads(r.body)["lockOKMQSet"] == []
        r = await client.invoke(
            addr, RemotingCommand.request(RC.UNLOCK_BATCH_MQ, body=json.dumps(lock).encode()), 5000
        )
        assert r.code == R.SUCCESS
        reset = ResetOffsetRequestHeader(topic="T1", group="cg", timestamp=0, is_force=True).to_ext_fields()
        r = await client.invoke(addr, RemotingCommand.request(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset), 5000)
        assert r.code == R.SUCCESS
        assert resets and b'"queueId":0,"topic":"T1"}:0' in resets[0]
        assert c.ctx.offsets.query_offset("cg", "T1", 0) == 0
        un = {"clientID": "127.0.0.1@c1", "consumerGroup": "cg"}
        assert (
            await client.invoke(addr, RemotingCommand.request(RC.UNREGISTER_CLIENT, un), 5000)
        ).code == R.SUCCESS
        assert c.ctx.consumers.get("cg") is None

    run_broker(tmp_path, scenario)


def test_admin_topics_groups_runtime(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        async def call(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
            return await client.invoke(addr, RemotingCommand.request(code, ext, body), 5000)

        h = CreateTopicRequestHeader(
            topic="Adm", default_topic="TBW102", read_queue_nums=3, write_queue_nums=3, perm=6
        )
        assert (await call(RC.UPDATE_AND_CREATE_TOPIC, h.to_ext_fields())).code == R.SUCCESS
        doc = json.loads((await call(RC.GET_ALL_TOPIC_CONFIG)).body)
        assert doc["topicConfigTable"]["Adm"]["writeQueueNums"] == 3
        assert (await call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "Adm"})).code == R.SUCCESS
        assert c.ctx is not None and c.ctx.topics.select("Adm") is None
        sg = {"groupName": "strict", "consumeEnable": False, "retryQueueNums": 1}
        assert (
            await call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(sg).encode())
        ).code == R.SUCCESS
        r = await call(RC.PULL_MESSAGE, dict(pull_header(), consumerGroup="strict"))
        assert r.code == R.NO_PERMISSION
        info = json.loads((await call(RC.GET_BROKER_RUNTIME_INFO)).body)["table"]
        assert info["brokerName"] == "broker-t" and "commitLogMaxOffset" in info
        r = await call(RC.GET_TOPIC_STATS_INFO, {"topic": "TBW102"})
        assert r.code == R.SUCCESS and b'"topic":"TBW102"}' in r.body
        assert (await call(RC.HEART_BEAT, body=b"not json")).code == R.SYSTEM_ERROR
        assert (await call(RC.PULL_MESSAGE, {"topic": "T1"})).code == R.SYSTEM_ERROR  # missing header fields

    run_broker(tmp_path, scenario)


def test_bounded_executor_busy_answers() -> None:
    async def run() -> None:
        ex = BoundedExecutor("t", threads=1, capacity=1, max_wait_ms=50)
        gate = asyncio.Event()
        loop = asyncio.get_running_loop()

        def slow() -> int:
            time.sleep(0.2)
            return 1

        first = asyncio.ensure_future(ex.run(slow))
        await asyncio.sleep(0)
        with pytest.raises(Busy, match=r"\[REJECTREQUEST\]"):
            await ex.run(lambda: 2)
        assert await first == 1
        ex2 = BoundedExecutor("t2", threads=1, capacity=10, max_wait_ms=50)
        blocker = asyncio.ensure_future(ex2.run(slow))
        await asyncio.sleep(0)
        with pytest.raises(Busy, match=r"\[TIMEOUT_CLEAN_QUEUE\]"):
            await ex2.run(lambda: 3)
        await blocker
        gate.set()
        ex.shutdown()
        ex2.shutdown()
        del loop

    asyncio.run(run())
