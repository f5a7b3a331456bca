"""Automatic failover in controller mode (RocketMQ 5, RIP-44) with real processes and real signals.

Every test starts three controllers (``python -m rocketq.controller``, a Raft group), a NameServer
and one group of three brokers in controller mode (``enableControllerMode=true``, SYNC replication
to the SyncStateSet with ``allAckInSyncStateSet=true``, ASYNC_FLUSH, the heartbeat settings
docs/failover.md recommends: :class:`rocketq.client.testing.ControllerGroup`), each broker on a
fixed port so that a restart keeps its address.  The brokers' controller-mode state is read from
GET_BROKER_HA_STATUS (``masterEpoch``, ``syncStateSet``, ``fenced``...) and the controllers' from
CONTROLLER_GET_METADATA_INFO and CONTROLLER_GET_SYNC_STATE_DATA.  The scenarios: a master SIGKILLed,
its restart as a slave that truncates a divergent tail, a master SIGSTOPped past the heartbeat
timeout that must not acknowledge anything after SIGCONT, the controller leader SIGKILLed during a
failover, and two of three controllers down (no election, and a status that says why); and the
sinks' sends (an encoded batch to a fixed queue, half messages committed with
end_transaction_batch) across a master SIGKILL.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketq.client.errors import RocketQError
from rocketq.client.model import LocalTransactionState, Message, MessageExt, PullStatus, SendStatus
from rocketq.client.producer import Producer, TransactionProducer
from rocketq.client.producer.transaction_batch import end_transaction_batch_blocking
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.testing import (
    FAST_FAILOVER_BROKER_CONF,
    ControllerGroup,
    pull_header,
    send_header,
    wait_for,
)

pytestmark = pytest.mark.slow

BROKER = "broker-f"
TOPIC = "FailoverT"
QUEUES = 4
HEARTBEAT_TIMEOUT_MS = int(FAST_FAILOVER_BROKER_CONF["controllerHeartBeatTimeoutMills"])
FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
WAIT_S = 60.0

Cluster = ControllerGroup


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[ControllerGroup]:
    c = ControllerGroup(tmp_path, BROKER, client=FAST, wait_s=WAIT_S)
    try:
        yield c
    finally:
        print(c.close())


def create_topic(c: Cluster, master_addr: str) -> None:
    """The topic on the master, then on every slave (slave metadata sync) so any can take over."""
    with Admin(c.namesrv.addr) as admin:
        admin.create_topic(TOPIC, broker_addr=master_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    for slot in range(3):
        wait_for(
            functools.partial(c.knows_topic, c.addr(slot), TOPIC), f"broker {slot} to know {TOPIC}", WAIT_S
        )


def pull(c: Cluster, addr: str, queue_id: int, offset: int) -> list[MessageExt] | None:
    """The messages at ``offset`` of a queue on one broker ([] past the end); None if refused."""
    try:
        result = c.api.pull_message(
            addr, pull_header(TOPIC, queue_id, offset, group="failover-check", max_msg_nums=64), 3000
        )
    except (RocketQError, TimeoutError):
        return None
    return list(result.messages) if result.status is PullStatus.FOUND else []


def send_ok(producer: Producer, body: bytes, attempts: int = 60) -> str:
    """Send until SEND_OK (bounded); returns the UNIQ_KEY."""
    last: object = None
    for _ in range(attempts):
        try:
            result = producer.send(Message(TOPIC, body))
        except (RocketQError, TimeoutError) as exc:
            last = exc
            time.sleep(0.25)
            continue
        if result.send_status is SendStatus.SEND_OK:
            return result.msg_id
        last = result.send_status
        time.sleep(0.25)
    raise AssertionError(f"no SEND_OK for {body!r} in {attempts} attempts; last: {last}")


def raw_send(c: Cluster, addr: str, body: bytes, timeout_ms: int = 10_000) -> RemotingCommand | None:
    """A SEND_MESSAGE_V2 addressed to ``addr`` itself (no route, no retry); None on no answer."""
    header = send_header(TOPIC, default_topic_queue_nums=QUEUES, producer_group="failover-raw")
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
    try:
        return c.api.run(c.api.api.invoke(addr, cmd, timeout_ms), timeout_ms / 1000 + 5)
    except (RocketQError, TimeoutError):
        return None


def new_producer(c: Cluster, name: str) -> Producer:
    producer = Producer(c.namesrv.addr, producer_group=f"pg-{name}", send_msg_timeout_ms=3000, client=FAST)
    producer.start()
    return producer


def started_group(c: Cluster) -> tuple[str, dict[str, Any]]:
    """The first master with all three brokers in its SyncStateSet, and the topic created."""
    addr, st = c.wait_master("a master with all three brokers in its SyncStateSet", c.full_set)
    create_topic(c, addr)
    return addr, st


def test_master_sigkill_elects_a_sync_state_set_member(cluster: Cluster) -> None:
    c = cluster
    old_addr, old = started_group(c)
    seen: set[bytes] = set()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        c.namesrv.addr, consumer_group="cg-failover", client=FAST, rebalance_interval_ms=1000,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    producer = new_producer(c, "kill")
    consumer.start()
    try:
        before = [b"before-%03d" % i for i in range(20)]
        for body in before:
            send_ok(producer, body)
        wait_for(lambda: set(before) <= seen, "the consumer to read the first messages", WAIT_S)
        c.broker(c.slot_of(old_addr)).kill9()
        killed = time.monotonic()
        send_ok(producer, b"after-000")
        took = time.monotonic() - killed
        new_addr, new = c.wait_new_master(old_addr)
        assert new["masterEpoch"] == old["masterEpoch"] + 1, (old, new)
        assert new["brokerControllerId"] in old["syncStateSet"], (old, new)
        info = c.replicas_info()
        assert info.master_address == new_addr and info.master_epoch == new["masterEpoch"]
        after = [b"after-%03d" % i for i in range(1, 20)]
        for body in after:
            send_ok(producer, body)
        wait_for(
            lambda: {b"after-000", *after} <= seen, "the consumer to read through the new master", WAIT_S
        )
        print(f"\nfailover {old_addr} -> {new_addr}: first SEND_OK {took:.1f} s after the SIGKILL")
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_sink_sends_and_the_exactly_once_commit_ride_through_a_master_sigkill(cluster: Cluster) -> None:
    """What the Spark sinks use, across a SIGKILL of the master, with default client settings: an
    encoded batch to a fixed queue is acknowledged by the new master on that queue, and half
    messages stored (and acknowledged) by the old master are committed on the new one by
    end_transaction_batch, which finds the new master itself."""
    c = cluster
    old_addr, _ = started_group(c)
    mq = MessageQueue(TOPIC, BROKER, 2)
    halves = [Message(TOPIC, b"half-%d" % i) for i in range(3)]
    with TransactionProducer(c.namesrv.addr, producer_group="pg-sink-fo") as producer:
        handle = producer.send_half_batch(mq, halves)
        assert handle.broker_addr == old_addr and handle.count == 3
        c.broker(c.slot_of(old_addr)).kill9()
        killed = time.monotonic()
        body = encode_batch([(0, b"encoded-%d" % i, {"UNIQ_KEY": f"enc-{i}"}) for i in range(2)])
        sent = producer.send_encoded_batch(mq, body, count=2, timeout_ms=3000)
        took = time.monotonic() - killed
        new_addr, _ = c.wait_new_master(old_addr)
        assert sent.message_queue == mq and sent.offset_msg_id, sent
        end_transaction_batch_blocking(c.api, "pg-sink-fo", [handle], LocalTransactionState.COMMIT_MESSAGE)

    def committed() -> bool:
        bodies = {m.body for m in pull(c, new_addr, mq.queue_id, 0) or ()}
        return {b"half-0", b"half-1", b"half-2", b"encoded-0", b"encoded-1"} <= bodies

    wait_for(committed, "the committed halves and the encoded batch on the new master's queue", WAIT_S)
    print(f"\nencoded batch acknowledged by the new master {took:.2f} s after the SIGKILL")


def commit_log_bytes(c: Cluster, slot: int, upto: int) -> bytes:
    folder = c.tmp / f"store-{BROKER}-{slot + 1}" / "commitlog"
    data = b"".join((folder / name).read_bytes() for name in sorted(os.listdir(folder)))
    return data[:upto]


def test_old_master_restarts_as_slave_and_truncates_its_divergent_tail(cluster: Cluster) -> None:
    c = cluster
    old_addr, old = started_group(c)
    old_slot = c.slot_of(old_addr)
    slaves = [c.broker(s) for s in range(3) if s != old_slot]
    producer = new_producer(c, "diverge")
    try:
        for i in range(10):
            send_ok(producer, b"acked-%03d" % i)
        for proc in slaves:
            os.killpg(proc.pid, signal.SIGSTOP)
        # once the master dropped their HA connections, nothing more reaches the stopped slaves
        wait_for(
            lambda: not (c.status(old_addr) or {}).get("haConnectionInfo"),
            "the HA connections to drop",
            WAIT_S,
        )
        # stored by the master alone: the SyncStateSet members cannot ack, nothing is SEND_OK
        divergent = [raw_send(c, old_addr, b"divergent-%d" % i, 5000) for i in range(3)]
        assert all(r is not None and r.code != ResponseCode.SUCCESS for r in divergent), divergent
        tail_end = int(c.status(old_addr)["masterCommitLogMaxOffset"])
        c.broker(old_slot).kill9()
        for proc in slaves:
            os.killpg(proc.pid, signal.SIGCONT)
        new_addr, new = c.wait_new_master(old_addr)
        assert new["masterEpoch"] > old["masterEpoch"]
        new_end = int(new["masterCommitLogMaxOffset"])
        assert new_end < tail_end, "the divergent tail is not divergent"
        send_ok(producer, b"under-new-master")
        c.start_broker(old_slot)

        def rejoined() -> bool:
            st = c.status(old_addr)
            m = c.status(new_addr)
            return bool(
                st
                and m
                and not st.get("master")
                and st.get("masterEpoch") == new["masterEpoch"]
                and st.get("haClientRuntimeInfo", {}).get("maxOffset") == m["masterCommitLogMaxOffset"]
            )

        wait_for(rejoined, "the old master to rejoin as slave and catch up", WAIT_S)
        end = int(c.status(new_addr)["masterCommitLogMaxOffset"])
        assert commit_log_bytes(c, old_slot, end) == commit_log_bytes(c, c.slot_of(new_addr), end)
        bodies = {m.body for q in range(QUEUES) for m in pull(c, old_addr, q, 0) or ()}
        assert not any(b.startswith(b"divergent-") for b in bodies), "the divergent tail survived"
        assert "truncat" in c.broker(old_slot).log_text().lower()
    finally:
        producer.shutdown()


def test_stopped_master_steps_down_without_acknowledging(cluster: Cluster) -> None:
    c = cluster
    old_addr, old = started_group(c)
    old_proc = c.broker(c.slot_of(old_addr))
    producer = new_producer(c, "stop")
    try:
        send_ok(producer, b"first")
        os.killpg(old_proc.pid, signal.SIGSTOP)
        # queued in the stopped broker's socket: processed the moment it wakes up
        queued: list[RemotingCommand | None] = []
        sender = threading.Thread(target=lambda: queued.append(raw_send(c, old_addr, b"queued", 60_000)))
        sender.start()
        try:
            send_ok(producer, b"through-the-new-master", attempts=120)
            new_addr, new = c.wait_new_master(old_addr)
            assert new["masterEpoch"] == old["masterEpoch"] + 1
        finally:
            os.killpg(old_proc.pid, signal.SIGCONT)
        sender.join(70)
        assert queued and (queued[0] is None or queued[0].code != ResponseCode.SUCCESS), queued
        direct = raw_send(c, old_addr, b"direct-after-sigcont")
        assert direct is None or direct.code != ResponseCode.SUCCESS, (direct.code, direct.remark)

        def stepped_down() -> bool:
            st = c.status(old_addr)
            return bool(st and not st.get("master") and st.get("masterEpoch") == new["masterEpoch"])

        wait_for(stepped_down, "the old master to step down to slave of the new epoch", WAIT_S)
        late = raw_send(c, old_addr, b"direct-as-slave")
        assert late is not None and late.code != ResponseCode.SUCCESS
        bodies = {m.body for q in range(QUEUES) for m in pull(c, new_addr, q, 0) or ()}
        assert not {b"queued", b"direct-after-sigcont", b"direct-as-slave"} & bodies
    finally:
        producer.shutdown()


def test_controller_leader_killed_during_a_failover(cluster: Cluster) -> None:
    c = cluster
    old_addr, old = started_group(c)
    leader = c.leader()
    producer = new_producer(c, "leader")
    try:
        send_ok(producer, b"before")
        c.broker(c.slot_of(old_addr)).kill9()
        leader.kill9()
        _, new = c.wait_new_master(old_addr)
        assert new["masterEpoch"] == old["masterEpoch"] + 1
        send_ok(producer, b"after", attempts=120)
        assert c.leader() is not leader
    finally:
        producer.shutdown()


def test_two_controllers_down_no_election_and_a_clear_status(cluster: Cluster) -> None:
    c = cluster
    old_addr, old = started_group(c)
    survivor = c.controllers[0]
    for proc in c.controllers[1:]:
        proc.kill9()
    wait_for(lambda: not c.metadata(survivor).has_quorum, "the survivor to notice it has no quorum", WAIT_S)
    c.broker(c.slot_of(old_addr)).kill9()
    time.sleep(3 * (HEARTBEAT_TIMEOUT_MS / 1000 + 1))  # several heartbeat timeouts and scans
    meta = c.metadata(survivor)
    assert not meta.is_leader and not meta.has_quorum, meta
    assert meta.groups[BROKER].master_epoch == old["masterEpoch"], "a minority decided an election"
    for slot in range(3):
        st = c.status(c.addr(slot))
        assert st is None or not st.get("master") or st.get("fenced"), (slot, st)
    admin = c.controller_admin()
    with pytest.raises(RocketQError) as refused:
        c.api.run(admin.get_sync_state_data(survivor.addr, [BROKER]), 15)
    assert "leader" in str(refused.value).lower() or "quorum" in str(refused.value).lower()
    # a majority again: the election happens
    c.restart_controller(1)
    _, new = c.wait_new_master(old_addr)
    assert new["masterEpoch"] > old["masterEpoch"]
