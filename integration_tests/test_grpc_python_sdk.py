"""The official RocketMQ 5 Python SDK against real mqnamesrv + mqbroker + mqproxy processes.

The SDK (PyPI ``rocketmq-python-client`` 5.1.2, as published) is installed by the test into a venv
of its own under ``~/.cache/rocketq-tests`` (``ROCKETQ_TEST_CACHE`` moves it), reused across runs
and never mixed with rocketq's: both ship the ``apache.rocketmq.v2`` protos, which one process
cannot load twice.  ``grpc_sdk/python_sdk_roundtrip.py`` runs there and prints what it saw as
JSON: normal, FIFO and delay messages produced and received through the proxy, acks, a change of
invisible duration that brings a message back, the replaced handle refused, a recalled delay
message, the hand-over between the SDK and rocketq's remoting producer and pull consumer in both
directions, a PushConsumer, dead letters, transactions (one decided by the broker's check-back)
and a namespace.  The Python example of docs/grpc.md runs there too, against the same proxy.  The
SDK tests are skipped only when PyPI cannot be reached to build that venv.

``grpc_sdk/python_sdk_fifo.py`` consumes a FIFO group (``mqadmin updateSubGroup -o true``): each
message group in send order, and a message left un-acked holds back its group until it comes
back; the Settings the proxy answers carry the group's ``fifo`` and ``retryMaxTimes`` + 1.
``grpc_sdk/python_sdk_acl.py`` talks to a proxy with ``enableACL``: right, wrong, unknown and
missing credentials, and an account without PUB on the topic.  ``grpc_sdk/python_sdk_tls.py``
sends and receives over TLS (``tls_enable=True``, a test CA's certificate) and in plaintext through
one port of a proxy with ``tls.server.mode=permissive``.  ``mqbroker --enable-proxy`` (local mode)
starts the proxy on the broker's ``grpcServerPort``; the SDK's round trip goes through it and it
stops with the broker.  ``grpc_sdk/python_sdk_types.py`` sends to a topic created with
``mqadmin updateTopic -a +message.type=FIFO``: the FIFO message is taken, the normal one refused.

A proxy SIGKILLed and restarted on its port while the SDK sends
(``grpc_sdk/python_sdk_send_loop.py``) loses no acknowledged message: every message id the SDK saw
acknowledged is read back by a remoting consumer, and the SDK's last sends go through the
restarted proxy.

The venv comes from the ``sdk_python`` fixture of conftest.py; its ``node_modules`` fixture
npm-installs the Node.js SDK (``rocketmq-client-nodejs`` 1.0.8) under the same cache folder for
``test_grpc_node_sdk.py`` (skipped without node and npm or when the registry cannot be reached).

The bad-input and ForwardMessageToDeadLetterQueue tests talk to the proxy with rocketq's own
generated stubs: garbage bytes on the port, an unknown topic, an oversized body, broken receipt
handles and transaction ids get RocketMQ's status codes and the proxy keeps serving.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.launcher import free_port, spawn_proxy
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import dlq_topic
from rocketq.client.testing import (
    ProcessOutput,
    ServerProcess,
    create_topic,
    drain,
    has_openssl,
    make_server_certs,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
    wait_route,
)
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.proxy.v2.service_pb2_grpc import MessagingServiceStub

SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_roundtrip.py"
SEND_LOOP = Path(__file__).with_name("grpc_sdk") / "python_sdk_send_loop.py"
FIFO_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_fifo.py"
ACL_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_acl.py"
TLS_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_tls.py"
TYPES_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_types.py"
PUSH_DLQ_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_push_dlq.py"
UNACKED_SCRIPT = Path(__file__).with_name("grpc_sdk") / "python_sdk_unacked.py"
#: plain_acl.yml of the ACL test: "writer" may produce and consume sdk-acl, "reader" only consume
PLAIN_ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: sdkWriter
    secretKey: writerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - sdk-acl=PUB|SUB
  - accessKey: sdkReader
    secretKey: readerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - sdk-acl=SUB
"""


