"""Clients of a replicated broker group: consumers read from the slave while the master is down.

Each test starts a real NameServer, a SYNC_MASTER and its SLAVE (``brokerId=1``, same
``brokerName``) in a temp dir on port 0, produces, waits until the slave has every byte (HA
status), kills the master with SIGKILL and checks that the push consumer, the lite pull consumer
and the Spark source (a real local Spark session) read every message from the slave, nothing
skipped; then restarts the master on its port and store, produces more and checks the clients go
back to it.  ``rocketq dev --slaves 1`` is checked to start a group and print the slave.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, LitePullConsumer, PushConsumer
from rocketq.client.errors import TopicNotExistError
from rocketq.client.model import Message, MessageExt, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    pull_header,
    spawn_broker,
    spawn_namesrv,
    start_rocketq_dev,
    wait_for,
)
from rocketq.client.transport.blocking import BlockingRemotingClient

BROKER = "broker-a"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
FAST = ClientConfig(
    heartbeat_broker_interval_ms=1000,
    persist_consumer_offset_interval_ms=500,
    poll_name_server_interval_ms=1000,
)
BROKER_CONF: dict[str, Any] = {
    "brokerName": BROKER,
    "mappedFileSizeCommitLog": 16 << 20,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
    "flushConsumerOffsetInterval": 1000,
    "haListenPort": 0,
}


@dataclass
class Group:
    tmp: Path
    namesrv: ServerProcess
    master: ServerProcess
    slave: ServerProcess
    dead: list[ServerProcess] = field(default_factory=list)
    ha_port: int = 0

    def start_master(self, port: int = 0, ha_port: int = 0) -> ServerProcess:
        conf = {**BROKER_CONF, "brokerId": 0, "brokerRole": "SYNC_MASTER", "haListenPort": ha_port}
        if port:
            conf["listenPort"] = port
        self.master = spawn_broker(self.tmp / "master", self.namesrv.addr, **conf)
        return self.master

    def kill_master(self) -> None:
        with Admin(self.namesrv.addr) as admin:  # restarted on the same HA port: the slave reconnects
            self.ha_port = admin.ha_status(self.master.addr).ha_listen_port
        self.master.kill9()
        self.dead.append(self.master)
        with Admin(self.namesrv.addr) as admin:  # the NameServer drops it when its channel closes
            wait_for(lambda: 0 not in _addrs(admin), "the NameServer to drop the master", 30)

    def restart_master(self) -> None:
        port = int(self.master.addr.rpartition(":")[2])
        self.start_master(port, self.ha_port)
        with Admin(self.namesrv.addr) as admin:
            wait_for(lambda: _addrs(admin).get(0) == self.master.addr, "the master to register again", 30)
            # a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave is back in sync
            wait_for(lambda: admin.ha_status(self.master.addr).in_sync_slave_nums > 0, "the slave back", 60)

    def wait_slave_caught_up(self, topic: str) -> None:
        """Until the slave has every byte of the master and the topic's config (slave sync)."""
        with BlockingMQClientAPI(self.namesrv.addr) as api:
            wait_for(lambda: _serves(api, self.slave.addr, topic), f"the slave to know {topic}", 60)
        with Admin(self.namesrv.addr) as admin:

            def caught_up() -> bool:
                master, slave = admin.ha_status(self.master.addr), admin.ha_status(self.slave.addr)
                return (
                    slave.client is not None
                    and slave.client.max_offset == master.master_commit_log_max_offset
                )

            wait_for(caught_up, "the slave to catch up", 60)


def _serves(api: BlockingMQClientAPI, addr: str, topic: str) -> bool:
    header = pull_header(topic, 0, 0, group="probe", max_msg_nums=1)
    try:
        api.pull_message(addr, header, 3000)
    except TopicNotExistError:
        return False
    return True


