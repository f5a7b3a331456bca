"""The broker as a real process: ``mqnamesrv`` + ``mqbroker`` spawned on free ports, spoken to
over raw remoting requests with the BlockingRemotingClient."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.testing import ServerProcess, pull_header, send_header, spawn_broker, wait_for
from rocketq.client.transport.blocking import BlockingRemotingClient

SMALL_STORE: dict[str, Any] = {
    "mappedFileSizeCommitLog": 8 << 20,
    "maxMessageSize": 256 * 1024,
    "mappedFileSizeConsumeQueue": 20 * 2000,
    "maxHashSlotNum": 1000,
    "maxIndexNum": 4000,
}


@pytest.fixture
def client() -> Iterator[BlockingRemotingClient]:
    c = BlockingRemotingClient()
    yield c
    c.close()


def send(
    client: BlockingRemotingClient,
    addr: str,
    topic: str,
    body: bytes,
    *,
    props: str = "TAGS\x01TagA\x02",
    queue_id: int = 0,
) -> RemotingCommand:
    h = send_header(topic, queue_id=queue_id, properties=props)
    return client.invoke(addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, h.to_ext_fields(), body), 10_000)


def pull(
    client: BlockingRemotingClient,
    addr: str,
    topic: str,
    offset: int,
    *,
    sub: str = "*",
    suspend_ms: int = 0,
    queue_id: int = 0,
) -> RemotingCommand:
    h = pull_header(
        topic, queue_id, offset, group="cg", max_msg_nums=32, suspend_ms=suspend_ms, subscription=sub,
        expression_type=None,
    )  # fmt: skip
    return client.invoke(
        addr, RemotingCommand.request(RC.PULL_MESSAGE, h.to_ext_fields()), suspend_ms + 10_000
    )


def bodies(resp: RemotingCommand) -> list[bytes]:
    return [m.body for m in iter_stored_messages(resp.body)]


def pull_until(client: BlockingRemotingClient, addr: str, topic: str, offset: int, n: int) -> list[bytes]:
    deadline = time.monotonic() + 10
    got: list[bytes] = []
    while len(got) < n and time.monotonic() < deadline:
        r = pull(client, addr, topic, offset + len(got), suspend_ms=1000)
        if r.code == R.SUCCESS:
            got += bodies(r)
    return got


def route(client: BlockingRemotingClient, namesrv: ServerProcess, topic: str) -> RemotingCommand:
    return client.invoke(
        namesrv.addr, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5000
    )


def test_send_pull_query_and_registration(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    with spawn_broker(tmp_path, namesrv.addr, **SMALL_STORE) as broker:
        addr = broker.addr
        r = send(client, addr, "E2E", b"one", props="TAGS\x01TagA\x02KEYS\x01key-1\x02")
        assert r.code == R.SUCCESS, r
        msg_id = r.ext_fields["msgId"]
        send(client, addr, "E2E", b"two", props="TAGS\x01TagB\x02")
        assert pull_until(client, addr, "E2E", 0, 2) == [b"one", b"two"]
        assert bodies(pull(client, addr, "E2E", 0, sub="TagB")) == [b"two"]
        # long polling: a parked pull returns soon after a send
        result: list[RemotingCommand] = []
        other = BlockingRemotingClient()
        t = threading.Thread(target=lambda: result.append(pull(other, addr, "E2E", 2, suspend_ms=20_000)))
        started = time.monotonic()
        t.start()
        time.sleep(0.5)
        send(client, addr, "E2E", b"three")
        t.join(15)
        other.close()
        assert result and bodies(result[0]) == [b"three"] and time.monotonic() - started < 15
        # query by key and view by id
        qh = QueryMessageRequestHeader(
            topic="E2E", key="key-1", max_num=32, begin_timestamp=0, end_timestamp=2**62
        )
        r = client.invoke(addr, RemotingCommand.request(RC.QUERY_MESSAGE, qh.to_ext_fields()), 5000)
        assert bodies(r) == [b"one"]
        _, _, offset = decode_offset_msg_id(msg_id)
        vh = ViewMessageRequestHeader(offset=offset).to_ext_fields()
        assert bodies(client.invoke(addr, RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, vh), 5000)) == [
            b"one"
        ]
        # the auto-created topic reached the NameServer at once
        wait_for(lambda: route(client, namesrv, "E2E").code == R.SUCCESS, "the route of E2E", 10)
        r = route(client, namesrv, "E2E")
        assert r.code == R.SUCCESS and b"broker-a" in r.body
        # illegal requests
        assert send(client, addr, "bad topic", b"x").code == R.MESSAGE_ILLEGAL
        assert send(client, addr, "E2E", b"x" * (256 * 1024 + 1)).code == R.MESSAGE_ILLEGAL
        assert (
            send(client, addr, "E2E", b"x", props="K\x01" + "v" * 33_000 + "\x02").code == R.MESSAGE_ILLEGAL
        )
        assert pull(client, addr, "E2E", 0, queue_id=77).code == R.SYSTEM_ERROR
        assert pull(client, addr, "E2E", 10_000).code == R.PULL_OFFSET_MOVED
        assert client.invoke(addr, RemotingCommand.request(31_999), 5000).code == R.REQUEST_CODE_NOT_SUPPORTED
        # a garbage frame closes only its own connection
        host, port = addr.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"\x7f\xff\xff\xff garbage")
            sock.settimeout(5)
            try:
                assert sock.recv(100) == b""
            except ConnectionResetError:
                pass
        assert send(client, addr, "E2E", b"after-garbage").code == R.SUCCESS
    # clean shutdown unregisters the broker
    wait_for(lambda: route(client, namesrv, "E2E").code != R.SUCCESS, "the route of E2E to go", 10)
    assert route(client, namesrv, "E2E").code == R.TOPIC_NOT_EXIST


def test_auto_create_off_rejects_unknown_topic(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    with spawn_broker(tmp_path, namesrv.addr, autoCreateTopicEnable=False, **SMALL_STORE) as broker:
        r = send(client, broker.addr, "Nope", b"x")
        assert r.code == R.TOPIC_NOT_EXIST
        r = client.invoke(broker.addr, RemotingCommand.request(RC.GET_ALL_TOPIC_CONFIG), 5000)
        assert "TBW102" not in json.loads(r.body)["topicConfigTable"]


def test_sigterm_then_restart_keeps_data(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    broker = spawn_broker(tmp_path, namesrv.addr, **SMALL_STORE)
    for i in range(20):
        assert send(client, broker.addr, "Durable", b"m%d" % i).code == R.SUCCESS
    upd = {"consumerGroup": "cg", "topic": "Durable", "queueId": "0", "commitOffset": "7"}
    client.invoke(broker.addr, RemotingCommand.request(RC.UPDATE_CONSUMER_OFFSET, upd), 5000)
    assert broker.terminate() == 0
    with spawn_broker(tmp_path, namesrv.addr, **SMALL_STORE) as again:
        assert pull_until(client, again.addr, "Durable", 0, 20) == [b"m%d" % i for i in range(20)]
        q = {"consumerGroup": "cg", "topic": "Durable", "queueId": "0"}
        r = client.invoke(again.addr, RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET, q), 5000)
        assert r.ext_fields["offset"] == "7"


def test_sigkill_with_sync_flush_keeps_acknowledged(
    tmp_path: Path, namesrv: ServerProcess, client: BlockingRemotingClient
) -> None:
    conf: dict[str, Any] = dict(SMALL_STORE, flushDiskType="SYNC_FLUSH")
    broker = spawn_broker(tmp_path, namesrv.addr, **conf)
    acked = [
        b"k%d" % i for i in range(30) if send(client, broker.addr, "Synced", b"k%d" % i).code == R.SUCCESS
    ]
    assert len(acked) == 30
    broker.kill9()
    client.close()
    fresh = BlockingRemotingClient()
    try:
        with spawn_broker(tmp_path, namesrv.addr, **conf) as again:
            assert pull_until(fresh, again.addr, "Synced", 0, 30) == acked
    finally:
        fresh.close()
