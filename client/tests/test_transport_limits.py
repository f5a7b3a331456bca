"""Hostile peers against the asyncio transport: back-pressure, frame-buffer caps, malformed headers.

Real loopback sockets; the hostile side is a raw asyncio stream that writes and never reads.  No
timings are asserted: waits are bounded loops with generous limits (a few seconds) that only
decide how long to wait for a state, never whether it came quickly.
"""

from __future__ import annotations

import asyncio
import json
import platform
import struct
from collections.abc import Awaitable, Callable

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand, decode_command, encode_command
from rocketq.client.remoting.frame import FrameDecoder
from rocketq.client.transport.aio import Channel, RemotingClient
from rocketq.client.transport.channel import ConnectionLimits, RemotingProtocol
from rocketq.server import RemotingServer
from rocketq.server.memory import MemoryTrimmer, malloc_trim

BIG = 1000
ECHO = 1001
T = 3000


async def big(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, body=b"x" * 16 * 1024)


async def echo(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, body=cmd.body)


async def huge(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, body=b"y" * (17 * 1024 * 1024))


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), 60))


def json_frame(header: dict[str, object] | bytes, body: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body


def protocols(server: RemotingServer) -> list[RemotingProtocol]:
    return list(server._protocols)


async def until(pred: Callable[[], bool], limit_s: float = 10.0) -> bool:
    for _ in range(int(limit_s / 0.02)):
        if pred():
            return True
        await asyncio.sleep(0.02)
    return pred()


async def read_responses(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < n:
        data = await asyncio.wait_for(reader.read(65536), 5)
        if not data:
            break
        out += [decode_command(p) for p in decoder.feed(data)]
    return out


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        while True:
            if not await asyncio.wait_for(reader.read(65536), 5):
                return True
    except ConnectionError:
        return True


def test_pipelined_requests_without_reading_stay_under_the_high_water_mark() -> None:
    limits = ConnectionLimits(write_buffer_high_water_mark=256 * 1024, write_buffer_low_water_mark=64 * 1024)

    async def main() -> None:
        server = RemotingServer(limits=limits, max_inflight_per_connection=8)
        server.register(BIG, big)
        server.register(ECHO, echo)
        host, port = await server.start()
        reader, writer = await asyncio.open_connection(host, port)
        client = RemotingClient()
        try:
            request = encode_command(RemotingCommand(code=BIG, opaque=1))
            writer.write(request * 5000)  # 80 MB of answers if all were produced
            await until(lambda: any(p._reading_paused for p in protocols(server)))
            await asyncio.sleep(0.5)  # let the server do whatever it would do
            (proto,) = protocols(server)
            assert proto._reading_paused
            transport = proto._transport
            assert transport is not None
            # one read's worth of requests at most is answered beyond the high-water mark
            assert transport.get_write_buffer_size() < 256 * 1024 + 300 * 16 * 1024
            # another client on the same server is served normally
            resp = await client.invoke(f"{host}:{port}", RemotingCommand.request(ECHO, body=b"hi"), T)
            assert resp.code == ResponseCode.SUCCESS and resp.body == b"hi"
            # reading the answers resumes the hostile connection: every request gets its answer
            answers = await read_responses(reader, 5000)
            assert len(answers) == 5000 and all(a.code == ResponseCode.SUCCESS for a in answers)
        finally:
            writer.close()
            await client.close()
            await server.stop()

    run(main)


def test_unknown_code_flood_without_reading_is_bounded() -> None:
    limits = ConnectionLimits(write_buffer_high_water_mark=128 * 1024, write_buffer_low_water_mark=32 * 1024)

    async def main() -> None:
        server = RemotingServer(limits=limits)
        host, port = await server.start()
        reader, writer = await asyncio.open_connection(host, port)
        try:
            flood = encode_command(RemotingCommand(code=31999, opaque=1)) * 2000

            def paused() -> bool:
                return any(p._reading_paused for p in protocols(server))

            # the answers first fill the kernel's socket buffers (a few MB on loopback, depending
            # on the machine), so flood until the server pauses, bounded in count and time
            for _ in range(200):
                writer.write(flood)
                await asyncio.sleep(0.01)
                if paused():
                    break
            assert await until(paused)
            (proto,) = protocols(server)
            transport = proto._transport
            assert transport is not None
            assert transport.get_write_buffer_size() < 128 * 1024 + 4 * 1024 * 1024
            answers = await read_responses(reader, 10)
            assert answers[0].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            writer.close()
            await server.stop()

    run(main)


def test_incomplete_frames_are_capped_per_connection_and_in_total() -> None:
    limits = ConnectionLimits(
        max_pending_frame_bytes=1024 * 1024, max_pending_frame_bytes_total=3 * 1024 * 1024
    )

    async def main() -> None:
        server = RemotingServer(limits=limits)
        host, port = await server.start()
        dispatcher = server._dispatcher
        try:
            # one connection over the per-connection cap is closed
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">ii", 8 * 1024 * 1024, 2) + b"{}" + b"z" * (2 * 1024 * 1024))
            assert await closed_by_peer(reader)
            writer.close()
            assert await until(lambda: dispatcher.pending_frame_bytes == 0)
            # many connections under the per-connection cap: the total cap closes the later ones
            conns = []
            for _ in range(8):
                r, w = await asyncio.open_connection(host, port)
                w.write(struct.pack(">ii", 8 * 1024 * 1024, 2) + b"{}" + b"z" * (900 * 1024))
                await w.drain()
                conns.append((r, w))
            await until(lambda: len(protocols(server)) <= 3)
            assert dispatcher.pending_frame_bytes <= 3 * 1024 * 1024
            assert 1 <= len(protocols(server)) <= 3
            for _, w in conns:
                w.close()
            assert await until(lambda: not protocols(server))
            assert dispatcher.pending_frame_bytes == 0  # memory accounted back after close
        finally:
            await server.stop()

    run(main)