def _addrs(admin: Admin) -> dict[int, str]:
    bd = admin.cluster_list().broker_addr_table.get(BROKER)
    return dict(bd.broker_addrs) if bd is not None else {}


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    ns = spawn_namesrv(tmp_path / "ns")
    procs: list[ServerProcess] = [ns]
    try:
        g = Group(tmp_path, ns, ns, ns)
        procs.append(g.start_master())
        g.slave = spawn_broker(
            tmp_path / "slave",
            ns.addr,
            **{**BROKER_CONF, "brokerId": 1, "brokerRole": "SLAVE", "slaveSyncInterval": 500},
        )
        procs.append(g.slave)
        with Admin(ns.addr) as admin:
            wait_for(lambda: len(_addrs(admin)) == 2, "master and slave in the NameServer", 30)
        yield g
    finally:
        for proc in [*procs, *(g.dead if "g" in locals() else []), *([g.master] if "g" in locals() else [])]:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs[1:]:
            print(f"--- {proc.name} log tail ---\n{proc.log_tail()}")


def produce(group: Group, topic: str, bodies: list[bytes]) -> None:
    with Producer(group.namesrv.addr, producer_group="pg-repl") as producer:
        for body in bodies:
            assert producer.send(Message(topic, body)).send_status is SendStatus.SEND_OK


def master_gets(group: Group) -> int:
    with Admin(group.namesrv.addr) as admin:
        return int(admin.broker_runtime_info(group.master.addr).get("msgGetTotalTodayNow", "0"))


# ---------------------------------------------------------------------------------------- consumers


def test_push_consumer_reads_from_the_slave_while_the_master_is_down(group: Group) -> None:
    topic, cg = "ReplPush", "cg-repl-push"
    create_topic(group.namesrv.addr, topic, broker_addr=group.master.addr)
    before = [b"p-%03d" % i for i in range(60)]
    produce(group, topic, before)
    group.wait_slave_caught_up(topic)
    seen: set[bytes] = set()
    lock = threading.Lock()
    first_ten = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        time.sleep(0.05)  # slow enough that the master dies mid-way
        with lock:
            seen.update(m.body for m in msgs)
            if len(seen) >= 10:
                first_ten.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group.namesrv.addr, consumer_group=cg, consume_from_where=FIRST, pull_batch_size=4,
        consume_thread_nums=2, rebalance_interval_ms=1000, client=FAST,
    )  # fmt: skip
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert first_ten.wait(60), "the consumer did not start consuming"
        group.kill_master()
        with lock:
            at_kill = len(seen)
        wait_for(lambda: set(before) <= seen, "every message, read from the slave", 90)
        assert at_kill < len(before), "the master died too late to test anything"

        group.restart_master()
        gets = master_gets(group)
        after = [b"q-%03d" % i for i in range(20)]
        produce(group, topic, after)
        wait_for(lambda: set(after) <= seen, "the messages produced after the master came back", 90)
        # pulls held on the slave when the master came back may still deliver from it; once they
        # return (the slave suggests broker id 0) the consumer pulls from the master again
        for i in range(60):
            if master_gets(group) > gets:
                break
            body = b"r-%03d" % i
            produce(group, topic, [body])
            wait_for(functools.partial(seen.__contains__, body), f"{body!r}", 60)
        assert master_gets(group) > gets, "the consumer never went back to the master"
    finally:
        consumer.shutdown()


def test_lite_pull_consumer_reads_from_the_slave_while_the_master_hangs(group: Group) -> None:
    """SIGSTOP: the NameServer keeps listing the master (until its 120 s expiry) and it accepts
    connections but never answers; reads time out there and go to the slave."""
    topic, cg = "ReplLite", "cg-repl-lite"
    create_topic(group.namesrv.addr, topic, broker_addr=group.master.addr)
    before = [b"l-%03d" % i for i in range(40)]
    produce(group, topic, before)
    group.wait_slave_caught_up(topic)
    os.kill(group.master.pid, signal.SIGSTOP)
    consumer = LitePullConsumer(
        group.namesrv.addr, consumer_group=cg, consume_from_where=FIRST, auto_commit=False,
        rebalance_interval_ms=1000, broker_suspend_max_time_ms=1000, consumer_timeout_when_suspend_ms=3000,
        consumer_pull_timeout_ms=2000,
        client=ClientConfig(mq_client_api_timeout_ms=2000, poll_name_server_interval_ms=1000,
                            heartbeat_broker_interval_ms=1000),
    )  # fmt: skip
    consumer.subscribe(topic, "*")
    got: list[bytes] = []

    def polled(want: list[bytes]) -> bool:
        got.extend(m.body for m in consumer.poll(500))
        return set(want) <= set(got)

    try:
        consumer.start()
        with Admin(group.namesrv.addr) as admin:
            assert _addrs(admin).get(0) == group.master.addr  # still listed
        wait_for(lambda: polled(before), "every message, polled from the slave", 120)
        consumer.commit()
        with BlockingMQClientAPI(group.namesrv.addr) as api:  # the commit went to the slave
            committed = [api.query_consumer_offset(group.slave.addr, cg, topic, qid) or 0 for qid in range(4)]
        assert sum(committed) == len(before)

        os.kill(group.master.pid, signal.SIGCONT)
        after = [b"m-%03d" % i for i in range(20)]
        produce(group, topic, after)
        wait_for(lambda: polled(after), "the messages produced after the master came back", 90)
        assert set(got) == set(before) | set(after)
    finally:
        os.kill(group.master.pid, signal.SIGCONT)
        consumer.shutdown()


