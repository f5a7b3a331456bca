"""TLS on the remoting ports, with real mqnamesrv/mqbroker processes and a test CA made here.

The test CA, the server certificate (SAN IP:127.0.0.1) and a second, unrelated CA are made with
the ``openssl`` command line.  Checked: an ``enforcing`` NameServer and broker answer a plaintext
request with a clear error (not a hang) and serve producers, consumers and mqadmin over TLS
(the broker registers with the NameServer over TLS too); a client that does not trust the
server's CA cannot connect; a ``permissive`` broker serves TLS and plaintext clients on the same
port.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.errors import MQBrokerError, RemotingConnectError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    ha_max_offset,
    produce_and_consume,
    spawn_broker,
    spawn_namesrv,
    wait_for,
    wait_route,
)
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.client.transport.tls import client_ssl_context

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

# A plaintext request to an enforcing server is answered at once; this bound is only there so that
# a regression shows up as a failure instead of a hung test run.
ANSWER_BOUND_MS = 5_000


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return cert, key


def make_test_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated second CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _make_ca(directory, "test-ca")
    other_ca, _ = _make_ca(directory, "other-ca")
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n", encoding="utf-8")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1", cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext), cwd=directory,
    )  # fmt: skip
    return Pki(ca=ca, server_cert=cert, server_key=key, other_ca=other_ca)


def server_tls_conf(pki: Pki, mode: str) -> dict[str, Any]:
    """The tls.* keys of a server in ``mode`` whose outgoing connections use TLS too."""
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
        "tls.enable": "true",
        "tls.client.trustCertPath": str(pki.ca),
    }


def spawn_tls_namesrv(tmp: Path, pki: Pki, mode: str) -> ServerProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    props = tmp / "namesrv.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in server_tls_conf(pki, mode).items()), encoding="utf-8")
    return spawn_namesrv(tmp, "-c", str(props))


def tls_client(pki: Pki) -> ClientConfig:
    return ClientConfig(use_tls=True, tls_trust_cert_path=str(pki.ca))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def enforcing(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("tls-enforcing")
    with spawn_tls_namesrv(tmp / "ns", pki, "enforcing") as ns:
        with spawn_broker(tmp, ns.addr, **server_tls_conf(pki, "enforcing")) as broker:
            yield ns, broker
            print(f"--- broker log ---\n{broker.log_tail()}")
        print(f"--- namesrv log ---\n{ns.log_tail()}")


def test_enforcing_answers_plaintext_with_a_clear_error(
    enforcing: tuple[ServerProcess, ServerProcess],
) -> None:
    for server in enforcing:
        with BlockingRemotingClient() as plain:
            response = plain.invoke(
                server.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), ANSWER_BOUND_MS
            )
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "requires TLS" in (response.remark or "")


def test_enforcing_plaintext_client_api_fails_clearly(enforcing: tuple[ServerProcess, ServerProcess]) -> None:
    with Admin(enforcing[0].addr) as admin, pytest.raises(MQBrokerError, match="requires TLS"):
        admin.topic_route("AnyTopic")


def test_producer_consumer_and_admin_over_tls(
    enforcing: tuple[ServerProcess, ServerProcess], pki: Pki
) -> None:
    create_topic(enforcing[0].addr, "TlsEnforced", 2, config=tls_client(pki))
    produce_and_consume(enforcing[0].addr, "TlsEnforced", group="cg-TlsEnforced", client=tls_client(pki))


def test_blocking_client_over_tls(enforcing: tuple[ServerProcess, ServerProcess], pki: Pki) -> None:
    ctx = client_ssl_context(trust_cert_path=str(pki.ca))
    with BlockingRemotingClient(ssl_context=ctx) as client:
        response = client.invoke(
            enforcing[0].addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), ANSWER_BOUND_MS
        )
    assert response.code == ResponseCode.SUCCESS
    assert b"broker-a" in (response.body or b"")


def test_untrusted_server_certificate_is_refused(
    enforcing: tuple[ServerProcess, ServerProcess], pki: Pki
) -> None:
    ctx = client_ssl_context(trust_cert_path=str(pki.other_ca))
    with (
        BlockingRemotingClient(ssl_context=ctx) as client,
        pytest.raises(RemotingConnectError, match="verify"),
    ):
        client.invoke(
            enforcing[0].addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), ANSWER_BOUND_MS
        )


def test_mqadmin_over_tls(enforcing: tuple[ServerProcess, ServerProcess], pki: Pki) -> None:
    ns = enforcing[0].addr
    args = [sys.executable, "-m", "rocketq.client.cli", "clusterList", "-n", ns]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert plain.returncode != 0
    assert "requires TLS" in plain.stdout + plain.stderr
    tls = subprocess.run(
        [*args, "--tls", "--tls-trust-cert", str(pki.ca)], capture_output=True, text=True, timeout=60
    )
    assert tls.returncode == 0, tls.stdout + tls.stderr
    assert "broker-a" in tls.stdout


def test_permissive_serves_tls_and_plaintext(tmp_path: Path, pki: Pki) -> None:
    with spawn_tls_namesrv(tmp_path / "ns", pki, "permissive") as ns:
        with spawn_broker(tmp_path, ns.addr, **server_tls_conf(pki, "permissive")):
            create_topic(ns.addr, "TlsPermissiveA", 2, config=tls_client(pki))
            produce_and_consume(ns.addr, "TlsPermissiveA", group="cg-TlsPermissiveA", client=tls_client(pki))
            create_topic(ns.addr, "TlsPermissiveB", 2, config=ClientConfig())
            produce_and_consume(ns.addr, "TlsPermissiveB", group="cg-TlsPermissiveB", client=ClientConfig())


@pytest.mark.spark
def test_spark_connector_over_tls(
    spark_session: Any, enforcing: tuple[ServerProcess, ServerProcess], pki: Pki
) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    ns, topic = enforcing[0].addr, "TlsSpark"
    with Admin(ns, config=tls_client(pki)) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_route(admin, topic)
    tls_options = {"nameServer": ns, "topic": topic, "tls": "true", "tlsTrustCertPath": str(pki.ca)}
    df = spark_session.createDataFrame([(f"s{i}",) for i in range(50)], "body string")
    df.write.format("rocketmq").options(**tls_options).mode("append").save()
    rows = spark_session.read.format("rocketmq").options(**tls_options).load().collect()
    assert sorted(r.body for r in rows) == sorted(f"s{i}".encode() for i in range(50))


@pytest.mark.spark
def test_spark_exactly_once_sink_over_tls(
    spark_session: Any, enforcing: tuple[ServerProcess, ServerProcess], pki: Pki
) -> None:
    """Half sends, the commit log (created by the sink) and the commits all go over TLS."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    ns, topic = enforcing[0].addr, "TlsSparkEos"
    with Admin(ns, config=tls_client(pki)) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_route(admin, topic)
    tls_options = {"nameServer": ns, "topic": topic, "tls": "true", "tlsTrustCertPath": str(pki.ca)}
    df = spark_session.createDataFrame([(f"x{i}",) for i in range(60)], "body string").repartition(2)
    df.write.format("rocketmq").options(**tls_options).option("deliveryGuarantee", "exactlyOnce").option(
        "transactionalId", "tls-eos"
    ).mode("append").save()
    rows = spark_session.read.format("rocketmq").options(**tls_options).load().collect()
    assert sorted(r.body for r in rows) == sorted(f"x{i}".encode() for i in range(60))
    with Admin(ns, config=tls_client(pki)) as admin:  # the sink made its commit log over TLS
        assert admin.topic_route("RQ_SINK_COMMITS_tls-eos").queue_datas


