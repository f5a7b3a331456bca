"""The asyncio transport over real loopback sockets: RemotingClient and rocketq.server.RemotingServer."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from rocketq.client.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand, SerializeType, decode_command, encode_command
from rocketq.client.remoting.frame import FrameDecoder
from rocketq.client.testing import free_port
from rocketq.client.transport.aio import Channel, RemotingClient
from rocketq.server import RemotingServer

ECHO = 1000
SLOW = 1001
BOOM = 1002
CALLBACK = 1003
RECORD = 1004
T = 3000  # generous timeout for calls expected to succeed


async def echo(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
    return cmd.make_response(
        ResponseCode.SUCCESS, ext_fields={"echo": cmd.ext_fields.get("x", "")}, body=cmd.body
    )


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), 30))


async def started(server: RemotingServer) -> str:
    host, port = await server.start()
    return f"{host}:{port}"


def test_round_trip_and_serialize_types() -> None:
    async def main() -> None:
        server = RemotingServer(serialize_type=SerializeType.ROCKETMQ)
        server.register(ECHO, echo)
        addr = await started(server)
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"x": "1"}, b"payload"), T)
            assert resp.code == ResponseCode.SUCCESS and resp.is_response
            assert resp.ext_fields == {"echo": "1"} and resp.body == b"payload"
            # the server answers in its own configured type, not the request's
            assert resp.serialize_type == SerializeType.ROCKETMQ
        finally:
            await client.close()
            await server.stop()

    run(main)


def test_many_requests_in_flight_on_one_connection() -> None:
    async def slow_echo(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep((int(cmd.ext_fields["x"]) % 7) / 1000)
        return await echo(cmd, channel)

    async def main() -> None:
        server = RemotingServer()
        server.register(ECHO, slow_echo)
        addr = await started(server)
        client = RemotingClient()
        try:
            calls = [client.invoke(addr, RemotingCommand.request(ECHO, {"x": str(i)}), T) for i in range(300)]
            responses = await asyncio.gather(*calls)
            assert [r.ext_fields["echo"] for r in responses] == [str(i) for i in range(300)]
            assert len(server.channels) == 1
        finally:
            await client.close()
            await server.stop()

    run(main)


def test_timeout_names_address_code_and_timeout_and_connection_survives() -> None:
    release = asyncio.Event()

    async def slow(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        await release.wait()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def main() -> None:
        server = RemotingServer()
        server.register(SLOW, slow)
        server.register(ECHO, echo)
        addr = await started(server)
        client = RemotingClient()
        try:
            with pytest.raises(RemotingTimeoutError) as info:
                await client.invoke(addr, RemotingCommand.request(SLOW), 100)
            text = str(info.value)
            assert addr in text and str(SLOW) in text and "100 ms" in text
            release.set()  # the late response is dropped, the connection stays usable
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"x": "after"}), T)
            assert resp.ext_fields["echo"] == "after"
        finally:
            await client.close()
            await server.stop()

    run(main)


def _raw_request(code: int, opaque: int, *, oneway: bool = False) -> bytes:
    cmd = RemotingCommand.request(code, oneway=oneway)
    cmd.opaque = opaque
    return encode_command(cmd)


def _read_frame(sock: socket.socket) -> RemotingCommand | None:
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            return None
        frames = decoder.feed(data)
        if frames:
            return decode_command(frames[0])


def test_oneway_requests_are_never_answered() -> None:
    seen: list[int] = []

    async def record(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        seen.append(cmd.opaque)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def main() -> None:
        server = RemotingServer()
        server.register(RECORD, record)
        host, port = await server.start()
        loop = asyncio.get_running_loop()

        def talk() -> RemotingCommand | None:
            with socket.create_connection((host, port), timeout=5) as sock:
                sock.sendall(_raw_request(RECORD, 7, oneway=True) + _raw_request(4242, 8, oneway=True))
                sock.sendall(_raw_request(RECORD, 9))
                return _read_frame(sock)

        first = await loop.run_in_executor(None, talk)
        assert first is not None and first.opaque == 9  # nothing for 7 (oneway) nor 8 (unknown oneway)
        assert seen == [7, 9]
        client = RemotingClient()
        await client.invoke_oneway(f"{host}:{port}", RemotingCommand.request(RECORD))
        await client.invoke(f"{host}:{port}", RemotingCommand.request(RECORD), T)
        assert len(seen) == 4
        await client.close()
        await server.stop()

    run(main)


def test_server_invokes_the_client_over_the_same_connection() -> None:
    async def callback(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        # the server calls the client back before answering
        back = await channel.invoke(RemotingCommand.request(40, {"consumerGroup": "g"}), T)
        return cmd.make_response(ResponseCode.SUCCESS, remark=back.remark)

    async def on_notify(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, remark="client saw " + cmd.ext_fields["consumerGroup"])

    async def main() -> None:
        server = RemotingServer()
        server.register(CALLBACK, callback)
        addr = await started(server)
        client = RemotingClient()
        client.register(40, on_notify)
        try:
            resp = await client.invoke(addr, RemotingCommand.request(CALLBACK), T)
            assert resp.remark == "client saw g"
            # and a code the client does not handle gets the standard answer
            channel = server.channels[0]
            back = await channel.invoke(RemotingCommand.request(41), T)
            assert back.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await client.close()
            await server.stop()

    run(main)


def test_unknown_code_and_processor_exception() -> None:
    async def boom(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        raise ValueError("boom: bad header")

    async def main() -> None:
        server = RemotingServer()
        server.register(BOOM, boom)
        addr = await started(server)
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, RemotingCommand.request(9999), T)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert resp.remark == " request type 9999 not supported"
            resp = await client.invoke(addr, RemotingCommand.request(BOOM), T)
            assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "boom: bad header"
        finally:
            await client.close()
            await server.stop()

    run(main)


def test_malformed_frame_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        server = RemotingServer()
        server.register(ECHO, echo)
        host, port = await server.start()
        addr = f"{host}:{port}"
        client = RemotingClient()
        await client.invoke(addr, RemotingCommand.request(ECHO), T)
        loop = asyncio.get_running_loop()

        def send_garbage(payload: bytes) -> bytes:
            with socket.create_connection((host, port), timeout=5) as sock:
                sock.sendall(payload)
                return sock.recv(100)  # b"" once the server closed us

        bad = [
            struct.pack(">i", 2),
            struct.pack(">ii", 1 << 30, 0),
            struct.pack(">ii", 20, 0x05000000) + b"x" * 16,
        ]
        for payload in bad:
            assert await loop.run_in_executor(None, send_garbage, payload) == b""
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"x": "still"}), T)
        assert resp.ext_fields["echo"] == "still"
        await client.close()
        await server.stop()

    with caplog.at_level(logging.WARNING, logger="rocketq.transport"):
        run(main)
    warnings = [r.getMessage() for r in caplog.records if "malformed frame" in r.getMessage()]
    assert len(warnings) == 3 and all("127.0.0.1:" in w for w in warnings)


def test_system_busy_when_the_queue_is_full_and_per_connection_backpressure() -> None:
    release = asyncio.Event()

    async def blocked(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        await release.wait()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def main() -> None:
        server = RemotingServer(max_queued_requests=3, max_inflight_per_connection=2)
        server.register(SLOW, blocked)
        addr = await started(server)
        c1, c2 = RemotingClient(), RemotingClient()
        try:
            # c1 sends 4: only 2 run (reading paused), the rest wait in the socket
            first = [
                asyncio.ensure_future(c1.invoke(addr, RemotingCommand.request(SLOW), T)) for _ in range(4)
            ]
            while server.running_requests < 2:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert server.running_requests == 2
            second = asyncio.ensure_future(c2.invoke(addr, RemotingCommand.request(SLOW), T))
            while server.running_requests < 3:
                await asyncio.sleep(0.01)
            busy = await c2.invoke(addr, RemotingCommand.request(SLOW), T)
            assert busy.code == ResponseCode.SYSTEM_BUSY
            assert busy.remark is not None and busy.remark.startswith("[REJECTREQUEST]system busy")
            release.set()
            results = await asyncio.gather(*first, second)
            assert [r.code for r in results] == [ResponseCode.SUCCESS] * 5
        finally:
            await c1.close()
            await c2.close()
            await server.stop()

    run(main)


def test_graceful_stop_lets_running_requests_answer_forced_stop_does_not() -> None:
    async def slowish(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep(0.3)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def main() -> None:
        for grace in (5.0, 0.0):
            server = RemotingServer()
            server.register(SLOW, slowish)
            addr = await started(server)
            client = RemotingClient()
            call = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW), T))
            while server.running_requests < 1:
                await asyncio.sleep(0.01)
            await server.stop(grace_s=grace)
            if grace:
                assert (await call).code == ResponseCode.SUCCESS
            else:
                with pytest.raises(RemotingError):
                    await call
            with pytest.raises(RemotingConnectError):  # no longer accepting
                await RemotingClient().invoke(addr, RemotingCommand.request(SLOW), 500)
            await client.close()

    run(main)


def test_connect_error_names_address_and_client_reconnects() -> None:
    async def main() -> None:
        port = free_port()
        with pytest.raises(RemotingConnectError) as info:
            await RemotingClient().invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1000)
        assert f"127.0.0.1:{port}" in str(info.value)
        with pytest.raises(RemotingConnectError):
            await RemotingClient().invoke("no-port-here", RemotingCommand.request(ECHO), 1000)

        server = RemotingServer()
        server.register(ECHO, echo)
        addr = await started(server)
        client = RemotingClient()
        await client.invoke(addr, RemotingCommand.request(ECHO), T)
        for channel in server.channels:  # the server drops us
            channel.close()
            await channel.wait_closed()
        await asyncio.sleep(0.05)
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"x": "again"}), T)
        assert resp.ext_fields["echo"] == "again"
        await client.close()
        await server.stop()

    run(main)


def test_channel_listeners_see_open_and_close() -> None:
    events: list[str] = []

    async def main() -> None:
        server = RemotingServer(
            on_channel_open=lambda ch: events.append("open"),
            on_channel_close=lambda ch: events.append("close"),
        )
        server.register(ECHO, echo)
        addr = await started(server)
        client = RemotingClient()
        await client.invoke(addr, RemotingCommand.request(ECHO), T)
        await client.close()
        while "close" not in events:
            await asyncio.sleep(0.01)
        await server.stop()

    run(main)
    assert events == ["open", "close"]
