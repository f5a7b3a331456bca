"""TLS connections use the buffered protocol (decrypting into one reused buffer) on both sides,
and frames of every size — many per read, one spread over many reads — arrive intact."""

from __future__ import annotations

import asyncio
import os

import pytest

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import has_openssl, make_server_certs
from rocketq.client.transport.aio import RemotingClient
from rocketq.client.transport.channel import TLS_READ_BUFFER_SIZE, Channel, TlsRemotingProtocol
from rocketq.client.transport.tls import TlsConfig, client_ssl_context
from rocketq.server import RemotingServer

CODE = 4242
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if not has_openssl():
        pytest.skip("needs the openssl command")
    return make_server_certs(tmp_path_factory.mktemp("tls-buffered"))


def test_frames_of_every_size_arrive_intact_over_tls(certs: dict[str, str]) -> None:
    seen: list[object] = []

    async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        seen.append(channel._protocol)  # the server side's protocol of this connection
        return request.make_response(ResponseCode.SUCCESS, "echo", body=request.body)

    async def scenario() -> None:
        cfg = TlsConfig.from_properties(
            {
                "tls.server.mode": "enforcing",
                "tls.server.certPath": certs["cert"],
                "tls.server.keyPath": certs["key"],
            }
        )
        server = RemotingServer(tls_mode=cfg.mode, ssl_context=cfg.server_context())
        server.register(CODE, echo)
        await server.start()
        client = RemotingClient(ssl_context=client_ssl_context(trust_cert_path=certs["ca"]))
        try:
            # small frames many to a read, frames around the read buffer's size, and a frame
            # that takes many reads; sent concurrently so that reads mix them
            sizes = [0, 1, 100, 16_383, 16_385, TLS_READ_BUFFER_SIZE - 30, TLS_READ_BUFFER_SIZE + 1, 3 << 20]
            bodies = [os.urandom(n) for n in sizes] + [os.urandom(200) for _ in range(64)]
            answers = await asyncio.gather(
                *(
                    client.invoke(server.address, RemotingCommand.request(CODE, body=b), TIMEOUT_MS)
                    for b in bodies
                )
            )
            assert [a.body for a in answers] == bodies
            assert {a.code for a in answers} == {ResponseCode.SUCCESS}
            mine = client._conns[server.address]
            assert isinstance(mine, TlsRemotingProtocol) and isinstance(mine, asyncio.BufferedProtocol)
            assert seen and all(isinstance(p, TlsRemotingProtocol) for p in seen)
        finally:
            await client.close()
            await server.stop()
        assert mine._read_view is None  # the buffer goes with the connection

    asyncio.run(scenario())


def test_plaintext_connections_keep_the_plain_protocol() -> None:
    async def scenario() -> None:
        server = RemotingServer()

        async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
            return request.make_response(ResponseCode.SUCCESS, "echo", body=request.body)

        server.register(CODE, echo)
        await server.start()
        client = RemotingClient()
        try:
            answer = await client.invoke(server.address, RemotingCommand.request(CODE, body=b"x"), TIMEOUT_MS)
            assert answer.body == b"x"
            assert not isinstance(client._conns[server.address], asyncio.BufferedProtocol)
        finally:
            await client.close()
            await server.stop()

    asyncio.run(scenario())