#: the promise for slave reads (docs/failover.md, "Clients during a failover"): the first
#: read after a SIGKILL of the master is served by the slave within this bound
SLAVE_READ_BOUND_S = 3.0


@pytest.mark.serial  # asserts a time bound: runs alone on the machine
def test_first_read_from_the_slave_after_a_master_sigkill_is_prompt(group: Group) -> None:
    """A lite pull consumer with the default client settings (30 s route poll), reading from the
    master, then paused on a backlog: after a SIGKILL of the master (no other master appears), a
    direct pull and the resumed background pulls are served by the slave within the bound."""
    topic, cg = "ReplFirstRead", "cg-repl-first"
    create_topic(group.namesrv.addr, topic, broker_addr=group.master.addr)
    head = [b"h-%03d" % i for i in range(8)]
    produce(group, topic, head)
    consumer = LitePullConsumer(
        group.namesrv.addr, consumer_group=cg, consume_from_where=FIRST, auto_commit=False, pull_batch_size=4,
        broker_suspend_max_time_ms=1000,
    )  # fmt: skip
    consumer.subscribe(topic, "*")
    got: list[bytes] = []

    def polled(want: list[bytes]) -> bool:
        got.extend(m.body for m in consumer.poll(200))
        return set(want) <= set(got)

    try:
        consumer.start()
        wait_for(lambda: polled(head), "the first messages, read from the master", 60)
        queues = consumer.assignment()
        consumer.pause(queues)
        time.sleep(2.0)  # the pulls held on the master (1 s long polls) end: none is in flight now
        backlog = [b"b-%03d" % i for i in range(40)]
        produce(group, topic, backlog)
        group.wait_slave_caught_up(topic)
        mq = min(queues, key=lambda q: q.queue_id)
        killed = time.monotonic()
        group.master.kill9()
        group.dead.append(group.master)
        pulled = consumer.pull(mq, 0, 4)
        pull_s = time.monotonic() - killed
        assert pulled.messages, pulled
        consumer.resume(queues)

        def backlog_read() -> bool:
            polled([])
            return any(b.startswith(b"b-") for b in got)

        wait_for(backlog_read, "a polled backlog message", 60)
        poll_s = time.monotonic() - killed
        wait_for(lambda: polled(backlog), "the whole backlog, read from the slave", 60)
    finally:
        consumer.shutdown()
    print(f"\nfirst read after the SIGKILL: direct pull {pull_s:.2f} s, first polled backlog {poll_s:.2f} s")
    assert pull_s <= SLAVE_READ_BOUND_S and poll_s <= SLAVE_READ_BOUND_S, (pull_s, poll_s)


# ---------------------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_spark_batch_read_from_the_slave_while_the_master_is_down(spark_session: Any, group: Group) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    topic = "ReplSpark"
    create_topic(group.namesrv.addr, topic, broker_addr=group.master.addr)
    bodies = [b"s-%03d" % i for i in range(40)]
    produce(group, topic, bodies)
    group.wait_slave_caught_up(topic)

    def read() -> list[bytes]:
        df = (
            spark_session.read.format("rocketmq").option("nameServer", group.namesrv.addr)
            .option("topic", topic).load()
        )  # fmt: skip
        return sorted(bytes(r.body) for r in df.select("body").collect())

    assert read() == sorted(bodies)
    group.kill_master()
    assert read() == sorted(bodies)  # planned and read on the slave
    group.restart_master()
    more = [b"t-%03d" % i for i in range(10)]
    produce(group, topic, more)
    gets = master_gets(group)
    assert read() == sorted(bodies + more)
    assert master_gets(group) > gets  # read from the master again