@dataclass
class Cluster:
    namesrv: ServerProcess
    proxy: ServerProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("grpc")
    # the broker checks back half messages older than 1 s, every second
    with (
        spawn_namesrv(tmp / "ns") as ns,
        spawn_broker(
            tmp, ns.addr, recallMessageEnable="true", transactionTimeOut=1000, transactionCheckInterval=1000
        ),
    ):
        for topic in (
            "sdk-main",
            "sdk-cross-in",
            "sdk-cross-out",
            "sdk-push",
            "sdk-dlq",
            "sdk-tx",
            "ns1%sdk-ns",  # topic sdk-ns of namespace ns1
            "TopicTest",
            "sdk-kill",
            "sdk-forward",
            "sdk-node",
            "sdk-fifo",
            "sdk-acl",
            "sdk-tls",
            "sdk-push-dlq",
            "sdk-unacked",
        ):
            create_topic(ns.addr, topic, 4)
        # the group's retryMaxTimes 1: a message is dead-lettered at its third delivery;
        # g-fifo consumes orderly (RocketMQ 5 FIFO)
        for args in (
            ("-g", "g-dlq", "-r", "1"),
            ("-g", "g-push-dlq", "-r", "1"),
            ("-g", "g-fifo", "-o", "true", "-r", "5"),
        ):
            done = run_mqadmin("updateSubGroup", "-n", ns.addr, "-c", "DefaultCluster", *args)
            assert done.returncode == 0, done.stdout + done.stderr
        # short long polls keep the SDK's empty receives (and a push consumer's shutdown) short
        with spawn_proxy(
            tmp / "proxy",
            ns.addr,
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
            minInvisibleTimeMillsForRecv=3000,
        ) as px:
            yield Cluster(ns, px)


