"""TLS in the transports: ``RemotingServer`` in each ``tls.server.mode`` against TLS and plaintext
clients (asyncio and blocking), on 127.0.0.1 with a test CA made by ``openssl``; and
``TlsConfig``'s reading of RocketMQ's ``tls.*`` keys.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.errors import RemotingConnectError, RemotingError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import has_openssl, make_server_certs
from rocketq.client.transport.aio import RemotingClient
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.client.transport.channel import Channel
from rocketq.client.transport.tls import ClientAuth, TlsConfig, TlsConfigError, TlsMode, client_ssl_context
from rocketq.server import RemotingServer
from rocketq.server.tls_config import tls_config_from_properties

CODE = 4242
TIMEOUT_MS = 5_000  # generous: only there so that a regression fails instead of hanging


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if not has_openssl():
        pytest.skip("needs the openssl command")
    return make_server_certs(tmp_path_factory.mktemp("tls-unit"))


def _tls_config(certs: dict[str, str], mode: str) -> TlsConfig:
    return TlsConfig.from_properties(
        {"tls.server.mode": mode, "tls.server.certPath": certs["cert"], "tls.server.keyPath": certs["key"]}
    )


async def _echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, "echo", body=request.body)


async def _serve(cfg: TlsConfig) -> RemotingServer:
    server = RemotingServer(tls_mode=cfg.mode, ssl_context=cfg.server_context())
    server.register(CODE, _echo)
    await server.start()
    return server


async def _ask(addr: str, *, tls: bool, ca: str) -> RemotingCommand:
    client = RemotingClient(ssl_context=client_ssl_context(trust_cert_path=ca) if tls else None)
    try:
        return await client.invoke(addr, RemotingCommand.request(CODE, body=b"hi"), TIMEOUT_MS)
    finally:
        await client.close()


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_tls_client_is_served(certs: dict[str, str], mode: str) -> None:
    async def scenario() -> None:
        server = await _serve(_tls_config(certs, mode))
        try:
            response = await _ask(server.address, tls=True, ca=certs["ca"])
            assert (response.code, response.body) == (ResponseCode.SUCCESS, b"hi")
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_permissive_serves_plaintext_too(certs: dict[str, str]) -> None:
    async def scenario() -> None:
        server = await _serve(_tls_config(certs, "permissive"))
        try:
            response = await _ask(server.address, tls=False, ca=certs["ca"])
            assert (response.code, response.body) == (ResponseCode.SUCCESS, b"hi")
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_enforcing_answers_plaintext_with_the_reason(certs: dict[str, str]) -> None:
    async def scenario() -> None:
        server = await _serve(_tls_config(certs, "enforcing"))
        try:
            response = await _ask(server.address, tls=False, ca=certs["ca"])
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "requires TLS" in (response.remark or "")
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_tls_client_against_plaintext_server_fails_to_connect(certs: dict[str, str]) -> None:
    async def scenario() -> None:
        server = await _serve(TlsConfig())
        try:
            with pytest.raises(RemotingError):
                await _ask(server.address, tls=True, ca=certs["ca"])
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_blocking_client_over_tls_and_untrusted_ca(certs: dict[str, str], tmp_path: Path) -> None:
    async def scenario() -> None:
        server = await _serve(_tls_config(certs, "enforcing"))
        try:
            ok = BlockingRemotingClient(ssl_context=client_ssl_context(trust_cert_path=certs["ca"]))
            bad = BlockingRemotingClient(ssl_context=client_ssl_context(trust_cert_path=certs["cert"]))
            try:
                response = await asyncio.to_thread(
                    ok.invoke, server.address, RemotingCommand.request(CODE, body=b"b" * 300_000), TIMEOUT_MS
                )
                assert response.body == b"b" * 300_000
                with pytest.raises(RemotingConnectError, match="verify"):
                    await asyncio.to_thread(
                        bad.invoke, server.address, RemotingCommand.request(CODE), TIMEOUT_MS
                    )
            finally:
                ok.close()
                bad.close()
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_tls_config_keys_and_config_file(certs: dict[str, str], tmp_path: Path) -> None:
    conf = tmp_path / "tls.properties"
    conf.write_text(
        f"tls.server.mode=enforcing\ntls.server.certPath={certs['cert']}\ntls.server.keyPath={certs['key']}\n"
        f"tls.server.need.client.auth=optional\ntls.server.trustCertPath={certs['ca']}\n",
        encoding="utf-8",
    )
    cfg = tls_config_from_properties(
        {"tls.config.file": str(conf), "tlsMode": "permissive", "tls.enable": "true"}
    )
    assert cfg.mode is TlsMode.PERMISSIVE  # given directly: overrides the file
    assert cfg.server_need_client_auth is ClientAuth.OPTIONAL
    assert cfg.enable and cfg.client_context() is not None
    assert cfg.server_context() is not None
    assert TlsConfig.from_properties(cfg.to_properties()) == cfg
    assert TlsConfig().server_context() is None and TlsConfig().client_context() is None


def test_tls_config_errors_name_the_key(certs: dict[str, str]) -> None:
    with pytest.raises(TlsConfigError, match=r"tls\.server\.mode"):
        TlsConfig.from_properties({"tls.server.mode": "sometimes"})
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath"):
        TlsConfig.from_properties({"tls.server.mode": "enforcing"})
    with pytest.raises(TlsConfigError, match="cannot load certificate"):
        TlsConfig.from_properties(
            {
                "tls.server.mode": "enforcing",
                "tls.server.certPath": certs["ca"],
                "tls.server.keyPath": "/nonexistent",
            }
        ).server_context()


def test_blocking_tls_connection_shared_by_threads(certs: dict[str, str]) -> None:
    """Many threads write while the reader thread reads one TLS connection (one lock for OpenSSL)."""

    async def scenario() -> None:
        server = await _serve(_tls_config(certs, "enforcing"))
        client = BlockingRemotingClient(ssl_context=client_ssl_context(trust_cert_path=certs["ca"]))

        def worker(n: int) -> None:
            for i in range(30):
                body = bytes([n, i % 256]) * 40_000
                response = client.invoke(server.address, RemotingCommand.request(CODE, body=body), TIMEOUT_MS)
                assert response.body == body

        try:
            await asyncio.gather(*(asyncio.to_thread(worker, n) for n in range(6)))
        finally:
            client.close()
            await server.stop()

    asyncio.run(scenario())


def test_client_config_tls_keys(certs: dict[str, str]) -> None:
    cfg = ClientConfig.from_properties({"useTLS": "true", "tls.client.trustCertPath": certs["ca"]})
    ctx = cfg.ssl_context()
    assert ctx is not None and ctx.verify_mode is ssl.CERT_REQUIRED and not ctx.check_hostname
    unverified = ClientConfig.from_properties({"tls.enable": "true"}).ssl_context()
    assert unverified is not None and unverified.verify_mode is ssl.CERT_NONE  # RocketMQ's default
    assert ClientConfig().ssl_context() is None
