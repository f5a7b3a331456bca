"""mqadmin's broker, connection and NameServer commands against real processes, output checked:
brokerStatus, topicClusterList, wipeWritePerm / addWritePerm (a producer's sends are refused
while the broker's write permission is wiped), producerConnection / consumerConnection (the
clients that heartbeat), updateNamesrvConfig (orderMessageEnable makes routes carry the
ORDER_TOPIC_CONFIG item, written to the NameServer's ``-c`` file and still there after a restart).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.vocabulary import Perm
from rocketq.client.testing import ServerProcess, create_topic, run_mqadmin, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import wait_for, wait_value

TOPIC = "cluster-ops-t"


@dataclass
class Cluster:
    namesrv: ServerProcess
    broker: ServerProcess
    ns_conf: Path

    @property
    def ns(self) -> str:
        return self.namesrv.addr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ns_conf = tmp_path / "namesrv.properties"
    ns_conf.write_text("# the NameServer's own file\nscanNotActiveBrokerInterval=5000\n", encoding="utf-8")
    with spawn_namesrv(tmp_path / "ns", "-c", str(ns_conf)) as ns, spawn_broker(tmp_path / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        yield Cluster(ns, b, ns_conf)


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def writable(ns: str) -> bool:
    with Admin(ns) as admin:
        (qd,) = admin.topic_route(TOPIC).queue_datas
        return bool(qd.perm & Perm.WRITE)


def producer_connection(ns: str) -> str | None:
    done = run_mqadmin("producerConnection", "-n", ns, "-g", "pg-ops", "-t", TOPIC)
    return done.stdout if done.returncode == 0 else None


def test_broker_status_and_topic_cluster_list(cluster: Cluster) -> None:
    addr = cluster.broker.addr
    rows = dict(line.split(": ", 1) for line in ok("brokerStatus", "-n", cluster.ns, "-b", addr).splitlines())
    assert rows["brokerName                      "] == "broker-a"
    assert rows["brokerAddr                      "] == addr
    lines = ok("brokerStatus", "-n", cluster.ns, "-c", "DefaultCluster").splitlines()
    assert any(re.fullmatch(rf"{re.escape(addr)} +brokerRole +: ASYNC_MASTER", line) for line in lines), lines
    assert ok("topicClusterList", "-n", cluster.ns, "-t", TOPIC) == "DefaultCluster\n"
    done = run_mqadmin("topicClusterList", "-n", cluster.ns, "-t", "no-such-topic")
    assert done.returncode == 1 and "no-such-topic" in done.stderr


def test_wipe_and_add_write_perm(cluster: Cluster) -> None:
    assert writable(cluster.ns)
    stdout = ok("wipeWritePerm", "-n", cluster.ns, "-b", "broker-a")
    count = re.fullmatch(
        rf"wipe write perm of broker\[broker-a\] in name server\[{cluster.ns}\] OK, (\d+)\n", stdout
    )
    assert count and int(count.group(1)) >= 1, stdout
    assert not writable(cluster.ns)
    stdout = ok("addWritePerm", "-n", cluster.ns, "-b", "broker-a")
    assert re.fullmatch(
        rf"add write perm of broker\[broker-a\] in name server\[{cluster.ns}\] OK, \d+\n", stdout
    )
    assert writable(cluster.ns)


def test_producer_and_consumer_connections(cluster: Cluster) -> None:
    ns = cluster.ns
    quick = ClientConfig(heartbeat_broker_interval_ms=1000)  # the first heartbeat comes on the timer
    with Producer(ns, producer_group="pg-ops", client=quick) as producer:
        producer.send(Message(TOPIC, b"x"))
        stdout = wait_value(lambda: producer_connection(ns), "pg-ops in producerConnection", 60)
        (line,) = stdout.splitlines()
        assert re.fullmatch(r"0001  \S+ +127\.0\.0\.1:\d+ +PYTHON +\d+", line), line
    done = run_mqadmin("consumerConnection", "-n", ns, "-g", "cg-ops")
    assert done.returncode == 1 and "the consumer group[cg-ops] not online" in done.stderr
    consumer = LitePullConsumer(ns, consumer_group="cg-ops")
    consumer.subscribe(TOPIC, "TagA || TagB")
    consumer.start()
    try:
        wait_for(lambda: run_mqadmin("consumerConnection", "-n", ns, "-g", "cg-ops").returncode == 0,
                 "cg-ops online", 30)  # fmt: skip
        lines = ok("consumerConnection", "-n", ns, "-g", "cg-ops").splitlines()
    finally:
        consumer.shutdown()
    assert re.fullmatch(r"001  \S+ +127\.0\.0\.1:\d+ +PYTHON +\d+", lines[0]), lines
    assert lines[1:3] == ["", "Below is subscription:"]
    assert re.fullmatch(rf"001  Topic: {TOPIC} +SubExpression: TagA \|\| TagB", lines[3]), lines
    assert lines[5:] == ["ConsumeType: CONSUME_ACTIVELY", "MessageModel: CLUSTERING", lines[7]]
    assert lines[7].startswith("ConsumeFromWhere: CONSUME_FROM_")


def test_update_namesrv_config_applies_now_and_survives_a_restart(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.ns
    ok("updateKvConfig", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC, "-v", "broker-a:2")
    assert "orderTopicConf" not in json.loads(ok("topicRoute", "-n", ns, "-t", TOPIC))
    stdout = ok("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "true")
    assert stdout == f"update name server config success![{ns!r}]\norderMessageEnable : true\n"
    assert json.loads(ok("topicRoute", "-n", ns, "-t", TOPIC))["orderTopicConf"] == "broker-a:2"
    assert cluster.ns_conf.read_text(encoding="utf-8").splitlines() == [
        "# the NameServer's own file",
        "scanNotActiveBrokerInterval=5000",
        "orderMessageEnable=true",
    ]
    done = run_mqadmin("updateNamesrvConfig", "-n", ns, "-k", "kvConfigPath", "-v", "/tmp/x")
    assert done.returncode == 1
    assert "CODE: 16" in done.stderr and "kvConfigPath cannot change at runtime" in done.stderr
    with spawn_namesrv(tmp_path / "ns2", "-c", str(cluster.ns_conf)) as again:
        assert re.search(r"^orderMessageEnable +=  true$", ok("getNamesrvConfig", "-n", again.addr), re.M)
