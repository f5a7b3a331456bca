"""Chaos test of automatic failover (controller mode): real processes, real signals, many rounds.

Three controllers (a Raft group), a NameServer and one group of three brokers in controller mode
with SYNC replication to the SyncStateSet (``allAckInSyncStateSet=true``, ASYNC_FLUSH) and the
heartbeat settings docs/failover.md recommends (:class:`rocketq.client.testing.ControllerGroup`).
Two producers with the default client settings, as an application runs them and never restarted,
send with per-key order, one with ``send`` and one with ``send_async``: each
key always goes to the queue its hash selects (``SelectMessageQueueByHash``), its messages carry
a sequence number that only moves on once a send was answered SEND_OK (a failed send is sent again
as a new message with the same number), and every SEND_OK is recorded with its queue, queue
offset, UNIQ_KEY and body.  A push consumer reads meanwhile.

Every round waits until all three brokers are in the master's SyncStateSet, then, at a random point
of the load, kills the *current* master: SIGKILL, or in some rounds SIGSTOP (SIGCONT once another
master took over); in some rounds a controller is SIGKILLed with it (sometimes the Raft leader) and
restarted afterwards.  Round 1 is always a SIGKILL and round 2 a SIGSTOP of the master alone.  The
round ends with the first acknowledged send of each producer through the new master (its failover
time: from the kill to that SEND_OK of a send begun after the kill, told apart by the broker address
in the offset message id).  That is the product promise, asserted in every round without a
controller kill: within 3 s of a SIGKILL, within the heartbeat timeout + 2 s of a SIGSTOP
(docs/failover.md, "Clients during a failover").  The killed broker is restarted on its
store and must rejoin as a slave (truncating what it wrote and nobody acknowledged).  After the last
round every queue of the topic is read from the current master and checked: every acknowledged
message is stored at the queue offset its SEND_OK named (0 lost, and no other message under an
acknowledged offset), no two acknowledged sends name one queue offset, and per key the sequence
numbers of the acknowledged messages increase along the queue offsets.  The push consumer must have
read every acknowledged message: a master serves reads only up to its confirm offset (RocketMQ 5's
``readUnCommitted=false``), so no consumer reads a tail that a failover later truncates and then
skips the acknowledged messages of the new master at the same offsets (docs/failover.md).

``ROCKETQ_CHAOS_ROUNDS`` sets the number of rounds (default 2, for CI; the full run is
``ROCKETQ_CHAOS_ROUNDS=20 pytest -s integration_tests/test_failover_chaos.py``, docs/failover.md
"Failover time"), ``ROCKETQ_CHAOS_SEED`` the random seed (printed).  Run with ``-s`` to see the
rounds, the kill times and the failover times.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client import testing
from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.model import Message, MessageExt, PullStatus, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.testing import FAST_FAILOVER_BROKER_CONF, ControllerGroup, pull_header
from rocketq.client.testing.chaos import Acked, Ledger, Load
from rocketq.client.testing.ordered import Reader, check_acked_stored, send_key

pytestmark = [pytest.mark.slow, pytest.mark.serial]

BROKER = "broker-x"
TOPIC = "FailoverChaosT"
QUEUES = 4
KEYS = tuple(f"key-{i}" for i in range(4))  # sent with Producer.send
ASYNC_KEYS = tuple(f"akey-{i}" for i in range(3))  # sent with Producer.send_async
ROUNDS = int(os.environ.get("ROCKETQ_CHAOS_ROUNDS", "2"))
SEED = int(os.environ.get("ROCKETQ_CHAOS_SEED", str(random.randrange(1 << 30))))
HEARTBEAT_INTERVAL_MS = 1000
HEARTBEAT_TIMEOUT_MS = 3000
SCAN_INTERVAL_MS = 1000
#: docs/failover.md, "Settings that trade failover time against false elections"
BROKER_CONF: dict[str, Any] = {
    **FAST_FAILOVER_BROKER_CONF,
    "brokerHeartbeatInterval": HEARTBEAT_INTERVAL_MS,
    "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
    "maxTransferCountOnMessageInMemory": 4000,
    "maxTransferBytesOnMessageInMemory": 4 << 20,
}
CONTROLLER_CONF: dict[str, Any] = {
    "scanNotActiveBrokerInterval": SCAN_INTERVAL_MS,
    "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS,
}
#: the product promise (docs/failover.md, "Clients during a failover"): a selector send begun after
#: the kill of the master is acknowledged by the new master within these bounds
SIGKILL_BOUND_S = 3.0
SIGSTOP_BOUND_S = HEARTBEAT_TIMEOUT_MS / 1000 + 2.0
FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
WAIT_S = 90.0


#: set when a wait timed out: the fixture then has every live server dump its threads' stacks
#: into its log (kill -USR1, rocketq.server.diagnostics) before printing the log tails
STUCK: list[str] = []


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """A bounded wait that, when it times out, has the fixture dump the servers' stacks."""
    try:
        testing.wait_for(predicate, f"{what} (seed {SEED})", timeout_s)
    except testing.WaitTimeout:
        STUCK.append(what)
        raise


