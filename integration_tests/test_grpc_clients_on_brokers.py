"""5.x SDK clients as the brokers see them through mqproxy, and the proxy's ACL towards the brokers.

Real mqnamesrv, mqbroker and mqproxy processes and the published SDKs (the Python SDK 5.1.2 and the
Node.js SDK 1.0.8, installed by the fixtures of ``conftest.py``):

* ``grpc_sdk/python_sdk_clients.py`` keeps a Producer, a SimpleConsumer and a PushConsumer
  connected: ``mqadmin consumerConnection`` / ``producerConnection`` list them with language PYTHON
  and version 437 (V5_1_2), the consumers' subscriptions, CONSUME_ACTIVELY (simple) and
  CONSUME_PASSIVELY (push); the dashboard marks the consumer ``gRPC 5.x``; ``consumerStatus -i``
  answers from the proxy, ``consumerStatus -s`` gets "call remote timeout" (that SDK never answers
  a thread-stack request); after the SDK's shutdown (NotifyClientTermination) all are gone from the
  brokers, and a client killed with SIGKILL is gone after ``channelExpiredTimeout``.
* ``grpc_sdk/node_sdk_clients.js``: a Node.js SimpleConsumer listed as NODE_JS, whose answer to
  ``consumerStatus -s`` (its thread stacks, "mock stack" in that SDK) comes back through the broker.
* CONSUME_MESSAGE_DIRECTLY, handed to a proxy run in the test's process as a broker would, reaches
  both SDKs as a VerifyMessageCommand: the Node.js SDK's echo becomes REQUEST_CODE_NOT_SUPPORTED,
  the Python SDK's silence "call remote timeout".
* ``mqadmin queryMsgById -g G -d clientId`` goes through the real broker and proxy to the Node.js
  SDK and comes back as REQUEST_CODE_NOT_SUPPORTED (that SDK does not verify messages).
* A broker with ``aclEnable=true`` serves the SDK through a proxy that signs with its own account
  (``enableAclRpcHookForClusterMode``, ``innerClientAuthenticationCredentials``) and checks the SDKs'
  credentials itself (``enableACL``): right credentials produce and consume, wrong and missing ones
  are refused with 40100; ``mqbroker --enable-proxy -pc`` (local mode) does the same with the keys
  in its ``rmq-proxy.json``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import select
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.launcher import free_port, spawn_proxy
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.server import ProxyServer
from rocketq.tools.dashboard.launch import dashboard_url, spawn_dashboard


def _sdk_test_module() -> Any:
    """test_grpc_python_sdk.py, for its ACL and TLS scripts and helpers."""
    path = Path(__file__).with_name("test_grpc_python_sdk.py")
    spec = importlib.util.spec_from_file_location("grpc_sdk_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_SDK = _sdk_test_module()

SCRIPTS = Path(__file__).with_name("grpc_sdk")
TOPIC, GROUP, PUSH_GROUP = "gcb-topic", "gcb-group", "gcb-push"
#: brokers' view of the Python SDK 5.1.2 (MQVersion V5_1_2) and of versions it cannot place (V5_0_0)
V5_1_2, V5_0_0 = 437, 413


@dataclass
class Stack:
    namesrv: ServerProcess
    proxy: ServerProcess


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("gcb")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp, ns.addr):
        create_topic(ns.addr, TOPIC, 4)
        with spawn_proxy(
            tmp / "proxy",
            ns.addr,
            channelExpiredTimeout=3000,
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        ) as px:
            yield Stack(ns, px)


def _line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The next stdout line of ``proc``, waiting at most ``timeout_s``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        proc.kill()
        raise AssertionError(
            f"no output within {timeout_s} s; stderr:\n{proc.stderr.read() if proc.stderr else ''}"
        )
    return proc.stdout.readline().strip()


def _start(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    ids = json.loads(_line(proc, 90))
    return proc, ids


def _stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("shutdown\n")
    proc.stdin.flush()
    assert _line(proc, 60) == "stopped"
    proc.wait(30)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _admin(*args: str) -> subprocess.CompletedProcess[str]:
    return run_mqadmin(*args)


def _listed(ns: str, group: str, client_id: str) -> bool:
    return bool(_connection_line(ns, group, client_id))


def _connection_line(ns: str, group: str, client_id: str) -> str:
    """consumerConnection's line of ``client_id`` ("" while it is not listed)."""
    done = _admin("consumerConnection", "-n", ns, "-g", group)
    return next((line for line in done.stdout.splitlines() if client_id in line), "")


