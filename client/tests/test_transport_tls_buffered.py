"""TLS connections use the buffered protocol (decrypting into one reused buffer) on both sides,
and frames of every size — many per read, one spread over many reads — arrive intact."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.transport.aio import RemotingClient
from rocketq.client.transport.channel import TLS_READ_BUFFER_SIZE, Channel, TlsRemotingProtocol
from rocketq.client.transport.tls import TlsConfig, client_ssl_context
from rocketq.server import RemotingServer

CODE = 4242
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d: Path = tmp_path_factory.mktemp("tls-buffered")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    ca_ext = ("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    openssl(
        "req", "-x509", *ec, *ca_ext, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=ca"
    )
    openssl("req", *ec, "-keyout", "s.key", "-out", "s.csr", "-subj", "/CN=127.0.0.1")
    (d / "s.ext").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    openssl("x509", "-req", "-in", "s.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "s.pem", "-days", "1", "-extfile", "s.ext")  # fmt: skip
    return {"ca": str(d / "ca.pem"), "cert": str(d / "s.pem"), "key": str(d / "s.key")}


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