def test_spark_executor_pull_planned_on_a_hung_master_is_served_by_the_slave(group: Group) -> None:
    """The executor side of the source: a range planned on the master, which then hangs
    (SIGSTOP; still listed by the NameServer), is pulled from the slave, same offsets."""
    from rocketq.client.model import PullStatus
    from rocketq.connector.access import BrokerAccess

    topic = "ReplExec"
    create_topic(group.namesrv.addr, topic, 1, broker_addr=group.master.addr)
    produce(group, topic, [b"e-%03d" % i for i in range(10)])
    group.wait_slave_caught_up(topic)
    access = BrokerAccess(group.namesrv.addr, timeout_ms=2000)
    try:
        ((queue, addr),) = access.read_queues(topic).items()
        assert addr == group.master.addr
        os.kill(group.master.pid, signal.SIGSTOP)
        try:
            res = access.pull(
                queue,
                addr,
                3,
                group="cg-exec",
                max_nums=32,
                max_bytes=1 << 20,
                sub_expression="*",
                timeout_ms=2000,
            )
            assert res.status is PullStatus.FOUND and [m.queue_offset for m in res.messages] == list(
                range(3, 10)
            )
            assert access.served_by_slave(queue)
            assert access.max_offset(queue, addr) == 10  # offsets too, without waiting for the backoff
        finally:
            os.kill(group.master.pid, signal.SIGCONT)
    finally:
        access.close()


# ---------------------------------------------------------------------------------------- rocketq dev


def test_dev_starts_a_slave_per_master(tmp_path: Path) -> None:
    proc, out = start_rocketq_dev(
        "--slaves", "1", "--broker-role", "SYNC_MASTER", "--enable-property-filter", cwd=tmp_path
    )
    try:
        out.values({"SLAVE_ADDRS"}, 90)
        text = out.text()
        ns = re.search(r"^NAMESRV_ADDR=(\S+)$", text, re.MULTILINE)
        master = re.search(r"^BROKER_ADDR=(\S+)$", text, re.MULTILINE)
        slaves = re.search(r"^SLAVE_ADDRS=(\S+)$", text, re.MULTILINE)
        assert ns is not None and master is not None and slaves is not None, text
        (slave,) = slaves.group(1).split(",")
        assert re.search(rf"Slave:\s+{BROKER} #1 at {re.escape(slave)}", text), text
        with Admin(ns.group(1)) as admin:
            wait_for(lambda: _addrs(admin).get(1) == slave, "the slave in the NameServer", 30)
            assert admin.ha_status(slave).broker_role == "SLAVE"
            assert admin.ha_status(master.group(1)).broker_role == "SYNC_MASTER"
        client = BlockingRemotingClient()
        try:
            for addr in (master.group(1), slave):
                answer = client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 5000)
                assert "enablePropertyFilter=true" in answer.body.decode(), addr
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        print("--- rocketq dev output ---\n" + out.text())


# ---------------------------------------------------------------------------------------- docs


def test_the_documented_deployment_confs_load() -> None:
    from rocketq.broker.config import BrokerRole
    from rocketq.broker.config_loader import config_from_properties
    from rocketq.server.properties import parse_properties

    doc = (Path(__file__).resolve().parents[1] / "docs" / "replication.md").read_text(encoding="utf-8")
    section = doc.split("## Deployment examples", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```properties\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 4
    warnings: list[str] = []
    configs = [config_from_properties(parse_properties(b), warn=warnings.append) for b in blocks]
    assert warnings == []
    roles = {(c.broker_name, c.broker_id): c.broker_role for c in configs}
    assert roles == {
        ("broker-a", 0): BrokerRole.SYNC_MASTER, ("broker-a", 1): BrokerRole.SLAVE,
        ("broker-b", 0): BrokerRole.SYNC_MASTER, ("broker-b", 1): BrokerRole.SLAVE,
    }  # fmt: skip
    assert {c.flush_disk_type.name for c in configs} == {"ASYNC_FLUSH"}
    assert len({c.broker_cluster_name for c in configs}) == 1