def _invoke_tls(addr: str, pki: Pki, code: int) -> RemotingCommand:
    with BlockingRemotingClient(ssl_context=client_ssl_context(trust_cert_path=str(pki.ca))) as client:
        response = client.invoke(addr, RemotingCommand.request(code), ANSWER_BOUND_MS)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response


def _max_offset(addr: str, pki: Pki) -> int:
    return ha_max_offset(json.loads(_invoke_tls(addr, pki, RequestCode.GET_BROKER_HA_STATUS).body or b"{}"))


def test_replication_over_tls_is_byte_identical(tmp_path: Path, pki: Pki) -> None:
    conf = {
        **server_tls_conf(pki, "enforcing"),
        "brokerName": "broker-t",
        "mappedFileSizeCommitLog": 1 << 20,
        "maxMessageSize": 256 << 10,
        "haSendHeartbeatInterval": 1000,
    }
    with (
        spawn_tls_namesrv(tmp_path / "ns", pki, "enforcing") as ns,
        spawn_broker(tmp_path, ns.addr, brokerRole="SYNC_MASTER", brokerId=0, **conf) as master,
        spawn_broker(tmp_path, ns.addr, brokerRole="SLAVE", brokerId=1, **conf) as slave,
    ):
        client = tls_client(pki)
        with Admin(ns.addr, config=client) as admin:
            admin.create_topic("TlsRepl", broker_addr=master.addr, read_queue_nums=2, write_queue_nums=2)
            wait_route(admin, "TlsRepl")
        with Producer(ns.addr, producer_group="pg-tls-repl", client=client) as producer:
            # SYNC_MASTER: SEND_OK only once the slave has the message, over the TLS HA connection
            statuses = [
                producer.send(Message("TlsRepl", bytes([i % 251]) * 3000)).send_status for i in range(400)
            ]
        assert set(statuses) == {SendStatus.SEND_OK}
        target = _max_offset(master.addr, pki)
        wait_for(lambda: _max_offset(slave.addr, pki) == target, "the slave to reach the master's offset")
        mdir = tmp_path / "store-broker-t-0" / "commitlog"
        sdir = tmp_path / "store-broker-t-1" / "commitlog"
        names = sorted(p.name for p in mdir.iterdir())
        assert len(names) >= 2  # the load crossed a segment end
        assert sorted(p.name for p in sdir.iterdir()) == names
        for name in names:
            assert (sdir / name).read_bytes() == (mdir / name).read_bytes(), f"segment {name} differs"
        ha_port = int(
            json.loads(_invoke_tls(master.addr, pki, RequestCode.GET_BROKER_HA_STATUS).body)["haListenPort"]
        )
        assert _plaintext_ha_gets(ha_port) == b""  # enforcing: a plaintext slave is cut off, nothing sent


def _plaintext_ha_gets(port: int) -> bytes:
    """What a plaintext slave reporting offset 0 receives on the HA port (b"" = closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_BOUND_MS / 1000) as sock:
        sock.sendall((0).to_bytes(8, "big"))
        try:
            return sock.recv(65536)
        except ConnectionResetError:
            return b""
