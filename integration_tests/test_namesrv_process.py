"""The NameServer as a real process: fake brokers register over TCP, clients ask for routes.

There is no broker here: a "fake broker" is a remoting client sending REGISTER_BROKER, exactly the
bytes a Java broker sends.  Expiry is shortened with ``-o`` options (2 s, scanned every 0.2 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand, SerializeType
from rocketq.client.testing import ServerProcess, wait_for
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.namesrv.bodies import body_crc32, encode_register_body
from rocketq.namesrv.routeinfo import QueueConf

SpawnNamesrv = Callable[..., ServerProcess]
T = 5000
SHORT_EXPIRY = ("-o", "brokerChannelExpiredTime=2000", "-o", "scanNotActiveBrokerInterval=200")


def register(
    client: BlockingRemotingClient,
    ns: ServerProcess,
    name: str,
    addr: str,
    topics: dict[str, int],
    *,
    broker_id: int = 0,
    version: int = 1,
    compressed: bool = False,
) -> RemotingCommand:
    queues = {t: QueueConf(n, n, 6, 0) for t, n in topics.items()}
    body = encode_register_body((1_700_000_000_000, version, 0), queues, compressed=compressed)
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr,
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(body_crc32(body)),
    }
    resp = client.invoke(ns.addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body), T)
    assert resp.code == ResponseCode.SUCCESS, resp
    return resp


def route(client: BlockingRemotingClient, ns: ServerProcess, topic: str) -> dict[str, object] | None:
    resp = client.invoke(
        ns.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), T
    )
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    result: dict[str, object] = json.loads(resp.body)
    return result


def test_brokers_register_and_routes_are_answered(
    namesrv: ServerProcess, blocking_client: BlockingRemotingClient
) -> None:
    broker_a = BlockingRemotingClient()
    broker_b = BlockingRemotingClient(serialize_type=SerializeType.ROCKETMQ)
    try:
        register(broker_a, namesrv, "broker-a", "127.0.0.1:10911", {"TopicTest": 4})
        register(
            broker_b, namesrv, "broker-b", "127.0.0.1:20911", {"TopicTest": 8, "Only-b": 2}, compressed=True
        )
        slave = register(broker_b, namesrv, "broker-a", "127.0.0.1:10921", {}, broker_id=1)
        assert slave.ext_fields == {"haServerAddr": "127.0.0.1:10911", "masterAddr": "127.0.0.1:10911"}
        r = route(blocking_client, namesrv, "TopicTest")
        assert r is not None
        assert r["queueDatas"] == [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4},
            {"brokerName": "broker-b", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8},
        ]
        addrs = {b["brokerName"]: b["brokerAddrs"] for b in r["brokerDatas"]}  # type: ignore[attr-defined]
        assert addrs == {
            "broker-a": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"},
            "broker-b": {"0": "127.0.0.1:20911"},
        }
        assert route(blocking_client, namesrv, "Missing") is None
        cluster = blocking_client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), T
        )
        assert json.loads(cluster.body)["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
        topics = blocking_client.invoke(
            namesrv.addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), T
        )
        assert json.loads(topics.body) == {"topicList": ["Only-b", "TopicTest"]}
    finally:
        broker_a.close()
        broker_b.close()


def test_silent_broker_expires_and_closed_broker_is_dropped(
    namesrv_factory: SpawnNamesrv, blocking_client: BlockingRemotingClient
) -> None:
    ns = namesrv_factory(*SHORT_EXPIRY)
    silent, alive, closing = BlockingRemotingClient(), BlockingRemotingClient(), BlockingRemotingClient()
    try:
        register(silent, ns, "broker-silent", "127.0.0.1:10911", {"Silent": 4})
        register(alive, ns, "broker-alive", "127.0.0.1:20911", {"Alive": 4})
        register(closing, ns, "broker-closing", "127.0.0.1:30911", {"Closing": 4})
        closing.close()  # channel close: dropped at once, long before the 2 s expiry
        wait_for(
            lambda: route(blocking_client, ns, "Closing") is None, "the closed broker's route to go", 1.5
        )
        deadline = time.monotonic() + 15
        while route(blocking_client, ns, "Silent") is not None:
            assert time.monotonic() < deadline, "silent broker never expired"
            register(alive, ns, "broker-alive", "127.0.0.1:20911", {"Alive": 4})  # keeps re-registering
            time.sleep(0.3)
        assert route(blocking_client, ns, "Alive") is not None
        assert "expired" in ns.log_text() and "broker-silent" in ns.log_text()
    finally:
        for c in (silent, alive, closing):
            c.close()


def test_two_name_servers_are_independent(
    namesrv_factory: SpawnNamesrv, blocking_client: BlockingRemotingClient
) -> None:
    ns1, ns2 = namesrv_factory(), namesrv_factory()
    broker = BlockingRemotingClient()
    try:
        register(broker, ns1, "broker-a", "127.0.0.1:10911", {"T1": 4})
        register(broker, ns2, "broker-b", "127.0.0.1:20911", {"T2": 4})
        assert route(blocking_client, ns1, "T1") is not None and route(blocking_client, ns1, "T2") is None
        assert route(blocking_client, ns2, "T2") is not None and route(blocking_client, ns2, "T1") is None
        assert ns1.kill9() != 0
        assert route(blocking_client, ns2, "T2") is not None
    finally:
        broker.close()


def test_kv_config_persists_and_sigterm_exits_cleanly(
    namesrv_factory: SpawnNamesrv, blocking_client: BlockingRemotingClient, tmp_path: Path
) -> None:
    kv_path = tmp_path / "kv" / "kvConfig.json"
    props = tmp_path / "namesrv.properties"
    props.write_text(f"kvConfigPath={kv_path}\norderMessageEnable=true\nserializeType=ROCKETMQ\n")
    ns = namesrv_factory("-c", str(props))
    put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
    resp = blocking_client.invoke(ns.addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put), T)
    assert resp.code == ResponseCode.SUCCESS and resp.serialize_type == SerializeType.ROCKETMQ
    assert ns.terminate() == 0
    assert "stopped" in ns.log_text()

    again = namesrv_factory("-c", str(props))
    broker = BlockingRemotingClient()
    try:
        reg = register(broker, again, "broker-a", "127.0.0.1:10911", {"T": 4})
        assert json.loads(reg.body) == {"table": {"T": "broker-a:4"}}
        r = route(blocking_client, again, "T")
        assert r is not None and r["orderTopicConf"] == "broker-a:4"
    finally:
        broker.close()


def test_print_config_and_bad_config(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rocketq.namesrv", "-p", "-o", "brokerChannelExpiredTime=2000"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "brokerChannelExpiredTime=2000" in out.stdout and "listenPort=9876" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "rocketq.namesrv", "-o", "listenPort=notaport"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "listenPort" in bad.stderr


@pytest.mark.parametrize("compressed", [False, True])
def test_unregister_removes_routes(
    namesrv: ServerProcess, blocking_client: BlockingRemotingClient, compressed: bool
) -> None:
    register(blocking_client, namesrv, "broker-a", "127.0.0.1:10911", {"T": 4}, compressed=compressed)
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "brokerId": "0",
    }
    resp = blocking_client.invoke(
        namesrv.addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext), T
    )
    assert resp.code == ResponseCode.SUCCESS
    assert route(blocking_client, namesrv, "T") is None