def test_python_sdk_produces_and_consumes_through_the_proxy(cluster: Cluster, sdk_python: Path) -> None:
    ns = cluster.namesrv.addr
    with Producer(ns, producer_group="pg-grpc-cross") as producer:
        to_sdk = [
            producer.send(Message("sdk-cross-in", f"from-remoting-{i}".encode(), tags="TagR", keys=f"r{i}"))
            for i in range(2)
        ]
    run = subprocess.run(
        [
            str(sdk_python),
            str(SCRIPT),
            cluster.proxy.addr,
            "sdk-main",
            "g-sdk",
            "sdk-cross-in",
            "sdk-cross-out",
            "2",
            "sdk-push",
            "sdk-dlq",
            "sdk-tx",
            "sdk-ns",
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, (
        f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{cluster.proxy.log_tail()}"
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])

    sent = {s["body"]: s["id"] for s in out["sent"]}
    got = {r["body"]: r for r in out["received"]}
    assert set(got) == set(sent) | {"from-remoting-0", "from-remoting-1"}, out["received"]
    for body, msg_id in sent.items():
        assert got[body]["id"] == msg_id and got[body]["topic"] == "sdk-main" and got[body]["attempt"] == 1
    for i in range(3):
        normal = got[f"normal-{i}"]
        assert (normal["tag"], normal["keys"], normal["props"], normal["group"]) == (
            "TagA",
            [f"k{i}"],
            {"p": str(i)},
            None,
        )
    # FIFO: one message group, one queue, received in send order
    fifo = [r for r in out["received"] if r["body"].startswith("fifo-")]
    assert [r["body"] for r in fifo] == [f"fifo-{i}" for i in range(5)]
    assert {r["group"] for r in fifo} == {"g1"}
    assert len({r["handle"].split()[6] for r in fifo}) == 1  # the queue id of the receipt handles
    # delay: not delivered before it is due (the broker's timer precision is 1 s)
    assert got["delay-0"]["at_ms"] >= out["delay_due_ms"] - 1000
    # RocketMQ's receipt handle:
    # ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset commitLogOffset
    fields = got["normal-1"]["handle"].split()
    assert len(fields) == 9 and fields[2] == "15000" and fields[5] == "broker-a"
    # the remoting producer's messages, as the SDK sees them
    for i, result in enumerate(to_sdk):
        seen = got[f"from-remoting-{i}"]
        assert (seen["id"], seen["tag"], seen["keys"], seen["topic"]) == (
            result.msg_id,
            "TagR",
            [f"r{i}"],
            "sdk-cross-in",
        )
    # the change of invisible duration brought normal-0 back once, with a new handle;
    # the handle it replaced is refused
    assert [(r["body"], r["attempt"]) for r in out["redelivered"]] == [("normal-0", 2)]
    assert out["changed_handle"].split()[2] == "2000"
    assert "40013" in out["stale_ack"]  # INVALID_RECEIPT_HANDLE
    assert out["late"] == []  # nothing acked came back, the recalled message never came
    assert out["recalled"] == out["recall_sent"]
    assert "40000" in out["bogus_recall"]  # BAD_REQUEST: not a recall handle

    # the push consumer: the failed message came back once (the back-off's 1 s), the filtered one never
    push = [(r["body"], r["attempt"]) for r in out["push"]]
    assert sorted(push) == [("push-0", 1), ("push-0", 2), ("push-1", 1), ("push-2", 1), ("push-3", 1)], push
    assert {r["topic"] for r in out["push"]} == {"sdk-push"}

    # never acked: delivered consumerMaxAttempts (2) times, then in the group's dead-letter topic
    assert [(r["body"], r["attempt"]) for r in out["dlq_deliveries"]] == [("dlq-0", 1), ("dlq-0", 2)]
    with Admin(ns) as admin:
        wait_route(admin, dlq_topic("g-dlq"))
    dead = LitePullConsumer(
        ns, consumer_group="cg-grpc-dlq", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    dead.assign(sorted(dead.fetch_message_queues(dlq_topic("g-dlq"))))
    dead.start()
    try:
        letters = drain(dead, 1, timeout_s=20)
    finally:
        dead.shutdown()
    assert [(m.body, m.properties[MessageConst.UNIQ_KEY]) for m in letters] == [(b"dlq-0", out["dlq_sent"])]

    # transactions: committed by the client, and by its checker when the broker checked back;
    # the rolled-back one never arrives
    tx = out["tx_sent"]
    assert sorted((r["body"], r["id"]) for r in out["tx_received"]) == sorted(
        [("tx-commit", tx["tx-commit"]), ("tx-orphan", tx["tx-orphan"])]
    ), out["tx_received"]
    assert {(c["body"], c["id"], c["topic"]) for c in out["tx_checked"]} == {
        ("tx-orphan", tx["tx-orphan"], "sdk-tx")
    }

    # a namespace: the SDK's topic sdk-ns is the brokers' ns1%sdk-ns, and the SDK sees its own name
    assert [(r["body"], r["id"], r["topic"]) for r in out["ns_received"]] == [
        ("ns-0", out["ns_sent"], "sdk-ns")
    ]

    # what the SDK sent, read by rocketq's remoting pull consumer
    consumer = LitePullConsumer(
        ns, consumer_group="cg-grpc-cross", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.assign(sorted(consumer.fetch_message_queues("sdk-cross-out")))
    consumer.start()
    try:
        pulled = {m.body.decode(): m for m in drain(consumer, 3, timeout_s=20)}
    finally:
        consumer.shutdown()
    assert set(pulled) == {c["body"] for c in out["cross_out"]}
    for c in out["cross_out"]:
        m = pulled[c["body"]]
        i = c["body"].rsplit("-", 1)[1]
        assert m.properties[MessageConst.UNIQ_KEY] == c["id"]
        assert (m.tags, m.keys, m.properties["origin"]) == ("TagX", [f"x{i}"], "python-sdk")


def test_a_message_left_unacked_comes_back_after_its_invisible_duration(
    cluster: Cluster, sdk_python: Path
) -> None:
    run = subprocess.run(
        [str(sdk_python), str(UNACKED_SCRIPT), cluster.proxy.addr, "sdk-unacked", "g-unacked"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"SDK failed:\n{run.stderr[-4000:]}\nproxy log:\n{cluster.proxy.log_tail()}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    deliveries = out["deliveries"]
    assert [(d["body"], d["id"], d["attempt"]) for d in deliveries] == [
        ("unacked", out["sent"], 1),
        ("unacked", out["sent"], 2),
    ], deliveries
    # not before its 3 s invisible duration ended
    assert deliveries[1]["at_ms"] - deliveries[0]["at_ms"] >= 2500, deliveries


def test_a_push_consumer_message_failing_every_attempt_lands_in_the_dead_letter_queue(
    cluster: Cluster, sdk_python: Path, tmp_path: Path
) -> None:
    group = "g-push-dlq"  # retryMaxTimes 1: two deliveries
    stderr_path = tmp_path / "sdk.stderr"
    with stderr_path.open("w") as stderr_file:  # a file: the SDK's log never fills a pipe
        sdk = subprocess.Popen(
            [str(sdk_python), str(PUSH_DLQ_SCRIPT), cluster.proxy.addr, "sdk-push-dlq", group, "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
        )
    assert sdk.stdin is not None and sdk.stdout is not None
    output = ProcessOutput(sdk.stdout)
    try:
        output.values(["PHASE"], timeout_s=90)  # every expected delivery happened (or 60 s passed)
        # the consumer still receives: its next receive moves pdlq-dead to the group's DLQ
        with Admin(cluster.namesrv.addr) as admin:
            wait_route(admin, dlq_topic(group))
        dead = LitePullConsumer(
            cluster.namesrv.addr,
            consumer_group="cg-push-dlq",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        dead.assign(sorted(dead.fetch_message_queues(dlq_topic(group))))
        dead.start()
        try:
            letters = drain(dead, 1, timeout_s=30)
        finally:
            dead.shutdown()
        sdk.stdin.write("stop\n")
        sdk.stdin.flush()
        sdk.wait(60)
        output.wait_ended(10)
    finally:
        if sdk.poll() is None:
            sdk.kill()
            sdk.wait(10)
    stderr = stderr_path.read_text(errors="replace")
    assert sdk.returncode == 0, f"SDK failed:\n{stderr[-4000:]}\nproxy log:\n{cluster.proxy.log_tail()}"
    out = json.loads(output.lines()[-1])
    sent = out["sent"]
    # acked at once; the failed one delivered retryMaxTimes + 1 times (the back-off's 1 s between),
    # never again: the proxy dead-letters it at the next receive
    assert sorted((d["body"], d["id"], d["attempt"]) for d in out["deliveries"]) == [
        ("pdlq-dead", sent["pdlq-dead"], 1),
        ("pdlq-dead", sent["pdlq-dead"], 2),
        ("pdlq-ok", sent["pdlq-ok"], 1),
    ], out["deliveries"]
    assert [(m.body, m.properties[MessageConst.UNIQ_KEY]) for m in letters] == [
        (b"pdlq-dead", sent["pdlq-dead"])
    ]


def test_a_fifo_group_receives_each_message_group_in_order_and_a_failed_message_blocks_it(
    cluster: Cluster, sdk_python: Path
) -> None:
    run = subprocess.run(
        [str(sdk_python), str(FIFO_SCRIPT), cluster.proxy.addr, "sdk-fifo", "g-fifo"],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, (
        f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{cluster.proxy.log_tail()}"
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["acked"] == sorted(f"{g}-{i}" for g in "ABC" for i in range(4)), out
    by_group: dict[str, list[tuple[str, int]]] = {}
    for d in out["deliveries"]:
        assert d["body"][0] == d["group"]
        by_group.setdefault(d["group"], []).append((d["body"], d["attempt"]))
    # each message group in send order; A-2 is not handed out before the failed A-1 came back
    assert by_group["A"] == [("A-0", 1), ("A-1", 1), ("A-1", 2), ("A-2", 1), ("A-3", 1)], out
    for g in "BC":
        assert by_group[g] == [(f"{g}-{i}", 1) for i in range(4)], out

    # the Settings the proxy sends the group's consumers: fifo, retryMaxTimes 5 + 1 deliveries
    settings = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name="g-fifo"),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="sdk-fifo"))],
        ),
    )
    plain = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name="g-dlq"),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="sdk-dlq"))],
        ),
    )
    fifo_reply, plain_reply = (
        _telemetry_settings(cluster.proxy.addr, settings),
        _telemetry_settings(cluster.proxy.addr, plain),
    )
    assert fifo_reply.subscription.fifo and fifo_reply.backoff_policy.max_attempts == 6
    assert not plain_reply.subscription.fifo and plain_reply.backoff_policy.max_attempts == 2


