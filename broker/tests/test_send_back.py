"""CONSUMER_SEND_MSG_BACK, retry and DLQ inside one process: a real BrokerController (with its
ScheduleMessageService) on a real store, spoken to over TCP."""

from __future__ import annotations

import json
from pathlib import Path

from rocketq.broker.server import BrokerController
from rocketq.broker.testing import Scenario
from rocketq.broker.testing import run_broker as _run_broker
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
)
from rocketq.client.remoting.message import StoredMessage, iter_stored_messages
from rocketq.client.testing import async_wait_value, pull_header, send_header
from rocketq.client.transport.aio import RemotingClient

GROUP = "cg"


def run_broker(tmp_path: Path, scenario: Scenario, **conf: str) -> None:
    _run_broker(tmp_path, scenario, **{"messageDelayLevel": "1s 1s 1s 1s 1s", **conf})


async def send(
    client: RemotingClient,
    addr: str,
    topic: str,
    body: bytes,
    props: str = "TAGS\x01TagA\x02",
    *,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
) -> RemotingCommand:
    h = send_header(
        topic,
        properties=props,
        default_topic_queue_nums=1,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
    )
    return await client.invoke(
        addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, h.to_ext_fields(), body), 5000
    )


async def pull_msgs(client: RemotingClient, addr: str, topic: str, offset: int = 0) -> list[StoredMessage]:
    h = pull_header(topic, 0, offset, group=GROUP, max_msg_nums=32, expression_type=None)
    r = await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, h.to_ext_fields()), 5000)
    return list(iter_stored_messages(r.body)) if r.code == R.SUCCESS else []


async def wait_msgs(
    client: RemotingClient, addr: str, topic: str, n: int, timeout_s: float = 10
) -> list[StoredMessage]:
    """The messages of ``topic`` from offset 0, once there are at least ``n``."""

    async def enough() -> list[StoredMessage] | None:
        got = await pull_msgs(client, addr, topic)
        return got if len(got) >= n else None

    return await async_wait_value(enough, f"{n} messages of {topic}", timeout_s, interval_s=0.1)


async def send_back(
    client: RemotingClient,
    addr: str,
    msg: StoredMessage,
    *,
    delay_level: int = 0,
    max_reconsume_times: int | None = 2,
    offset: int | None = None,
) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader(
        offset=msg.physical_offset if offset is None else offset,
        group=GROUP,
        delay_level=delay_level,
        origin_msg_id=msg.offset_msg_id,
        origin_topic=msg.topic,
        max_reconsume_times=max_reconsume_times,
    )
    return await client.invoke(
        addr, RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, h.to_ext_fields()), 5000
    )


def test_send_back_goes_to_retry_after_the_delay_then_to_the_dlq(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        assert (
            await send(client, addr, "T1", b"payload", "TAGS\x01TagA\x02KEYS\x01k1\x02")
        ).code == R.SUCCESS
        [original] = await wait_msgs(client, addr, "T1", 1)
        r = await send_back(client, addr, original)
        assert r.code == R.SUCCESS, r.remark
        tc = c.ctx.topics.select("%RETRY%cg") if c.ctx else None
        assert tc is not None and tc.is_readable and tc.is_writeable and tc.read_queue_nums == 1
        assert await pull_msgs(client, addr, "%RETRY%cg") == []  # still in SCHEDULE_TOPIC_XXXX
        [retry] = await wait_msgs(client, addr, "%RETRY%cg", 1)
        assert retry.body == b"payload" and retry.reconsume_times == 1
        p = retry.properties
        assert p["RETRY_TOPIC"] == "T1" and p["ORIGIN_MESSAGE_ID"] == original.offset_msg_id
        assert p["TAGS"] == "TagA" and p["KEYS"] == "k1" and "DELAY" not in p
        # second failure: reconsumeTimes 1 < 2, back to the retry topic
        assert (await send_back(client, addr, retry)).code == R.SUCCESS
        retries = await wait_msgs(client, addr, "%RETRY%cg", 2)
        assert len(retries) == 2 and retries[1].reconsume_times == 2
        # third failure: reconsumeTimes 2 >= maxReconsumeTimes 2 -> DLQ at once, no delay
        assert (await send_back(client, addr, retries[1])).code == R.SUCCESS
        [dead] = await wait_msgs(client, addr, "%DLQ%cg", 1, timeout_s=3)
        assert dead.reconsume_times == 3 and dead.body == b"payload"
        assert dead.properties["RETRY_TOPIC"] == "T1"
        assert dead.properties["ORIGIN_MESSAGE_ID"] == original.offset_msg_id
        dlq = c.ctx.topics.select("%DLQ%cg") if c.ctx else None
        assert dlq is not None and dlq.is_readable and dlq.is_writeable and dlq.write_queue_nums == 1
        # the delay progress is served to slaves as delayOffset.json
        r = await client.invoke(addr, RemotingCommand.request(RC.GET_ALL_DELAY_OFFSET), 5000)
        assert r.code == R.SUCCESS and json.loads(r.body)["offsetTable"]

    run_broker(tmp_path, scenario)


def test_negative_delay_level_and_group_max_go_to_the_dlq(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        await send(client, addr, "T2", b"m1")
        await send(client, addr, "T2", b"m2")
        m1, m2 = await wait_msgs(client, addr, "T2", 2)
        assert (await send_back(client, addr, m1, delay_level=-1)).code == R.SUCCESS
        # maxReconsumeTimes absent -> the group's retryMaxTimes (16): a fresh message is retried
        assert (await send_back(client, addr, m2, max_reconsume_times=None)).code == R.SUCCESS
        dead = await wait_msgs(client, addr, "%DLQ%cg", 1, timeout_s=3)
        assert [m.body for m in dead] == [b"m1"]
        retried = await wait_msgs(client, addr, "%RETRY%cg", 1)
        assert [m.body for m in retried] == [b"m2"]
        r = await send_back(client, addr, m1, offset=10**12)
        assert r.code == R.SYSTEM_ERROR and "look message by offset failed" in (r.remark or "")

    run_broker(tmp_path, scenario)


def test_client_fallback_send_to_retry_topic(tmp_path: Path) -> None:
    """When send-back fails the Java client sends to %RETRY% itself, with DELAY and reconsumeTimes."""

    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        props = "TAGS\x01TagA\x02DELAY\x014\x02RETRY_TOPIC\x01T3\x02"
        r = await send(client, addr, "%RETRY%cg", b"again", props, reconsume_times=1, max_reconsume_times=3)
        assert r.code == R.SUCCESS, r.remark
        [m] = await wait_msgs(client, addr, "%RETRY%cg", 1)
        assert m.body == b"again" and m.reconsume_times == 1 and "DELAY" not in m.properties
        r = await send(client, addr, "%RETRY%cg", b"dead", props, reconsume_times=3, max_reconsume_times=3)
        assert r.code == R.SUCCESS
        [d] = await wait_msgs(client, addr, "%DLQ%cg", 1, timeout_s=3)
        assert d.body == b"dead" and "DELAY" not in d.properties

    run_broker(tmp_path, scenario)
