"""The official RocketMQ 5 Node.js SDK against real mqnamesrv + mqbroker + mqproxy processes.

The SDK (npm ``rocketmq-client-nodejs`` 1.0.8, as published) is npm-installed once under
``~/.cache/rocketq-tests`` (``ROCKETQ_TEST_CACHE`` moves it) by the ``node_modules``
fixture of ``conftest.py``; the tests are skipped without node and npm or when the registry cannot
be reached.  Each test runs a script of ``grpc_sdk/`` with node and reads the JSON it prints:

- ``node_sdk_roundtrip.js``: normal, FIFO and delay messages produced and received by a
  SimpleConsumer, acks, a change of invisible duration that brings a message back, a message left
  un-acked that comes back after its invisible duration; a remoting producer's messages received by
  the SDK and the SDK's messages read by rocketq's remoting pull consumer.
- ``node_sdk_transaction.js``: transactions committed, rolled back, and one left open that the
  broker checks back and the SDK's TransactionChecker commits through the proxy's Telemetry stream.
- ``node_sdk_push.js``: a PushConsumer acks, a listener's FAILURE brings the message back with the
  next delivery attempt, and a message failing every attempt lands in ``%DLQ%<group>``.
- ``node_sdk_acl.js``: right, wrong and missing credentials against a proxy with ``enableACL`` that
  serves TLS only (``tls.server.mode=enforcing``, a test CA's certificate).

The SDK starts a client only once the server answered its Settings, with no time limit of its own:
every script bounds each wait and the tests bound every script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.launcher import spawn_proxy
from rocketq.client.model import Message, MessageExt
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
    read_topic,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_route,
)


def _sdk_test_module() -> Any:
    """test_grpc_python_sdk.py, for its plain_acl.yml."""
    path = Path(__file__).with_name("test_grpc_python_sdk.py")
    spec = importlib.util.spec_from_file_location("grpc_sdk_fixtures_node", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_SDK = _sdk_test_module()

SCRIPTS = Path(__file__).with_name("grpc_sdk")
#: g-node-push's retryMaxTimes: a message is delivered twice, then dead-lettered
PUSH_MAX_ATTEMPTS = 2


@dataclass
class Cluster:
    namesrv: ServerProcess
    proxy: ServerProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("grpc-node")
    # the broker checks back half messages older than 1 s, every second
    with (
        spawn_namesrv(tmp / "ns") as ns,
        spawn_broker(tmp, ns.addr, transactionTimeOut=1000, transactionCheckInterval=1000),
    ):
        for topic in ("node-main", "node-cross-in", "node-tx", "node-push", "sdk-acl"):
            create_topic(ns.addr, topic, 4)
        retry = ("-g", "g-node-push", "-r", str(PUSH_MAX_ATTEMPTS - 1))
        done = run_mqadmin("updateSubGroup", "-n", ns.addr, "-c", "DefaultCluster", *retry)
        assert done.returncode == 0, done.stdout + done.stderr
        # short long polls keep the SDK's empty receives short; 3 s invisible durations are allowed
        with spawn_proxy(
            tmp / "proxy",
            ns.addr,
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
            minInvisibleTimeMillsForRecv=3000,
        ) as px:
            yield Cluster(ns, px)


def _node_env(node_modules: Path, home: Path, **extra: str) -> dict[str, str]:
    # HOME: the SDK writes its log under ~/logs/rocketmq
    return {**os.environ, "NODE_PATH": str(node_modules), "HOME": str(home), **extra}


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def _sdk_log_tail(env: dict[str, str], lines: int = 60) -> str:
    """The end of the SDK's log files (under $HOME/logs/rocketmq)."""
    logs = sorted((Path(env["HOME"]) / "logs").rglob("*.log"))
    tails = ("\n".join(p.read_text(errors="replace").splitlines()[-lines:]) for p in logs)
    return "\n".join(f"{p.name}:\n{tail}" for p, tail in zip(logs, tails, strict=True))


