"""Tests of the blocking client against an asyncio RemotingServer running in a background thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from rocketq.client.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand, SerializeType
from rocketq.client.testing import free_port, wait_value
from rocketq.client.transport.aio import Channel
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.server import RemotingServer

ECHO, SLOW, BOOM, CALLBACK, RECORD = 1000, 1001, 1002, 1003, 1004
T = 5000


class ServerThread:
    """An asyncio RemotingServer on its own event loop thread."""

    def __init__(self, **kwargs: object) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = RemotingServer(**kwargs)  # type: ignore[arg-type]
        self.release = threading.Event()
        self.recorded: list[str] = []
        self.server.register(ECHO, self.echo)
        self.server.register(SLOW, self.slow)
        self.server.register(BOOM, self.boom)
        self.server.register(CALLBACK, self.callback)
        self.server.register(RECORD, self.record)
        self.call(self.server.start())
        self.addr = self.server.address

    def call(self, coro: object, timeout: float = 10) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    async def echo(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields={"echo": cmd.ext_fields.get("x", "")}, body=cmd.body
        )

    async def slow(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def boom(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        raise RuntimeError("processor failed")

    async def callback(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        back = await channel.invoke(RemotingCommand.request(39, {"msgId": "M1"}), T)
        return cmd.make_response(back.code, remark=back.remark)

    async def record(self, cmd: RemotingCommand, channel: Channel) -> None:
        self.recorded.append(cmd.ext_fields.get("x", ""))
        return None

    def stop(self) -> None:
        self.release.set()
        self.call(self.server.stop(grace_s=1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[ServerThread]:
    st = ServerThread(serialize_type=SerializeType.ROCKETMQ)
    yield st
    st.stop()


@pytest.fixture
def client() -> Iterator[BlockingRemotingClient]:
    c = BlockingRemotingClient()
    yield c
    c.close()


def test_round_trip(server: ServerThread, client: BlockingRemotingClient) -> None:
    resp = client.invoke(server.addr, RemotingCommand.request(ECHO, {"x": "1"}, b"body"), T)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields == {"echo": "1"} and resp.body == b"body"
    assert resp.serialize_type == SerializeType.ROCKETMQ
    binary = BlockingRemotingClient(serialize_type=SerializeType.ROCKETMQ)
    try:
        assert (
            binary.invoke(server.addr, RemotingCommand.request(ECHO, {"x": "2"}), T).ext_fields["echo"] == "2"
        )
    finally:
        binary.close()


def test_many_threads_share_one_connection(server: ServerThread, client: BlockingRemotingClient) -> None:
    def work(t: int) -> list[str]:
        out = []
        for i in range(50):
            resp = client.invoke(server.addr, RemotingCommand.request(ECHO, {"x": f"{t}-{i}"}), T)
            out.append(resp.ext_fields["echo"])
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    assert results == [[f"{t}-{i}" for i in range(50)] for t in range(8)]
    assert len(server.server.channels) == 1


def test_timeout_then_connection_still_usable(server: ServerThread, client: BlockingRemotingClient) -> None:
    with pytest.raises(RemotingTimeoutError) as info:
        client.invoke(server.addr, RemotingCommand.request(SLOW), 100)
    assert server.addr in str(info.value) and str(SLOW) in str(info.value) and "100 ms" in str(info.value)
    server.release.set()
    assert (
        client.invoke(server.addr, RemotingCommand.request(ECHO, {"x": "ok"}), T).ext_fields["echo"] == "ok"
    )


def test_oneway_unknown_code_and_processor_error(
    server: ServerThread, client: BlockingRemotingClient
) -> None:
    client.invoke_oneway(server.addr, RemotingCommand.request(RECORD, {"x": "one"}))
    resp = client.invoke(server.addr, RemotingCommand.request(4321), T)
    assert (
        resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        and resp.remark == " request type 4321 not supported"
    )
    resp = client.invoke(server.addr, RemotingCommand.request(BOOM), T)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "processor failed"
    assert server.recorded == ["one"]


def test_server_calls_back_a_registered_processor(
    server: ServerThread, client: BlockingRemotingClient
) -> None:
    seen: list[str] = []

    def check_state(cmd: RemotingCommand, addr: str) -> RemotingCommand:
        seen.append(addr)
        # a processor may use the client itself (it runs on the callback pool, not the reader)
        client.invoke(addr, RemotingCommand.request(ECHO), T)
        return cmd.make_response(ResponseCode.SUCCESS, remark="state of " + cmd.ext_fields["msgId"])

    client.register(39, check_state)
    resp = client.invoke(server.addr, RemotingCommand.request(CALLBACK), T)
    assert resp.code == ResponseCode.SUCCESS and resp.remark == "state of M1"
    assert seen == [server.addr]

    def failing(cmd: RemotingCommand, addr: str) -> RemotingCommand:
        raise ValueError("no such transaction")

    client.register(39, failing)
    resp = client.invoke(server.addr, RemotingCommand.request(CALLBACK), T)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "no such transaction"


def test_connect_errors_and_reconnect_after_server_closes(
    server: ServerThread, client: BlockingRemotingClient
) -> None:
    port = free_port()
    with pytest.raises(RemotingConnectError) as info:
        client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1000)
    assert f"127.0.0.1:{port}" in str(info.value)
    client.invoke(server.addr, RemotingCommand.request(ECHO), T)

    async def drop_all() -> None:
        for ch in server.server.channels:
            ch.close()
            await ch.wait_closed()

    server.call(drop_all())
    # the reader thread notices the close; the next call reconnects
    resp = wait_value(
        lambda: client.invoke(server.addr, RemotingCommand.request(ECHO, {"x": "back"}), T),
        "a call on a new connection",
        5,
        interval_s=0.01,
        retry_on=(RemotingError,),
    )
    assert resp.ext_fields["echo"] == "back"


def test_close_fails_waiting_calls(server: ServerThread) -> None:
    client = BlockingRemotingClient()
    errors: list[BaseException] = []

    def wait_slow() -> None:
        try:
            client.invoke(server.addr, RemotingCommand.request(SLOW), 30_000)
        except RemotingError as exc:
            errors.append(exc)

    t = threading.Thread(target=wait_slow)
    t.start()
    while server.server.running_requests < 1:
        time.sleep(0.01)
    client.close()
    t.join(5)
    assert len(errors) == 1 and not isinstance(errors[0], RemotingTimeoutError)
    with pytest.raises(RemotingError):
        client.invoke(server.addr, RemotingCommand.request(ECHO), T)
