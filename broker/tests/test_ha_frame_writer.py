"""The HA writer's frames (``rocketq.broker.ha.frame_writer.FrameWriter``): ``sendmsg`` straight from
the CommitLog views, the transport for what the socket did not take, every byte once and in order,
over a real loopback TCP connection whose send buffer is too small for a burst."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from rocketq.broker.ha.frame_writer import FrameWriter, unsent


def test_unsent_cuts_the_parts_at_the_first_unsent_byte() -> None:
    parts: list[bytes | memoryview] = [b"abc", memoryview(b"defgh"), b"ij"]
    assert [bytes(p) for p in unsent(parts, 0)] == [b"abc", b"defgh", b"ij"]
    assert [bytes(p) for p in unsent(parts, 2)] == [b"c", b"defgh", b"ij"]
    assert [bytes(p) for p in unsent(parts, 3)] == [b"defgh", b"ij"]
    assert [bytes(p) for p in unsent(parts, 9)] == [b"j"]
    assert unsent(parts, 10) == []
    wide = memoryview(bytes(range(16))).cast("I")  # a view of 4-byte items is cut at a byte
    assert [bytes(p) for p in unsent([wide], 5)] == [bytes(range(5, 16))]


async def _pair() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, socket.socket]:
    """(reader, writer) of the server side of a loopback connection with a 4 KiB send buffer, and
    the client's blocking socket, which reads nothing until told to."""
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
        asyncio.get_running_loop().create_future()
    )

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result((reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await asyncio.to_thread(client.connect, ("127.0.0.1", port))
    reader, writer = await asyncio.wait_for(accepted, 5.0)
    server.close()
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return reader, writer, client


def _read_all(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(10.0)
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return bytes(got)


def test_a_burst_the_socket_cannot_take_arrives_whole_and_in_order() -> None:
    payload = os.urandom(1 << 20)
    view = memoryview(payload)

    async def main() -> bytes:
        _reader, writer, client = await _pair()
        frames = FrameWriter(writer)
        try:
            assert frames.sock is not None  # plain TCP: the sendmsg path
            frames.write([view[:300_000], b"header", view[300_000:600_000]])
            # the socket took what its buffers hold; the transport holds the rest, in order
            assert 0 < writer.transport.get_write_buffer_size() < 600_006
            frames.write([view[600_000:]])  # goes behind it, through the transport
            reading = asyncio.create_task(asyncio.to_thread(_read_all, client, len(payload) + 6))
            await asyncio.wait_for(writer.drain(), 10.0)
            got = await reading
            frames.write([b"tail"])  # nothing buffered now: sendmsg again
            assert writer.transport.get_write_buffer_size() == 0
            assert await asyncio.to_thread(_read_all, client, 4) == b"tail"
            return got
        finally:
            frames.close()
            writer.close()
            client.close()

    got = asyncio.run(main())
    assert got == payload[:300_000] + b"header" + payload[300_000:]


def test_closing_the_writer_closes_the_connection() -> None:
    """The duplicate descriptor must not keep the connection open once the transport closes."""

    async def main() -> bytes:
        _reader, writer, client = await _pair()
        frames = FrameWriter(writer)
        frames.write([b"last words"])
        frames.close()
        assert frames.sock is None
        writer.close()
        await writer.wait_closed()
        try:
            return await asyncio.to_thread(_read_all, client, 1 << 20)  # until EOF
        finally:
            client.close()

    assert asyncio.run(main()) == b"last words"


class _TlsWriter:
    """A writer whose transport is TLS (what ``get_extra_info`` tells of one)."""

    def __init__(self, sock: socket.socket) -> None:
        self.written: list[bytes] = []
        self.transport = self
        self.extra = {"socket": sock, "ssl_object": object()}

    def get_extra_info(self, name: str) -> Any:
        return self.extra.get(name)

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        self.written += [bytes(p) for p in parts]


def test_tls_connections_write_through_the_transport() -> None:
    with socket.socket() as sock:
        writer = _TlsWriter(sock)
        frames = FrameWriter(writer)  # type: ignore[arg-type]
        assert frames.sock is None
        frames.write([b"a", memoryview(b"b")])
    assert writer.written == [b"a", b"b"]