def start_load(namesrv_addr: str, ledger: Ledger) -> list[Load]:
    """Two producers as an application runs them (default client settings, never restarted): one
    sends with ``send``, one with ``send_async``, a sender thread per key."""
    loads = []
    for name, keys, use_async in (("pg-chaos", KEYS, False), ("pg-chaos-async", ASYNC_KEYS, True)):
        producer = Producer(namesrv_addr, producer_group=name, send_msg_timeout_ms=3000)
        producer.start()
        senders = [
            functools.partial(
                send_key, producer, TOPIC, k, ledger, body_size=120, use_async=use_async, max_s=3600
            )
            for k in keys
        ]
        loads.append(Load(producer, senders))
    return loads


Cluster = ControllerGroup


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[ControllerGroup]:
    c = ControllerGroup(
        tmp_path, BROKER, broker_conf=BROKER_CONF, controller_conf=CONTROLLER_CONF, client=FAST, wait_s=WAIT_S
    )
    try:
        yield c
    finally:
        stuck = bool(STUCK)
        STUCK.clear()
        print(c.close(dump_stacks=stuck, log_lines=80 if stuck else 15))


def check_header(queue_id: int, offset: int) -> PullMessageRequestHeader:
    """A direct pull of the topic's queue from ``offset``, as the checks read it."""
    return pull_header(TOPIC, queue_id, offset, group="chaos-check", max_msg_nums=4000)


def read_queues(c: Cluster, addr: str) -> dict[tuple[int, int], MessageExt]:
    """Every message of every queue of the topic on ``addr``, by (queue id, queue offset)."""
    stored: dict[tuple[int, int], MessageExt] = {}
    for queue_id in range(QUEUES):
        end = c.api.get_max_offset(addr, TOPIC, queue_id)
        offset = 0
        for _ in range(end + 1):  # each pull moves on by at least one message
            if offset >= end:
                break
            result = c.api.pull_message(addr, check_header(queue_id, offset), 10_000)
            assert result.status is PullStatus.FOUND, (queue_id, offset, end, result.status)
            for m in result.messages:
                stored[(queue_id, m.queue_offset)] = m
            assert result.next_begin_offset > offset
            offset = result.next_begin_offset
    return stored


@dataclass(frozen=True)
class Kill:
    """What one round did."""

    signal: str  # "SIGKILL" or "SIGSTOP"
    controller: str  # "", "leader" or "follower"
    delay_s: float  # into the load

    @property
    def bound_s(self) -> float | None:
        """The promised failover time of the round, None when a controller dies with the master
        (the controllers elect their own leader first: not bounded by the promise)."""
        if self.controller:
            return None
        return SIGKILL_BOUND_S if self.signal == "SIGKILL" else SIGSTOP_BOUND_S


def plan(round_no: int, rng: random.Random) -> Kill:
    """Round 1 a SIGKILL and round 2 a SIGSTOP of the master alone (the promise, in every run);
    later rounds random, sometimes with a controller killed too."""
    if round_no <= 2:
        return Kill("SIGKILL" if round_no == 1 else "SIGSTOP", "", rng.uniform(0.3, 3.0))
    sig = "SIGSTOP" if rng.random() < 0.3 else "SIGKILL"
    roll = rng.random()
    controller = "leader" if roll < 0.2 else "follower" if roll < 0.35 else ""
    return Kill(sig, controller, rng.uniform(0.3, 3.0))


def full_set(addr: str, st: dict[str, Any]) -> bool:
    return len(st.get("syncStateSet") or ()) == 3


def first_ack(ledger: Ledger, keys: tuple[str, ...], killed_at: float, old_port: int) -> Acked | None:
    """The first SEND_OK of a send of ``keys`` begun after the kill, from another broker."""
    later = [a for a in ledger.acked() if a.key in keys and a.sent_at > killed_at and a.port != old_port]
    return min(later, key=lambda a: a.acked_at) if later else None


@dataclass(frozen=True)
class Round:
    kill: Kill
    line: str
    send_s: float  # kill -> first SEND_OK through the new master of a send() begun after it
    send_async_s: float  # the same for send_async()

    def over_bound(self) -> str | None:
        bound = self.kill.bound_s
        if bound is None or max(self.send_s, self.send_async_s) <= bound:
            return None
        return f"{self.line}: over the {bound:.1f} s bound"