def test_sdk_credentials_are_checked_against_plain_acl(
    cluster: Cluster, sdk_python: Path, tmp_path: Path
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL, encoding="utf-8")
    cases = {
        "right": ["sdkWriter", "writerSecret"],
        "wrong": ["sdkWriter", "not-the-secret"],
        "unknown": ["nobody1", "whatever"],
        "missing": ["", ""],
        "reader": ["sdkReader", "readerSecret"],
    }
    with spawn_proxy(
        tmp_path / "proxy",
        cluster.namesrv.addr,
        grpcClientConsumerMinLongPollingTimeoutMillis=1000,
        grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        enableACL=True,
        aclFilePath=str(acl_file),
    ) as px:
        run = subprocess.run(
            [str(sdk_python), str(ACL_SCRIPT), px.addr, "sdk-acl", "g-acl", json.dumps(cases)],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0, f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{px.log_tail()}"
        codes = tuple(
            _route_status(px.addr, ak, sk)
            for ak, sk in (
                ("sdkWriter", "writerSecret"),
                ("sdkWriter", "not-the-secret"),
                ("nobody1", "x"),
                ("", ""),
            )
        )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    right = out["right"]
    assert right["subscribe"]["ok"] and right["send"]["ok"], right
    assert right["receive"] == {"ok": True, "value": ["acl-right"]}, right
    # the SDK reports a refused QueryRoute as "failed to fetch topic route", without the code
    for name in ("wrong", "unknown", "missing"):
        assert not any(out[name][step]["ok"] for step in ("subscribe", "send", "receive")), out[name]
    # a known account without PUB on the topic consumes but cannot produce
    reader = out["reader"]
    assert reader["subscribe"]["ok"] and reader["receive"]["ok"], reader
    assert not reader["send"]["ok"] and "40100" in reader["send"]["error"], reader  # UNAUTHORIZED
    # the codes, as RocketMQ 5's proxy answers: right, wrong secret, unknown account, none
    assert codes == (pb.Code.OK, pb.Code.UNAUTHORIZED, pb.Code.UNAUTHORIZED, pb.Code.UNAUTHORIZED)


@pytest.mark.skipif(not has_openssl(), reason="openssl makes the test certificates")
def test_tls_and_plaintext_sdks_share_the_grpc_port(
    cluster: Cluster, sdk_python: Path, tmp_path: Path
) -> None:
    certs = make_server_certs(tmp_path / "certs")
    tls_keys: dict[str, Any] = {  # dotted keys: not Python names
        "tls.server.mode": "permissive",
        "tls.server.certPath": certs["cert"],
        "tls.server.keyPath": certs["key"],
    }
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": certs["ca"]}
    results = {}
    with spawn_proxy(
        tmp_path / "proxy",
        cluster.namesrv.addr,
        grpcClientConsumerMinLongPollingTimeoutMillis=1000,
        grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        **tls_keys,
    ) as px:
        for mode in ("tls", "plain"):
            # a 3 MiB body crosses the relay in many TLS records and HTTP/2 frames
            run = subprocess.run(
                [str(sdk_python), str(TLS_SCRIPT), px.addr, "sdk-tls", f"g-{mode}", mode, "1", str(3 << 20)],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            assert run.returncode == 0, (
                f"{mode} SDK failed:\n{run.stderr[-4000:]}\nproxy log:\n{px.log_tail()}"
            )
            results[mode] = json.loads(run.stdout.strip().splitlines()[-1])
        # the connection really is TLS: a TLS handshake with the test CA succeeds on the port
        context = ssl.create_default_context(cafile=certs["ca"])
        context.set_alpn_protocols(["h2"])
        with socket.create_connection((px.host, px.port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=px.host) as tls_sock:
                assert tls_sock.selected_alpn_protocol() == "h2"
    assert results["tls"]["received"] == ["over-tls"] and results["tls"]["sizes"] == [(3 << 20) + 8]
    assert results["plain"]["received"] == ["over-plain"] and results["plain"]["sizes"] == [(3 << 20) + 10]


@pytest.mark.skipif(not has_openssl(), reason="openssl makes the test certificates")
def test_sdk_credentials_are_checked_over_tls(cluster: Cluster, sdk_python: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL, encoding="utf-8")
    certs = make_server_certs(tmp_path / "certs")
    tls_keys: dict[str, Any] = {  # dotted keys: not Python names; TLS only on the port
        "tls.server.mode": "enforcing",
        "tls.server.certPath": certs["cert"],
        "tls.server.keyPath": certs["key"],
    }
    cases = {
        "right": ["sdkWriter", "writerSecret"],
        "wrong": ["sdkWriter", "not-the-secret"],
        "missing": ["", ""],
        "reader": ["sdkReader", "readerSecret"],
    }
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": certs["ca"]}
    out: dict[str, Any] = {}
    with spawn_proxy(
        tmp_path / "proxy",
        cluster.namesrv.addr,
        grpcClientConsumerMinLongPollingTimeoutMillis=1000,
        grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        enableACL=True,
        aclFilePath=str(acl_file),
        **tls_keys,
    ) as px:
        # the same right credentials in plaintext get nowhere: the port serves TLS only
        for mode, mode_cases in (("tls", cases), ("plain", {"plain": cases["right"]})):
            run = subprocess.run(
                [
                    str(sdk_python),
                    str(ACL_SCRIPT),
                    px.addr,
                    "sdk-acl",
                    "g-acl-tls",
                    json.dumps(mode_cases),
                    mode,
                ],
                capture_output=True,
                text=True,
                timeout=240,
                env=env,
            )
            assert run.returncode == 0, (
                f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{px.log_tail()}"
            )
            out.update(json.loads(run.stdout.strip().splitlines()[-1]))
    right = out["right"]
    assert right["subscribe"]["ok"] and right["send"]["ok"], right
    assert right["receive"] == {"ok": True, "value": ["acl-right"]}, right
    for name in ("wrong", "missing", "plain"):
        assert not any(out[name][step]["ok"] for step in ("subscribe", "send", "receive")), out[name]
    reader = out["reader"]
    assert reader["subscribe"]["ok"] and reader["receive"]["ok"], reader
    assert not reader["send"]["ok"] and "40100" in reader["send"]["error"], reader  # UNAUTHORIZED


def test_a_send_that_does_not_match_the_topic_message_type_is_refused(
    cluster: Cluster, sdk_python: Path
) -> None:
    ns = cluster.namesrv.addr
    create = ("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "sdk-typed", "-r", "4", "-w", "4")
    done = run_mqadmin(*create, "-a", "+message.type=FIFO")
    assert done.returncode == 0, done.stdout + done.stderr
    bad = run_mqadmin(*create, "-a", "+message.type=ORDERED")
    assert (
        bad.returncode != 0
        and "is not one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED" in bad.stdout + bad.stderr
    )
    with Admin(ns) as admin:
        wait_route(admin, "sdk-typed")
    run = subprocess.run(
        [str(sdk_python), str(TYPES_SCRIPT), cluster.proxy.addr, "sdk-typed"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"SDK failed:\n{run.stderr[-4000:]}\nproxy log:\n{cluster.proxy.log_tail()}"
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["fifo"]["ok"], out
    # QueryRoute's queues accept FIFO only, so the SDK refuses the normal message itself, as it
    # does against RocketMQ 5's proxy (an untyped topic takes every type: sdk-main gets normal,
    # FIFO and delay messages above)
    assert (
        not out["normal"]["ok"] and "not match with queue accept message types" in out["normal"]["error"]
    ), out
    channel, stub = _stub(cluster.proxy.addr)
    try:
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="sdk-typed")), timeout=10)
    finally:
        channel.close()
    assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.MessageType.FIFO,)}, route
    # a client that does not check gets MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as RocketMQ 5's proxy answers
    channel, stub = _stub(cluster.proxy.addr)
    try:
        answer = stub.SendMessage(
            spb.SendMessageRequest(messages=[_sdk_message("sdk-typed", b"stub-normal")]), timeout=10
        )
    finally:
        channel.close()
    assert answer.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, answer


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_local_mode_mqbroker_enable_proxy(sdk_python: Path, tmp_path: Path) -> None:
    port = free_port()
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(tmp_path, ns.addr, grpcServerPort=port, extra_args=("--enable-proxy",)) as broker,
    ):
        create_topic(ns.addr, "sdk-local", 4)
        wait_for(lambda: _accepts(port), "the broker's gRPC proxy listens", timeout_s=60)
        run = subprocess.run(
            [str(sdk_python), str(TLS_SCRIPT), f"127.0.0.1:{port}", "sdk-local", "g-local", "plain", "6"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, f"SDK failed:\n{run.stderr[-4000:]}\nbroker log:\n{broker.log_tail()}"
        assert json.loads(run.stdout.strip().splitlines()[-1])["received"] == ["over-plain"]
    # the broker stopped its proxy on the way out
    wait_for(lambda: not _accepts(port), "the proxy stops with the broker", timeout_s=30)


def _route_status(addr: str, access_key: str, secret_key: str) -> int:
    """QueryRoute of sdk-acl signed as a 5.x SDK signs (lowercase hex HMAC-SHA1 of the date)."""
    date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signature = hmac.new(secret_key.encode(), date.encode(), hashlib.sha1).hexdigest()
    metadata = (
        ("x-mq-date-time", date),
        (
            "authorization",
            f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}",
        ),
    )
    channel, stub = _stub(addr)
    try:
        request = spb.QueryRouteRequest(topic=pb.Resource(name="sdk-acl"))
        code: int = stub.QueryRoute(request, metadata=metadata, timeout=10).status.code
        return code
    finally:
        channel.close()


def _telemetry_settings(addr: str, settings: pb.Settings) -> pb.Settings:
    """The Settings the proxy answers ``settings`` with on a Telemetry stream."""
    answered = threading.Event()

    def commands() -> Iterator[spb.TelemetryCommand]:
        yield spb.TelemetryCommand(settings=settings)
        answered.wait(30)  # keep the stream open until the answer is read

    channel, stub = _stub(addr)
    try:
        for reply in stub.Telemetry(commands(), timeout=30):
            answered.set()
            assert reply.status.code == pb.Code.OK, reply
            answer: pb.Settings = reply.settings
            return answer
    finally:
        answered.set()
        channel.close()
    raise AssertionError("the Telemetry stream ended without an answer")


def _docs_example() -> str:
    text = (Path(__file__).resolve().parents[1] / "docs" / "grpc.md").read_text(encoding="utf-8")
    section = text.split("## Python SDK example", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_python_example_of_the_docs_runs(cluster: Cluster, sdk_python: Path, tmp_path: Path) -> None:
    example = _docs_example()
    assert "127.0.0.1:8081" in example
    script = tmp_path / "example.py"
    script.write_text(example.replace("127.0.0.1:8081", cluster.proxy.addr), encoding="utf-8")
    run = subprocess.run([str(sdk_python), str(script)], capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    sent = [line.split()[1] for line in lines if line.startswith("sent ")]
    received = [line.split()[1] for line in lines if line.startswith("received ")]
    assert len(sent) == 1 and received == sent, run.stdout


def test_a_proxy_killed_and_restarted_under_sdk_traffic_loses_no_acknowledged_message(
    cluster: Cluster, sdk_python: Path, tmp_path: Path
) -> None:
    port = free_port()
    proxy = spawn_proxy(tmp_path / "proxy", cluster.namesrv.addr, grpcServerPort=port)
    count = 300
    sender = subprocess.Popen(
        [str(sdk_python), str(SEND_LOOP), proxy.addr, "sdk-kill", str(count), "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2.5)  # part of the messages is sent
        assert sender.poll() is None, "the sender finished before the proxy was killed"
        proxy.kill9()
        proxy = spawn_proxy(tmp_path / "proxy", cluster.namesrv.addr, grpcServerPort=port)
        stdout, stderr = sender.communicate(timeout=120)
    finally:
        if sender.poll() is None:
            sender.kill()
        proxy.terminate()
    assert sender.returncode == 0, stderr[-4000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    acked = {i: msg_id for i, msg_id in report["acked"]}
    # the SDK went on through the restarted proxy: the last messages were acknowledged
    last = report["sent"] - 1
    assert last >= count - 1 and last in acked, (len(acked), report["failed"], report["sent"])
    assert len(acked) >= 20, (len(acked), report["failed"])

    consumer = LitePullConsumer(
        cluster.namesrv.addr,
        consumer_group="cg-grpc-kill",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.assign(sorted(consumer.fetch_message_queues("sdk-kill")))
    consumer.start()
    stored: set[str] = set()
    deadline = time.monotonic() + 30
    try:  # until every acknowledged id is read (a send whose answer was lost may be stored too)
        while not set(acked.values()) <= stored and time.monotonic() < deadline:
            stored.update(m.properties[MessageConst.UNIQ_KEY] for m in consumer.poll(500))
    finally:
        consumer.shutdown()
    missing = sorted(i for i, msg_id in acked.items() if msg_id not in stored)
    assert not missing, f"acknowledged but not stored: {missing}"


def _stub(addr: str) -> tuple[grpc.Channel, MessagingServiceStub]:
    channel = grpc.insecure_channel(addr, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)])
    return channel, MessagingServiceStub(channel)  # type: ignore[no-untyped-call]


def _sdk_message(topic: str, body: bytes, msg_id: str = "01ABCDEF") -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        system_properties=pb.SystemProperties(message_id=msg_id, message_type=pb.MessageType.NORMAL),
    )


def test_forward_to_dead_letter_queue(cluster: Cluster) -> None:
    channel, stub = _stub(cluster.proxy.addr)
    group, topic = pb.Resource(name="g-forward"), pb.Resource(name="sdk-forward")
    with channel:
        sent = stub.SendMessage(
            spb.SendMessageRequest(messages=[_sdk_message("sdk-forward", b"fwd", "03ABCDEF")])
        )
        assert sent.status.code == pb.Code.OK
        receive = spb.ReceiveMessageRequest(
            group=group,
            message_queue=pb.MessageQueue(topic=topic, broker=pb.Broker(name="broker-a")),
            batch_size=4,
        )
        receive.invisible_duration.FromSeconds(30)
        receive.long_polling_timeout.FromSeconds(2)
        got: list[pb.Message] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = [r.message for r in stub.ReceiveMessage(receive, timeout=10) if r.HasField("message")]
        assert [m.body for m in got] == [b"fwd"]
        forward = spb.ForwardMessageToDeadLetterQueueRequest(
            group=group,
            topic=topic,
            receipt_handle=got[0].system_properties.receipt_handle,
            message_id="03ABCDEF",
            delivery_attempt=1,
            max_delivery_attempts=1,
        )
        assert stub.ForwardMessageToDeadLetterQueue(forward, timeout=10).status.code == pb.Code.OK
        forward.receipt_handle = "broken"
        assert (
            stub.ForwardMessageToDeadLetterQueue(forward, timeout=10).status.code
            == pb.Code.INVALID_RECEIPT_HANDLE
        )
    with Admin(cluster.namesrv.addr) as admin:
        wait_route(admin, dlq_topic("g-forward"))
    dead = LitePullConsumer(
        cluster.namesrv.addr,
        consumer_group="cg-grpc-forward",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    dead.assign(sorted(dead.fetch_message_queues(dlq_topic("g-forward"))))
    dead.start()
    try:
        letters = drain(dead, 1, timeout_s=20)
    finally:
        dead.shutdown()
    assert [(m.body, m.properties[MessageConst.UNIQ_KEY]) for m in letters] == [(b"fwd", "03ABCDEF")]


def _garbage(addr: str) -> bytes:
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10GET / HTTP/1.1\r\n\r\n" + os.urandom(512))
        sock.settimeout(5)
        try:
            return sock.recv(4096)  # gRPC's HTTP/2 transport answers with a GOAWAY or just closes
        except OSError:
            return b""


def test_bad_input_gets_rocketmq_status_codes_and_the_proxy_keeps_serving(cluster: Cluster) -> None:
    for _ in range(3):
        _garbage(cluster.proxy.addr)
    channel, stub = _stub(cluster.proxy.addr)
    with channel:
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="sdk-main")), timeout=10)
        assert route.status.code == pb.Code.OK
        assert sorted(q.id for q in route.message_queues) == [0, 1, 2, 3]
        assert {q.broker.endpoints.addresses[0].port for q in route.message_queues} == {cluster.proxy.port}
        assert {tuple(q.accept_message_types) for q in route.message_queues} == {
            (pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION)
        }

        unknown = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="no-such-topic")), timeout=10)
        assert unknown.status.code == pb.Code.TOPIC_NOT_FOUND, unknown.status
        sent = stub.SendMessage(
            spb.SendMessageRequest(messages=[_sdk_message("no-such-topic", b"x")]), timeout=10
        )
        assert sent.status.code == pb.Code.TOPIC_NOT_FOUND and "no-such-topic" in sent.status.message

        big = _sdk_message("sdk-main", b"x" * (4 * 1024 * 1024 + 1))
        too_large = stub.SendMessage(spb.SendMessageRequest(messages=[big]), timeout=20)
        assert too_large.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE, too_large.status
        empty = stub.SendMessage(spb.SendMessageRequest(messages=[_sdk_message("sdk-main", b"")]), timeout=10)
        assert empty.status.code == pb.Code.MESSAGE_BODY_EMPTY

        group, topic = pb.Resource(name="g-bad"), pb.Resource(name="sdk-main")
        expired = f"0 {int(time.time() * 1000) - 60_000} 10000 1 0 broker-a 0 0 0"
        for handle in ("not a handle", expired):
            ack = stub.AckMessage(
                spb.AckMessageRequest(
                    group=group,
                    topic=topic,
                    entries=[spb.AckMessageEntry(message_id="m", receipt_handle=handle)],
                ),
                timeout=10,
            )
            assert ack.status.code == pb.Code.INVALID_RECEIPT_HANDLE, ack.status
            assert ack.entries[0].status.code == pb.Code.INVALID_RECEIPT_HANDLE
        bad_group = stub.AckMessage(
            spb.AckMessageRequest(group=pb.Resource(name=""), topic=topic), timeout=10
        )
        assert bad_group.status.code == pb.Code.ILLEGAL_CONSUMER_GROUP

        short = spb.ReceiveMessageRequest(
            group=group,
            message_queue=pb.MessageQueue(topic=topic, broker=pb.Broker(name="broker-a")),
            batch_size=1,
        )
        short.invisible_duration.FromMilliseconds(1000)  # under minInvisibleTimeMillsForRecv (10 s)
        answers = list(stub.ReceiveMessage(short, timeout=10))
        assert answers[0].status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
        assert answers[-1].HasField("delivery_timestamp")

        end = stub.EndTransaction(
            spb.EndTransactionRequest(
                topic=topic,
                message_id="m",
                transaction_id="made-up",
                resolution=pb.TransactionResolution.COMMIT,
            ),
            timeout=10,
        )
        assert end.status.code == pb.Code.INVALID_TRANSACTION_ID

        # still serving after all of it
        fine = stub.SendMessage(
            spb.SendMessageRequest(messages=[_sdk_message("sdk-main", b"ok", "02ABCDEF")])
        )
        assert fine.status.code == pb.Code.OK and fine.entries[0].message_id == "02ABCDEF"
    assert cluster.proxy.is_alive()