def _run_node(script: str, args: list[str], env: dict[str, str], proxy: ServerProcess) -> Any:
    try:
        run = subprocess.run(
            ["node", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=150, env=env
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{script} did not finish within 150 s\nits stderr:\n{_text(exc.stderr)[-4000:]}\n"
            f"the SDK's log:\n{_sdk_log_tail(env)}\nproxy log:\n{proxy.log_tail()}"
        )
    assert run.returncode == 0, f"{script} failed:\n{run.stderr[-4000:]}\nproxy log:\n{proxy.log_tail()}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def _read_all(ns: str, topic: str, group: str, n: int) -> list[MessageExt]:
    """Up to ``n`` messages of ``topic`` from its first offset, read by a remoting pull consumer."""
    with Admin(ns) as admin:
        wait_route(admin, topic)
    consumer = LitePullConsumer(
        ns, consumer_group=group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.assign(sorted(consumer.fetch_message_queues(topic)))
    consumer.start()
    try:
        return drain(consumer, n, timeout_s=30)
    finally:
        consumer.shutdown()


def test_node_sdk_produces_and_consumes_through_the_proxy(
    cluster: Cluster, node_modules: Path, tmp_path: Path
) -> None:
    ns = cluster.namesrv.addr
    with Producer(ns, producer_group="pg-node-cross") as producer:
        from_remoting = producer.send(
            Message("node-cross-in", b"from-remoting", tags="TagR", keys="r0", properties={"origin": "4.x"})
        )
    out = _run_node(
        "node_sdk_roundtrip.js",
        [cluster.proxy.addr, "node-main", "g-node", "node-cross-in", "1"],
        _node_env(node_modules, tmp_path),
        cluster.proxy,
    )
    sent = {s["body"]: s["id"] for s in out["sent"]}
    got = {r["body"]: r for r in out["received"]}
    assert set(sent) == {"node-normal", "node-fifo-0", "node-fifo-1", "node-delay"}
    assert set(got) == set(sent) | {"from-remoting"}, out["received"]
    assert all(got[body]["id"] == msg_id and got[body]["attempt"] == 1 for body, msg_id in sent.items())
    normal = got["node-normal"]
    assert (normal["tag"], normal["keys"], normal["props"]) == ("TagN", ["n0"], {"p": "1"})
    fifo = [r["body"] for r in out["received"] if r["group"] == "g1"]
    assert fifo == ["node-fifo-0", "node-fifo-1"]
    assert [(r["body"], r["attempt"]) for r in out["redelivered"]] == [("node-normal", 2)]
    # the remoting producer's message, as the SDK sees it
    remote = got["from-remoting"]
    assert (remote["id"], remote["topic"], remote["tag"], remote["keys"], remote["props"]) == (
        from_remoting.msg_id,
        "node-cross-in",
        "TagR",
        ["r0"],
        {"origin": "4.x"},
    )
    # never acked: back after its 3 s invisible duration with delivery attempt 2
    unacked = out["unacked"]["deliveries"]
    assert [(d["body"], d["id"], d["attempt"]) for d in unacked] == [
        ("node-unacked", out["unacked"]["id"], 1),
        ("node-unacked", out["unacked"]["id"], 2),
    ]
    assert unacked[1]["at_ms"] - unacked[0]["at_ms"] >= 2500  # not before its invisible time ended

    # what the SDK sent, read by rocketq's remoting pull consumer: same ids, tags, keys, properties
    pulled = {m.body.decode(): m for m in _read_all(ns, "node-main", "cg-node-cross", 5)}
    assert set(pulled) == set(sent) | {"node-unacked"}
    for body, msg_id in sent.items():
        assert pulled[body].properties[MessageConst.UNIQ_KEY] == msg_id
    assert (pulled["node-normal"].tags, pulled["node-normal"].keys) == ("TagN", ["n0"])
    assert pulled["node-normal"].properties["p"] == "1"
    assert pulled["node-fifo-1"].properties[MessageConst.SHARDING_KEY] == "g1"


def test_node_sdk_transactions_commit_rollback_and_the_checker_decides_an_open_one(
    cluster: Cluster, node_modules: Path, tmp_path: Path
) -> None:
    out = _run_node(
        "node_sdk_transaction.js",
        [cluster.proxy.addr, "node-tx", "g-node-tx"],
        _node_env(node_modules, tmp_path),
        cluster.proxy,
    )
    tx = out["sent"]
    # committed by the client, and by its checker when the broker checked back; never the rolled back
    assert sorted((r["body"], r["id"], r["topic"]) for r in out["received"]) == [
        ("node-tx-commit", tx["node-tx-commit"], "node-tx"),
        ("node-tx-orphan", tx["node-tx-orphan"], "node-tx"),
    ], out
    assert {(c["body"], c["id"], c["topic"]) for c in out["checked"]} == {
        ("node-tx-orphan", tx["node-tx-orphan"], "node-tx")
    }, out["checked"]
    # a remoting consumer reading the whole topic sees the same outcome
    pulled = read_topic(cluster.namesrv.addr, "node-tx")
    assert sorted((m.body, m.properties[MessageConst.UNIQ_KEY]) for m in pulled) == [
        (b"node-tx-commit", tx["node-tx-commit"]),
        (b"node-tx-orphan", tx["node-tx-orphan"]),
    ]


def test_node_sdk_push_consumer_acks_redelivers_failures_and_dead_letters(
    cluster: Cluster, node_modules: Path, tmp_path: Path
) -> None:
    group = "g-node-push"
    stderr_path = tmp_path / "node.stderr"
    script = [str(SCRIPTS / "node_sdk_push.js"), cluster.proxy.addr, "node-push", group]
    with stderr_path.open("w") as stderr_file:  # a file: the SDK's log errors never fill a pipe
        node = subprocess.Popen(
            ["node", *script, str(PUSH_MAX_ATTEMPTS), "60000"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            env=_node_env(node_modules, tmp_path),
        )
    assert node.stdin is not None and node.stdout is not None
    output = ProcessOutput(node.stdout)
    try:
        # the script prints PHASE=consumed once every expected delivery happened (or after 60 s)
        output.values(["PHASE"], timeout_s=90)
        # the consumer still receives: its next receive moves push-dead to the group's DLQ
        letters = _read_all(cluster.namesrv.addr, dlq_topic(group), "cg-node-dlq", 1)
        node.stdin.write("stop\n")
        node.stdin.flush()
        node.wait(60)
        output.wait_ended(10)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait(10)
    stderr = stderr_path.read_text(errors="replace")
    assert node.returncode == 0, f"node_sdk_push.js failed:\n{stderr[-4000:]}"
    out = json.loads(output.lines()[-1])
    sent = out["sent"]
    by_body: dict[str, list[int]] = {}
    for d in out["deliveries"]:
        assert d["id"] == sent[d["body"]] and d["tag"] == "TagP" and d["keys"] == [d["body"]], d
        by_body.setdefault(d["body"], []).append(d["attempt"])
    # acked at once; a failure comes back once with the next attempt; push-dead gets every attempt
    assert by_body == {
        "push-ok-0": [1],
        "push-ok-1": [1],
        "push-retry": [1, 2],
        "push-dead": list(range(1, PUSH_MAX_ATTEMPTS + 1)),
    }, out["deliveries"]
    assert [(m.body, m.properties[MessageConst.UNIQ_KEY]) for m in letters] == [
        (b"push-dead", sent["push-dead"])
    ]


@pytest.mark.skipif(not has_openssl(), reason="openssl makes the test certificates")
def test_node_sdk_credentials_over_tls(cluster: Cluster, node_modules: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(_SDK.PLAIN_ACL, encoding="utf-8")
    certs = make_server_certs(tmp_path / "certs")
    tls_keys: dict[str, Any] = {  # dotted keys: not Python names
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
    # grpc-js checks the proxy's certificate against the roots this variable names
    env = _node_env(node_modules, tmp_path, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=certs["ca"])
    with spawn_proxy(
        tmp_path / "proxy",
        cluster.namesrv.addr,
        grpcClientConsumerMinLongPollingTimeoutMillis=1000,
        grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        enableACL=True,
        aclFilePath=str(acl_file),
        **tls_keys,
    ) as px:
        out = _run_node(
            "node_sdk_acl.js", [px.addr, "sdk-acl", "g-node-acl", json.dumps(cases), "tls"], env, px
        )
        # the port serves TLS only: the same right credentials in plaintext get nowhere
        plain = _run_node(
            "node_sdk_acl.js",
            [px.addr, "sdk-acl", "g-node-acl", json.dumps({"plain": cases["right"]}), "plain"],
            env,
            px,
        )
    right = out["right"]
    assert right["subscribe"]["ok"] and right["send"]["ok"], right
    assert right["receive"] == {"ok": True, "value": ["acl-right"]}, right
    # the SDK's startup fails on the refused QueryRoute ("Failed to fetch topic routes")
    for name in ("wrong", "missing"):
        assert not any(out[name][step]["ok"] for step in ("subscribe", "send", "receive")), out[name]
    # the receive that follows reaches the proxy and gets its code: UNAUTHORIZED
    assert "40100" in out["wrong"]["receive"]["error"] and "signature" in out["wrong"]["receive"]["error"]
    assert "40100" in out["missing"]["receive"]["error"], out["missing"]
    reader = out["reader"]
    assert reader["subscribe"]["ok"] and reader["receive"]["ok"], reader
    assert not reader["send"]["ok"] and "40100" in reader["send"]["error"], reader
    assert not any(plain["plain"][step]["ok"] for step in ("subscribe", "send", "receive")), plain