def test_malformed_headers_are_answered_or_closed() -> None:
    async def main() -> None:
        server = RemotingServer()
        server.register(ECHO, echo)
        server.register(BIG, huge)
        host, port = await server.start()
        try:
            # usable opaque, bad code / extFields / version: answered SYSTEM_ERROR, connection kept
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(json_frame({"code": 1 << 70, "opaque": 7}))
            writer.write(json_frame({"code": ECHO, "opaque": 8, "extFields": [1, 2]}))
            writer.write(json_frame({"code": ECHO, "opaque": 9, "version": "v1"}))
            writer.write(json_frame({"code": ECHO, "opaque": 10, "flag": 2, "version": "x"}))  # oneway
            writer.write(json_frame({"code": ECHO, "opaque": 11}, b"ok"))
            writer.write(json_frame({"code": BIG, "opaque": 12}))  # answer over the frame limit
            answers = {a.opaque: a for a in await read_responses(reader, 5)}
            assert sorted(answers) == [7, 8, 9, 11, 12]
            for opaque in (7, 8, 9, 12):
                assert answers[opaque].code == ResponseCode.SYSTEM_ERROR and answers[opaque].remark
            assert "does not fit in a signed int32" in (answers[7].remark or "")
            assert answers[11].code == ResponseCode.SUCCESS and answers[11].body == b"ok"
            writer.close()
            # no usable opaque, or nesting too deep: the connection is closed
            for bad in (
                json_frame({"code": ECHO, "opaque": 1 << 70}),
                json_frame({"code": ECHO, "opaque": "seven"}),
                json_frame(b"[" * 100_000),
                json_frame(b'{"opaque":1,"code":' + b"[" * 100_000 + b"}"),
                json_frame(b"\xff\xfe not utf-8"),
            ):
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(bad)
                assert await closed_by_peer(reader)
                writer.close()
            # the server is fine
            client = RemotingClient()
            resp = await client.invoke(f"{host}:{port}", RemotingCommand.request(ECHO, body=b"z"), T)
            assert resp.code == ResponseCode.SUCCESS
            await client.close()
        finally:
            await server.stop()

    run(main)


