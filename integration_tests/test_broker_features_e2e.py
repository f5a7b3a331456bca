"""Delay levels, retry/DLQ and SQL92 filtering against real ``mqnamesrv`` + ``mqbroker`` processes
(spawned on free ports, with short delay levels so the test is quick)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
)
from rocketq.client.remoting.message import StoredMessage, iter_stored_messages
from rocketq.client.remoting.vocabulary import ExpressionType
from rocketq.client.testing import ServerProcess, pull_header, send_header, spawn_broker, wait_value
from rocketq.client.transport.blocking import BlockingRemotingClient

CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": 8 << 20,
    "mappedFileSizeConsumeQueue": 20 * 2000,
    "maxHashSlotNum": 1000,
    "maxIndexNum": 4000,
    "messageDelayLevel": "1s 2s 3s",
}
GROUP = "cg-e2e"


@pytest.fixture
def client() -> Iterator[BlockingRemotingClient]:
    c = BlockingRemotingClient()
    yield c
    c.close()


def send(client: BlockingRemotingClient, addr: str, topic: str, body: bytes, props: str) -> RemotingCommand:
    h = send_header(topic, properties=props, default_topic_queue_nums=1)
    r = client.invoke(addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, h.to_ext_fields(), body), 10_000)
    assert r.code == R.SUCCESS, r.remark
    return r


def pull(
    client: BlockingRemotingClient, addr: str, topic: str, *, sql: str | None = None, offset: int = 0
) -> RemotingCommand:
    h = pull_header(
        topic,
        0,
        offset,
        group=GROUP,
        max_msg_nums=32,
        subscription=sql or "*",
        expression_type=ExpressionType.SQL92 if sql else ExpressionType.TAG,
    )
    return client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, h.to_ext_fields()), 10_000)


def messages(client: BlockingRemotingClient, addr: str, topic: str, **kw: Any) -> list[StoredMessage]:
    r = pull(client, addr, topic, **kw)
    return list(iter_stored_messages(r.body)) if r.code == R.SUCCESS else []


def wait_messages(
    client: BlockingRemotingClient, addr: str, topic: str, n: int, timeout_s: float = 15
) -> list[StoredMessage]:
    """The messages of ``topic`` from offset 0, once there are at least ``n``."""

    def enough() -> list[StoredMessage] | None:
        got = messages(client, addr, topic)
        return got if len(got) >= n else None

    return wait_value(enough, f"{n} messages of {topic}", timeout_s)


def send_back(
    client: BlockingRemotingClient, addr: str, msg: StoredMessage, max_times: int
) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader(
        offset=msg.physical_offset,
        group=GROUP,
        delay_level=0,
        origin_msg_id=msg.offset_msg_id,
        origin_topic=msg.topic,
        max_reconsume_times=max_times,
    )
    return client.invoke(addr, RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, h.to_ext_fields()), 10_000)


def test_delay_retry_dlq_and_sql92(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    with spawn_broker(tmp_path, namesrv.addr, enablePropertyFilter=True, **CONF) as broker:
        addr = broker.addr
        # -- delay level 2 (2 s): invisible first, delivered after its time with the same UNIQ_KEY
        sent_at = time.monotonic()
        send(client, addr, "Delayed", b"later", "TAGS\x01T\x02UNIQ_KEY\x01UK-1\x02DELAY\x012\x02")
        send(client, addr, "Delayed", b"now", "TAGS\x01T\x02UNIQ_KEY\x01UK-2\x02")
        first = wait_messages(client, addr, "Delayed", 1)
        assert [m.body for m in first] == [b"now"]
        got = wait_messages(client, addr, "Delayed", 2)
        assert [m.body for m in got] == [b"now", b"later"] and time.monotonic() - sent_at >= 1.5
        later = got[1]
        assert later.properties["UNIQ_KEY"] == "UK-1" and "DELAY" not in later.properties
        # -- send back: %RETRY%group after the delay (level 3 + 0, clamped to 3 s), then the DLQ
        assert send_back(client, addr, got[0], max_times=1).code == R.SUCCESS
        assert messages(client, addr, "%RETRY%" + GROUP) == []
        [retry] = wait_messages(client, addr, "%RETRY%" + GROUP, 1)
        assert retry.properties["RETRY_TOPIC"] == "Delayed" and retry.reconsume_times == 1
        assert retry.properties["ORIGIN_MESSAGE_ID"] == got[0].offset_msg_id
        # a retried copy keeps the consumer-side msg_id (the UNIQ_KEY), not the offset msgId
        assert retry.msg_id == got[0].msg_id == "UK-2" and retry.offset_msg_id != got[0].offset_msg_id
        route = client.invoke(
            namesrv.addr,
            RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%" + GROUP}),
            5000,
        )
        assert route.code == R.SUCCESS and b"broker-a" in route.body
        assert send_back(client, addr, retry, max_times=1).code == R.SUCCESS
        [dead] = wait_messages(client, addr, "%DLQ%" + GROUP, 1, timeout_s=5)
        assert (
            dead.body == b"now" and dead.properties["RETRY_TOPIC"] == "Delayed" and dead.reconsume_times == 2
        )
        assert dead.msg_id == "UK-2"
        # -- SQL92: only matching messages, the offset moves past the others
        for i in range(6):
            send(client, addr, "Filtered", b"%d" % i, f"TAGS\x01T{i % 2}\x02price\x01{i * 10}\x02")
        wait_messages(client, addr, "Filtered", 6, 10)
        r = pull(client, addr, "Filtered", sql="price BETWEEN 10 AND 40 AND TAGS = 'T1'")
        assert r.code == R.SUCCESS and r.ext_fields["nextBeginOffset"] == "6"
        assert [m.body for m in iter_stored_messages(r.body)] == [b"1", b"3"]
        r = pull(client, addr, "Filtered", sql="price >")
        assert r.code == R.SUBSCRIPTION_PARSE_FAILED and "position 7" in (r.remark or "")
    # -- a restart keeps the delay progress: nothing is delivered twice
    with spawn_broker(tmp_path, namesrv.addr, enablePropertyFilter=True, **CONF) as broker:
        time.sleep(1.5)
        assert [m.body for m in messages(client, broker.addr, "Delayed")] == [b"now", b"later"]
        assert len(messages(client, broker.addr, "%RETRY%" + GROUP)) == 1


def test_sql92_disabled_is_a_clear_error(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    with spawn_broker(tmp_path, namesrv.addr, **CONF) as broker:
        send(client, broker.addr, "Plain", b"x", "TAGS\x01T\x02a\x011\x02")
        r = pull(client, broker.addr, "Plain", sql="a = 1")
        assert r.code == R.SUBSCRIPTION_PARSE_FAILED
        assert "enablePropertyFilter=true" in (r.remark or "")