def _producer_line(ns: str, client_id: str) -> str:
    done = _admin("producerConnection", "-n", ns, "-g", TOPIC, "-t", TOPIC)
    return next((line for line in done.stdout.splitlines() if client_id in line), "")


def test_python_sdk_clients_are_listed_by_the_brokers_and_leave(
    stack: Stack, sdk_python: Path, tmp_path: Path
) -> None:
    ns = stack.namesrv.addr
    script = [str(sdk_python), str(SCRIPTS / "python_sdk_clients.py"), stack.proxy.addr, TOPIC, GROUP]
    proc, ids = _start([*script, PUSH_GROUP])
    try:
        wait_for(lambda: _listed(ns, GROUP, ids["consumer"]), "the consumer on the brokers", timeout_s=30)
        assert _connection_line(ns, GROUP, ids["consumer"]).split()[-2:] == ["PYTHON", str(V5_1_2)]
        wait_for(lambda: _listed(ns, PUSH_GROUP, ids["push"]), "the push consumer", timeout_s=30)
        push = _admin("consumerConnection", "-n", ns, "-g", PUSH_GROUP).stdout
        assert "ConsumeType: CONSUME_PASSIVELY" in push and "SubExpression: TagP" in push, push
        group = _admin("consumerConnection", "-n", ns, "-g", GROUP).stdout
        assert f"Topic: {TOPIC}" in group and "SubExpression: TagA||TagB" in group, group
        assert "ConsumeType: CONSUME_ACTIVELY" in group and "MessageModel: CLUSTERING" in group, group
        # the producer group of a 5.x producer is its topic, as RocketMQ's proxy names it
        wait_for(
            lambda: bool(_producer_line(ns, ids["producer"])), "the producer on the brokers", timeout_s=30
        )
        assert _producer_line(ns, ids["producer"]).split()[-2:] == ["PYTHON", str(V5_1_2)]

        # the dashboard's Consumers page marks the SDK as a 5.x gRPC client
        with spawn_dashboard(tmp_path / "dashboard", ns) as dash:
            doc = _get_json(dashboard_url(dash) + f"api/groups/{GROUP}")
            row = next(
                g for g in _get_json(dashboard_url(dash) + "api/groups")["groups"] if g["group"] == GROUP
            )
        (member,) = [c for c in doc["connections"] if c["client_id"] == ids["consumer"]]
        assert (member["language"], member["version_name"], member["protocol"]) == (
            "PYTHON",
            "V5_1_2",
            "gRPC 5.x",
        )
        assert (row["members"], row["grpc_members"]) == (1, 1), row

        status = _admin("consumerStatus", "-n", ns, "-g", GROUP, "-i", ids["consumer"])
        assert status.returncode == 0, status.stdout + status.stderr
        assert "PROP_CLIENT_LANGUAGE" in status.stdout and "PYTHON" in status.stdout, status.stdout
        assert "PROP_CLIENT_VERSION" in status.stdout and "V5_1_2" in status.stdout, status.stdout
        # the Python SDK 5.1.2 reads no PrintThreadStackTraceCommand: the proxy's time runs out
        started = time.monotonic()
        jstack = _admin("consumerStatus", "-n", ns, "-g", GROUP, "-i", ids["consumer"], "-s")
        print(f"consumerStatus -s of a Python SDK answered after {time.monotonic() - started:.1f} s")
        assert jstack.returncode != 0 and "call remote timeout" in jstack.stdout + jstack.stderr, jstack
    finally:
        _stop(proc)
    # NotifyClientTermination: UNREGISTER_CLIENT on the brokers
    wait_for(lambda: not _listed(ns, GROUP, ids["consumer"]), "the consumer to leave", timeout_s=20)
    wait_for(lambda: not _listed(ns, PUSH_GROUP, ids["push"]), "the push consumer to leave", timeout_s=20)
    wait_for(lambda: not _producer_line(ns, ids["producer"]), "the producer to leave", timeout_s=20)


def test_a_killed_sdk_is_unregistered_after_the_channel_expiry(stack: Stack, sdk_python: Path) -> None:
    ns = stack.namesrv.addr
    proc, ids = _start(
        [str(sdk_python), str(SCRIPTS / "python_sdk_clients.py"), stack.proxy.addr, TOPIC, GROUP]
    )
    try:
        wait_for(lambda: _listed(ns, GROUP, ids["consumer"]), "the consumer on the brokers", timeout_s=30)
    finally:
        proc.kill()  # no NotifyClientTermination
        proc.wait(30)
    killed = time.monotonic()
    wait_for(
        lambda: not _connection_line(ns, GROUP, ids["consumer"]),
        "the silent consumer to expire",
        timeout_s=60,
    )
    print(
        f"a SIGKILLed SDK left the brokers {time.monotonic() - killed:.1f} s later"
        " (channelExpiredTimeout 3 s)"
    )