def recording_trimmer() -> tuple[list[int], MemoryTrimmer]:
    """A trimmer due 50 ms after a request, whose ``malloc_trim`` only records its argument."""
    calls: list[int] = []

    def trim(pad: int) -> int:
        calls.append(pad)
        return 1

    return calls, MemoryTrimmer(delay_s=0.05, trim=trim)


async def close_and_expect_one_trim(
    writers: list[asyncio.StreamWriter], server: RemotingServer, calls: list[int]
) -> None:
    """Close ``writers`` together: the server's (recording) trimmer runs once for the burst."""
    for writer in writers:
        writer.close()
    assert await until(lambda: server.trimmer.trims >= 1)
    await asyncio.sleep(0.2)
    assert calls == [0]  # several closes, one trim


def test_closing_a_backpressured_connection_gives_memory_back() -> None:
    """A connection that left responses unread over the high-water mark makes the server trim the
    C heap (malloc_trim, once for a burst of closes, in a worker thread) after it closes; a
    well-behaved connection's close does not."""
    limits = ConnectionLimits(write_buffer_high_water_mark=64 * 1024, write_buffer_low_water_mark=16 * 1024)
    calls, trimmer = recording_trimmer()

    async def main() -> None:
        server = RemotingServer(limits=limits, max_inflight_per_connection=8)
        server.register(BIG, big)
        server.register(ECHO, echo)
        server.trimmer = trimmer
        host, port = await server.start()
        client = RemotingClient()
        try:
            resp = await client.invoke(f"{host}:{port}", RemotingCommand.request(ECHO, body=b"hi"), T)
            assert resp.code == ResponseCode.SUCCESS
            await client.close()
            assert await until(lambda: not protocols(server))
            await asyncio.sleep(0.2)
            assert calls == []  # a client that read its answers: nothing to give back
            hostile = [await asyncio.open_connection(host, port) for _ in range(3)]
            for _, writer in hostile:
                writer.write(encode_command(RemotingCommand(code=BIG, opaque=1)) * 2000)
            assert await until(lambda: sum(p.backpressured for p in protocols(server)) == 3)
            await close_and_expect_one_trim([writer for _, writer in hostile], server, calls)
        finally:
            await client.close()
            await server.stop()

    run(main)


def test_closing_a_connection_with_a_large_incomplete_frame_gives_memory_back() -> None:
    """A peer that stopped halfway through a large frame made the server hold the frame's first
    part; when it closes (or is aborted for the cap) the server trims the C heap once for the
    burst.  A peer whose incomplete frame was small does not make it trim."""
    calls, trimmer = recording_trimmer()
    half = struct.pack(">ii", 16 * 1024 * 1024 - 8, 2) + b"{}"

    async def main() -> None:
        server = RemotingServer(limits=ConnectionLimits())
        server.trimmer = trimmer
        host, port = await server.start()
        try:
            _, small = await asyncio.open_connection(host, port)
            small.write(half + b"s" * 1000)
            await small.drain()
            assert await until(lambda: any(p._pending_frame_bytes > 0 for p in protocols(server)))
            small.close()
            assert await until(lambda: not protocols(server))
            await asyncio.sleep(0.2)
            assert calls == []  # 1 KB held: nothing worth giving back
            stalled = [await asyncio.open_connection(host, port) for _ in range(3)]
            for _, writer in stalled:
                writer.write(half + b"z" * (2 * 1024 * 1024))
                await writer.drain()
            assert await until(
                lambda: sum(p._pending_frame_bytes >= 2 * 1024 * 1024 for p in protocols(server)) == 3
            )
            assert not any(p.backpressured for p in protocols(server))
            await close_and_expect_one_trim([writer for _, writer in stalled], server, calls)
        finally:
            await server.stop()

    run(main)


def test_malloc_trim_is_found_on_glibc() -> None:
    if platform.libc_ver()[0] == "glibc":
        assert malloc_trim is not None and malloc_trim(0) in (0, 1)