def run_round(c: Cluster, ledger: Ledger, kill: Kill) -> Round:
    """Kill the current master as ``kill`` says.  The failover time of each kind of send is from
    the kill to the first SEND_OK from another broker for a send of that kind begun after it."""
    old_addr, old = c.wait_master("all three brokers in the SyncStateSet", full_set)
    slot = c.slot_of(old_addr)
    ok_before = ledger.count()
    wait_for(lambda: ledger.count() > ok_before + 5, "acknowledged sends before the kill")
    time.sleep(kill.delay_s)
    stopped_controller: int | None = None
    if kill.controller:
        leader = c.leader_index()
        others = [i for i in range(3) if i != leader]
        stopped_controller = leader if kill.controller == "leader" and leader is not None else others[0]
    killed_at = time.monotonic()
    proc = c.broker(slot)
    if kill.signal == "SIGKILL":
        proc.kill9()
    else:
        os.killpg(proc.pid, signal.SIGSTOP)
    if stopped_controller is not None:
        c.controllers[stopped_controller].kill9()
    firsts: dict[tuple[str, ...], Acked] = {}

    def acked_through_new_master() -> bool:
        for keys in (KEYS, ASYNC_KEYS):
            a = first_ack(ledger, keys, killed_at, c.ports[slot])
            if a is not None:
                firsts[keys] = a
        return len(firsts) == 2

    wait_for(acked_through_new_master, "a SEND_OK through a new master for send() and send_async()")
    send_s, async_s = (firsts[k].acked_at - killed_at for k in (KEYS, ASYNC_KEYS))
    new_addr, new = c.wait_master("the new master", lambda a, st: a != old_addr)
    assert new["masterEpoch"] > old["masterEpoch"], (old, new)
    assert new["brokerControllerId"] in old["syncStateSet"], (old, new)
    if kill.signal == "SIGKILL":
        c.start_broker(slot)
    else:
        os.killpg(proc.pid, signal.SIGCONT)
    if stopped_controller is not None:
        c.restart_controller(stopped_controller)

    def rejoined() -> bool:
        st = c.status(old_addr)
        return bool(st) and not st.get("master") and st.get("masterEpoch", 0) >= new["masterEpoch"]

    wait_for(rejoined, f"{old_addr} to rejoin as a slave")
    ctl = f" + controller {kill.controller} SIGKILL" if kill.controller else ""
    line = (
        f"{kill.signal} of master {old_addr} (epoch {old['masterEpoch']}){ctl} {kill.delay_s:.2f} s "
        f"into the load; new master {new_addr} (epoch {new['masterEpoch']}); first SEND_OK through "
        f"it: send {send_s:.2f} s, send_async {async_s:.2f} s"
    )
    return Round(kill, line, send_s, async_s)


def check_stored(c: Cluster, ledger: Ledger) -> str:
    """0 lost, nothing else under an acknowledged offset, per-key order; returns a summary."""
    addr, _ = c.wait_master("a master for the final read", lambda a, st: True)
    acked = ledger.acked()
    stored = read_queues(c, addr)
    check_acked_stored(acked, stored, KEYS + ASYNC_KEYS, f"(seed {SEED})")
    return (
        f"{len(acked)} acknowledged, {len(stored)} stored on {addr}: 0 lost, 0 replaced, per-key order kept"
    )


def consumer_coverage(ledger: Ledger, reader: Reader, quiet_s: float = 20.0) -> tuple[str, int]:
    """How many acknowledged messages the consumer read, once it read them all or read nothing
    new for ``quiet_s``; the ones it missed are named.  Returns the line and the number missed."""
    acked = {a.msg_id: a for a in ledger.acked()}
    not_read = reader.missing(set(acked), quiet_s, max_s=300)
    missed = sorted((acked[k].queue_id, acked[k].queue_offset) for k in not_read)
    line = f"the consumer read {len(acked) - len(missed)} of {len(acked)} acknowledged messages" + (
        f"; missed {len(missed)}, first (queue, offset): {missed[:10]}" if missed else ""
    )
    return line, len(missed)