def test_node_sdk_answers_a_thread_stack_request_through_the_broker(
    stack: Stack, node_modules: Path, tmp_path: Path
) -> None:
    ns = stack.namesrv.addr
    env = {**os.environ, "NODE_PATH": str(node_modules), "HOME": str(tmp_path)}
    proc, ids = _start(
        ["node", str(SCRIPTS / "node_sdk_clients.js"), stack.proxy.addr, TOPIC, "gcb-node"], env
    )
    try:
        wait_for(lambda: _listed(ns, "gcb-node", ids["consumer"]), "the Node consumer", timeout_s=30)
        # its user agent says NODE_JS; its version 1.0.8 is no RocketMQ version: V5_0_0
        assert _connection_line(ns, "gcb-node", ids["consumer"]).split()[-2:] == ["NODE_JS", str(V5_0_0)]
        jstack = _admin("consumerStatus", "-n", ns, "-g", "gcb-node", "-i", ids["consumer"], "-s")
        assert jstack.returncode == 0, jstack.stdout + jstack.stderr
        assert "#Consumer jstack#" in jstack.stdout and "mock stack" in jstack.stdout, jstack.stdout
    finally:
        _stop(proc)


def test_verify_message_reaches_the_real_sdks(
    stack: Stack, sdk_python: Path, node_modules: Path, tmp_path: Path
) -> None:
    """CONSUME_MESSAGE_DIRECTLY as a broker hands it to the proxy, relayed to real SDKs by a proxy
    run in this process: the Node.js SDK echoes the command back unserved, the Python SDK does not
    answer."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(job: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(job, loop).result(60)

    config = ProxyConfig(
        namesrv_addr=stack.namesrv.addr,
        grpc_server_bind_address="127.0.0.1",
        grpc_server_port=0,
        grpc_client_consumer_min_long_polling_timeout_millis=1000,
        grpc_client_consumer_max_long_polling_timeout_millis=3000,
    )
    server = ProxyServer(config)
    call(server.start())
    env = {**os.environ, "NODE_PATH": str(node_modules), "HOME": str(tmp_path)}
    node, node_ids = _start(
        ["node", str(SCRIPTS / "node_sdk_clients.js"), server.address, TOPIC, "gcb-verify"], env
    )
    python, python_ids = _start(
        [str(sdk_python), str(SCRIPTS / "python_sdk_clients.py"), server.address, TOPIC, "gcb-verify-py"]
    )
    try:
        request = RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "gcb-verify"}
        )
        request.body = encode_stored_message(
            topic=TOPIC,
            queue_id=0,
            born_timestamp=1,
            born_host=("127.0.0.1", 1),
            store_host=("127.0.0.1", 2),
            body=b"verify me",
            properties={MessageConst.UNIQ_KEY: "7F00000100002A9F0000000000000001"},
        )
        answers = {}
        for name, client_id in (("node", node_ids["consumer"]), ("python", python_ids["consumer"])):
            client = server.clients.get(client_id)
            assert client is not None and client.stream is not None, f"{name} SDK not registered"
            answers[name] = call(server.relay.handle(client, request, None))  # type: ignore[arg-type]
    finally:
        _stop(node)
        _stop(python)
        call(server.stop(1))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    assert answers["node"].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, answers["node"]
    assert "does not verify messages (NOT_IMPLEMENTED" in answers["node"].remark, answers["node"]
    assert (answers["python"].code, answers["python"].remark) == (
        ResponseCode.SYSTEM_BUSY,
        "call remote timeout",
    )


def test_query_msg_by_id_reaches_the_node_sdk_through_broker_and_proxy(
    stack: Stack, node_modules: Path, tmp_path: Path
) -> None:
    """mqadmin queryMsgById -g -d: the broker storing the message sends CONSUME_MESSAGE_DIRECTLY to
    the proxy's connection of the Node.js SDK, which gets a VerifyMessageCommand; its echo comes
    back to mqadmin as REQUEST_CODE_NOT_SUPPORTED."""
    ns = stack.namesrv.addr
    with Producer(ns, producer_group="gcb-direct-pg") as producer:
        sent = producer.send(Message(TOPIC, b"verify me through the broker"))
    env = {**os.environ, "NODE_PATH": str(node_modules), "HOME": str(tmp_path)}
    proc, ids = _start(
        ["node", str(SCRIPTS / "node_sdk_clients.js"), stack.proxy.addr, TOPIC, "gcb-node-direct"], env
    )
    try:
        wait_for(lambda: _listed(ns, "gcb-node-direct", ids["consumer"]), "the Node consumer", timeout_s=30)
        done = _admin(
            "queryMsgById", "-n", ns, "-i", sent.offset_msg_id, "-g", "gcb-node-direct", "-d", ids["consumer"]
        )
    finally:
        _stop(proc)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"CODE: {ResponseCode.REQUEST_CODE_NOT_SUPPORTED} " in done.stderr, done.stderr
    assert "does not verify messages (NOT_IMPLEMENTED" in done.stderr, done.stderr


# ---------------------------------------------------------------------------------- ACL

PROXY_ACCOUNT = {"accessKey": "proxyAdmin", "secretKey": "proxySecret1"}
#: the brokers' plain_acl.yml: the SDK accounts of test_grpc_python_sdk plus the proxy's, an admin
PLAIN_ACL = _SDK.PLAIN_ACL + ("  - accessKey: proxyAdmin\n    secretKey: proxySecret1\n    admin: true\n")
HOOK: dict[str, Any] = {
    "enableAclRpcHookForClusterMode": True,
    "innerClientAuthenticationCredentials": json.dumps(PROXY_ACCOUNT),
}


def test_sdk_through_a_signing_proxy_to_an_acl_broker(sdk_python: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL, encoding="utf-8")
    admin = ClientConfig(access_key=PROXY_ACCOUNT["accessKey"], secret_key=PROXY_ACCOUNT["secretKey"])
    cases = {"right": ["sdkWriter", "writerSecret"], "wrong": ["sdkWriter", "nope"], "missing": ["", ""]}
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(tmp_path, ns.addr, aclEnable="true", aclFilePath=str(acl_file)),
    ):
        create_topic(ns.addr, "sdk-acl", 4, config=admin)
        with spawn_proxy(
            tmp_path / "proxy",
            ns.addr,
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
            enableACL=True,
            aclFilePath=str(acl_file),
            **HOOK,
        ) as px:
            run = subprocess.run(
                [str(sdk_python), str(_SDK.ACL_SCRIPT), px.addr, "sdk-acl", "g-acl", json.dumps(cases)],
                capture_output=True,
                text=True,
                timeout=240,
            )
            assert run.returncode == 0, (
                f"SDK script failed:\n{run.stderr[-4000:]}\nproxy log:\n{px.log_tail()}"
            )
            codes = [_SDK._route_status(px.addr, *creds) for creds in cases.values()]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    right = out["right"]
    assert right["subscribe"]["ok"] and right["send"]["ok"], right
    assert right["receive"] == {"ok": True, "value": ["acl-right"]}, right
    for name in ("wrong", "missing"):
        assert not any(out[name][step]["ok"] for step in ("subscribe", "send", "receive")), out[name]
    assert codes == [20000, 40100, 40100]  # OK, UNAUTHORIZED, UNAUTHORIZED


def test_local_mode_proxy_signs_for_an_acl_broker(sdk_python: Path, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL, encoding="utf-8")
    proxy_conf = tmp_path / "rmq-proxy.json"
    proxy_conf.write_text(json.dumps(HOOK), encoding="utf-8")
    admin = ClientConfig(access_key=PROXY_ACCOUNT["accessKey"], secret_key=PROXY_ACCOUNT["secretKey"])
    port = free_port()
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(
            tmp_path,
            ns.addr,
            aclEnable="true",
            aclFilePath=str(acl_file),
            grpcServerPort=port,
            extra_args=("--enable-proxy", "-pc", str(proxy_conf)),
        ) as broker,
    ):
        create_topic(ns.addr, "sdk-local-acl", 4, config=admin)
        wait_for(lambda: _SDK._accepts(port), "the broker's gRPC proxy listens", timeout_s=60)
        run = subprocess.run(
            [
                str(sdk_python),
                str(_SDK.TLS_SCRIPT),
                f"127.0.0.1:{port}",
                "sdk-local-acl",
                "g-local",
                "plain",
                "6",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, f"SDK failed:\n{run.stderr[-4000:]}\nbroker log:\n{broker.log_tail()}"
        assert json.loads(run.stdout.strip().splitlines()[-1])["received"] == ["over-plain"]