def test_failover_chaos(cluster: Cluster) -> None:
    c = cluster
    rng = random.Random(SEED)
    ledger = Ledger()
    first, _ = c.wait_master("the first master", full_set)
    with Admin(c.namesrv.addr) as admin:
        admin.create_topic(TOPIC, broker_addr=first, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    for slot in range(3):
        wait_for(functools.partial(c.knows_topic, c.addr(slot), TOPIC), f"broker {slot} to know the topic")
    print(
        f"\nfailover chaos: {ROUNDS} rounds, seed {SEED}; "
        f"brokerHeartbeatInterval={HEARTBEAT_INTERVAL_MS} controllerHeartBeatTimeoutMills="
        f"{HEARTBEAT_TIMEOUT_MS} scanNotActiveBrokerInterval={SCAN_INTERVAL_MS}"
    )
    reader = Reader(c.namesrv.addr, TOPIC, "cg-chaos", FAST)
    loads = start_load(c.namesrv.addr, ledger)
    rounds: list[Round] = []
    try:
        for round_no in range(1, ROUNDS + 1):
            r = run_round(c, ledger, plan(round_no, rng))
            rounds.append(r)
            print(
                f"round {round_no:2}: {r.line}; SEND_OK so far {ledger.count()}, failed sends {ledger.failed}"
            )
        for load in loads:
            load.stop_sending()
        summary = check_stored(c, ledger)
        consumer_line, missed = consumer_coverage(ledger, reader)
    finally:
        for load in loads:
            load.close()
        reader.close()
    print(summary)
    print(consumer_line)
    times = [max(r.send_s, r.send_async_s) for r in rounds]
    print(
        f"failover time over {len(times)} rounds: p50 {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s (bounds: SIGKILL {SIGKILL_BOUND_S:.1f} s, SIGSTOP {SIGSTOP_BOUND_S:.1f} s; "
        f"heartbeat timeout {HEARTBEAT_TIMEOUT_MS} ms, scan {SCAN_INTERVAL_MS} ms)"
    )
    over = [line for r in rounds if (line := r.over_bound()) is not None]
    assert not over, f"failover slower than promised (seed {SEED}): {over}"
    assert missed == 0, f"{consumer_line} (seed {SEED})"


def test_unconfirmed_messages_are_not_readable(cluster: Cluster) -> None:
    """A message the SyncStateSet has not acknowledged is neither pulled nor counted by GET_MAX_OFFSET,
    on the master (readUnCommitted=false) nor on a slave that holds it (the master's confirm frames);
    it becomes readable on both once the members acknowledge it."""
    c = cluster
    addr, _ = c.wait_master("a master with its full SyncStateSet", full_set)
    with Admin(c.namesrv.addr) as admin:
        admin.create_topic(TOPIC, broker_addr=addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    slave_addrs = [c.addr(s) for s in range(3) if c.addr(s) != addr]
    for a in (addr, *slave_addrs):
        wait_for(functools.partial(c.knows_topic, a, TOPIC), f"{a} to know the topic")
    running, stopped = slave_addrs[0], c.broker(c.slot_of(slave_addrs[1]))
    producer = Producer(
        c.namesrv.addr, producer_group="pg-unconfirmed", send_msg_timeout_ms=5000, client=FAST
    )
    producer.start()
    try:
        before = producer.send(Message(TOPIC, b"confirmed"))
        assert before.send_status is SendStatus.SEND_OK, before
        os.killpg(stopped.pid, signal.SIGSTOP)
        # stored by the master and the running slave, not acknowledged by the stopped one, which
        # stays in the set for haMaxTimeSlaveNotCatchup (15 s), far longer than this send's
        # syncFlushTimeout (1 s)
        result = producer.send(Message(TOPIC, b"unconfirmed"))
        assert result.send_status is not SendStatus.SEND_OK, result
        mq = result.message_queue
        assert mq.broker_name == BROKER
        with Admin(c.namesrv.addr) as admin:
            master_max = admin.ha_status(addr).master_commit_log_max_offset

            def holds_it() -> bool:
                replica = admin.ha_status(running).client
                return replica is not None and replica.max_offset >= master_max

            wait_for(holds_it, "the running slave to hold the unacknowledged message")
        for a in (addr, running):
            pulled = c.api.pull_message(
                a,
                check_header(mq.queue_id, result.queue_offset),
                3000,
            )
            assert pulled.status is not PullStatus.FOUND, (a, pulled.messages)
            assert c.api.get_max_offset(a, TOPIC, mq.queue_id) == result.queue_offset, a
        if before.message_queue == mq:  # what was acknowledged stays readable on the slave
            got = c.api.pull_message(
                running,
                check_header(mq.queue_id, before.queue_offset),
                3000,
            )
            assert got.status is PullStatus.FOUND and got.messages[0].body == b"confirmed", got
        os.killpg(stopped.pid, signal.SIGCONT)

        def readable(a: str) -> bool:
            got = c.api.pull_message(
                a,
                check_header(mq.queue_id, result.queue_offset),
                3000,
            )
            return got.status is PullStatus.FOUND and got.messages[0].body == b"unconfirmed"

        for a in (addr, running):
            wait_for(lambda a=a: readable(a), f"the message to become readable on {a} once acknowledged")  # type: ignore[misc]
            assert c.api.get_max_offset(a, TOPIC, mq.queue_id) == result.queue_offset + 1, a
    finally:
        os.killpg(stopped.pid, signal.SIGCONT)
        producer.shutdown()
