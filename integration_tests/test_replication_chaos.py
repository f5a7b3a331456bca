"""Chaos test of replication: SYNC_MASTER + ASYNC_FLUSH with one slave, real processes, real signals.

Two scenarios, each with a producer sending under load (several threads, single sends and small
batches, every SEND_OK recorded with its UNIQ_KEY, queue and queue offset):

* master kills: in every round the master is SIGKILLed after a random delay; then every queue of
  the topic is read *from the slave* (direct pulls to its address) and every message ever
  acknowledged SEND_OK, in this round or an earlier one, must be there with its body at its queue
  offset (0 lost); the master restarts on its store, the slave reconnects, and the next round
  begins.  ``ROCKETQ_CHAOS_ROUNDS`` sets the number of rounds (default 5; the full run uses 20 or
  more, docs/replication.md "Testing"), ``ROCKETQ_CHAOS_SEED`` the random seed (printed);
* a stalled replica: the slave is SIGSTOPped under load; the master keeps answering, with
  FLUSH_SLAVE_TIMEOUT while the stalled connection is open and SLAVE_NOT_AVAILABLE once it dropped
  it (``haHousekeepingInterval``); after SIGCONT the slave catches up to a byte-identical CommitLog
  and holds every stored message, whatever status its send got.

Run with ``-s`` to see the rounds, kill delays and counts.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, PullStatus, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.testing import (
    ServerProcess,
    broker_store_dir,
    free_port,
    pull_header,
    spawn_broker,
    spawn_namesrv,
    wait_for,
    wait_route,
)
from rocketq.client.testing.chaos import SEND_ERRORS, Ledger, Load, Stored

pytestmark = pytest.mark.slow

TOPIC = "ChaosT"
QUEUES = 4
BROKER = "broker-c"
SEGMENT = 4 << 20  # small CommitLog segments: the rounds cross segment ends
ROUNDS = int(os.environ.get("ROCKETQ_CHAOS_ROUNDS", "5"))
SEED = int(os.environ.get("ROCKETQ_CHAOS_SEED", str(random.randrange(1 << 30))))
KILL_WINDOW_S = 2.0  # the master dies at a random point this long after the load reached it
SENDERS = (False, False, True, True)  # per thread: sends batches?
#: the statuses of a message that is stored on the master ("how far it got", docs/replication.md)
STORED = frozenset({SendStatus.SEND_OK, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE})


WAIT_S = 60.0


def _send_loop(producer: Producer, name: str, batches: bool, ledger: Ledger, stop: threading.Event) -> None:
    rng = random.Random(f"{SEED}-{name}")
    seq = 0
    deadline = time.monotonic() + 300  # a bound even if nobody sets ``stop``
    while not stop.is_set() and time.monotonic() < deadline:
        n = rng.randint(2, 16) if batches else 1
        msgs = [Message(TOPIC, f"{name}:{seq + i}:".encode().ljust(100, b".")) for i in range(n)]
        seq += n
        sent_at = time.monotonic()
        try:
            results = producer.send_batch(msgs) if batches else [producer.send(msgs[0])]
        except SEND_ERRORS:  # not acknowledged: nothing is promised
            ledger.add_failed(n)
            time.sleep(0.05)
            continue
        ledger.record(msgs, results, sent_at, time.monotonic())


def _load(ns_addr: str, label: str, ledger: Ledger) -> Load:
    """``len(SENDERS)`` threads sending through one producer until the load is closed."""
    producer = Producer(ns_addr, producer_group=f"pg-{label}", send_msg_timeout_ms=2000)
    producer.start()
    loops = [
        functools.partial(_send_loop, producer, f"{label}-{i}", batches, ledger)
        for i, batches in enumerate(SENDERS)
    ]
    return Load(producer, loops)


def _conf(role: str, broker_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "brokerName": BROKER,
        "brokerRole": role,
        "brokerId": broker_id,
        "flushDiskType": "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": SEGMENT,
        "maxMessageSize": 1 << 20,
        "mappedFileSizeConsumeQueue": 20 * 100_000,
        "haSendHeartbeatInterval": 1000,
        "haHousekeepingInterval": 3000,
        "syncFlushTimeout": 1000,
        "slaveSyncInterval": 1000,
        # a disk shared with other jobs may pass 75/85 %: retention must not delete what is checked
        "diskMaxUsedSpaceRatio": 99,
        "diskSpaceCleanForciblyRatio": 99,
        "diskSpaceWarningLevelRatio": 99,
        # the checks read whole queues from the slave: big pulls
        "maxTransferCountOnMessageInMemory": 4000,
        "maxTransferBytesOnMessageInMemory": 4 << 20,
        **extra,
    }


@dataclass
class Group:
    """A NameServer, the master's fixed ports (it restarts where everyone saw it) and a slave."""

    tmp: Path
    ns: ServerProcess
    ports: dict[str, int]
    slave: ServerProcess
    admin: Admin
    api: BlockingMQClientAPI

    def start_master(self) -> ServerProcess:
        return spawn_broker(self.tmp, self.ns.addr, **_conf("SYNC_MASTER", 0, **self.ports))

    @property
    def master_addr(self) -> str:
        return f"127.0.0.1:{self.ports['listenPort']}"


@pytest.fixture()
def group(tmp_path: Path) -> Iterator[Group]:
    ports = {"listenPort": free_port(), "haListenPort": free_port()}
    with spawn_namesrv(tmp_path / "ns") as ns:
        conf = _conf("SLAVE", 1, haMasterAddress=f"127.0.0.1:{ports['haListenPort']}")
        with (
            spawn_broker(tmp_path, ns.addr, **conf) as slave,
            Admin(ns.addr) as admin,
            BlockingMQClientAPI(ns.addr) as api,
        ):
            yield Group(tmp_path, ns, ports, slave, admin, api)


def _in_sync(admin: Admin, master_addr: str) -> bool:
    try:
        return admin.ha_status(master_addr).in_sync_slave_nums >= 1
    except RocketQError:
        return False


def _setup_topic(g: Group) -> None:
    admin, api = g.admin, g.api
    admin.create_topic(TOPIC, broker_addr=g.master_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    wait_route(admin, TOPIC, WAIT_S)
    wait_for(lambda: _slave_knows_topic(api, g.slave.addr), "the slave to copy the topic config", WAIT_S)


def _slave_knows_topic(api: BlockingMQClientAPI, addr: str) -> bool:
    try:
        api.pull_message(addr, pull_header(TOPIC, 0, 0, group="chaos-check", max_msg_nums=4000), 3000)
    except RocketQError:
        return False
    return True


def _warnings(proc: ServerProcess, lines: int = 20) -> str:
    return "\n".join([line for line in proc.log_text().splitlines() if " INFO " not in line][-lines:])


def read_all(api: BlockingMQClientAPI, broker: ServerProcess) -> dict[str, Stored]:
    """Every message of every queue of the topic on ``broker``, by UNIQ_KEY."""
    addr = broker.addr
    found: dict[str, Stored] = {}
    for queue_id in range(QUEUES):
        end = api.get_max_offset(addr, TOPIC, queue_id)
        offset = 0
        for _ in range(end + 1):  # each pull moves on by at least one message
            if offset >= end:
                break
            result = api.pull_message(
                addr, pull_header(TOPIC, queue_id, offset, group="chaos-check", max_msg_nums=4000), 10_000
            )
            assert result.status is PullStatus.FOUND, (
                f"queue {queue_id} at {offset} (max {end}): {result}; log:\n{_warnings(broker)}"
            )
            for m in result.messages:
                found[m.msg_id] = Stored(queue_id, m.queue_offset, m.body)
            assert result.next_begin_offset > offset
            offset = result.next_begin_offset
    return found


def assert_on_slave(api: BlockingMQClientAPI, slave: ServerProcess, expected: dict[str, Stored]) -> int:
    """Every ``expected`` message is on the slave, at its queue offset with its body; returns the
    number of messages the slave holds.  Retries for a while: the slave dispatches asynchronously."""
    deadline = time.monotonic() + 30
    while True:
        found = read_all(api, slave)
        missing = {k: v for k, v in expected.items() if found.get(k) != v}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    sample = sorted(missing.items(), key=lambda kv: (kv[1].queue_id, kv[1].queue_offset))[:5]
    assert not missing, (
        f"{len(missing)} of {len(expected)} acknowledged messages are not on the slave (seed {SEED}); "
        f"first ones: {[(k, v, found.get(k)) for k, v in sample]}; log:\n{_warnings(slave)}"
    )
    return len(found)


def _kill_round(g: Group, ledger: Ledger, round_no: int, delay_s: float) -> str:
    """Start the master, wait for the slave, load, SIGKILL after ``delay_s``; returns a summary."""
    t0 = time.monotonic()
    master = g.start_master()
    try:
        wait_for(lambda: _in_sync(g.admin, g.master_addr), f"round {round_no}: the slave in sync", WAIT_S)
        rejoined_s = time.monotonic() - t0
        if round_no == 1:
            _setup_topic(g)
        ok_before, failed_before = ledger.count(SendStatus.SEND_OK), ledger.failed
        load = _load(g.ns.addr, f"r{round_no}", ledger)
        try:
            wait_for(ledger.more_than(SendStatus.SEND_OK, ok_before + 20), "acknowledged sends", WAIT_S)
            time.sleep(delay_s)
            master.kill9()
        finally:
            load.close()
    finally:
        master.kill9()
    return (
        f"master up and the slave in sync after {rejoined_s:.1f} s; SIGKILL {delay_s:.2f} s into the "
        f"load; SEND_OK {ledger.count(SendStatus.SEND_OK) - ok_before}, failed sends "
        f"{ledger.failed - failed_before}"
    )


def test_master_sigkill_rounds_lose_no_acknowledged_message(group: Group) -> None:
    rng = random.Random(SEED)
    ledger = Ledger()
    print(f"\nchaos: {ROUNDS} rounds of SIGKILL of the SYNC_MASTER, seed {SEED}")
    for round_no in range(1, ROUNDS + 1):
        summary = _kill_round(group, ledger, round_no, rng.uniform(0, KILL_WINDOW_S))
        acked = ledger.stored(frozenset({SendStatus.SEND_OK}))
        on_slave = assert_on_slave(group.api, group.slave, acked)
        print(
            f"round {round_no:2}: {summary}; all {len(acked)} SEND_OK so far are on the slave "
            f"(it holds {on_slave}): 0 lost"
        )
    # the group works again after the last kill: the master rejoins and the slave follows
    with group.start_master():
        wait_for(
            lambda: _in_sync(group.admin, group.master_addr), "the slave in sync after the last round", WAIT_S
        )


def _commit_log(tmp: Path, broker_id: int) -> Path:
    return broker_store_dir(tmp, BROKER, broker_id) / "commitlog"


def _assert_identical_commit_logs(tmp: Path, upto: int) -> None:
    mdir, sdir = _commit_log(tmp, 0), _commit_log(tmp, 1)
    names = sorted(p.name for p in mdir.iterdir())
    assert sorted(p.name for p in sdir.iterdir()) == names
    for name in names:
        base = int(name)
        n = max(0, min(upto - base, SEGMENT))
        mbytes, sbytes = (mdir / name).read_bytes()[:n], (sdir / name).read_bytes()[:n]
        assert mbytes == sbytes, f"segment {name} differs below the master's max offset {upto}"


def test_stalled_slave_under_load(group: Group) -> None:
    ledger = Ledger()
    admin, api = group.admin, group.api
    with group.start_master():
        wait_for(lambda: _in_sync(admin, group.master_addr), "the slave in sync", WAIT_S)
        _setup_topic(group)
        load = _load(group.ns.addr, "stall", ledger)
        try:
            wait_for(lambda: ledger.count(SendStatus.SEND_OK) > 50, "acknowledged sends", WAIT_S)
            group.slave.popen.send_signal(signal.SIGSTOP)
            try:
                before = dict(ledger.status_counts())
                wait_for(
                    lambda: ledger.count(SendStatus.FLUSH_SLAVE_TIMEOUT) > 0, "FLUSH_SLAVE_TIMEOUT", WAIT_S
                )
                wait_for(
                    lambda: not admin.ha_status(group.master_addr).connections,
                    "the master drops the slave",
                    WAIT_S,
                )
                wait_for(
                    lambda: ledger.count(SendStatus.SLAVE_NOT_AVAILABLE) > 0, "SLAVE_NOT_AVAILABLE", WAIT_S
                )
                during = ledger.status_counts() - Counter(before)
            finally:
                group.slave.popen.send_signal(signal.SIGCONT)
            print(f"\nstall: while the slave was stopped the master answered {dict(during)}")
            wait_for(
                lambda: _in_sync(admin, group.master_addr), "the slave back in sync after SIGCONT", WAIT_S
            )
            ok_after = ledger.count(SendStatus.SEND_OK)
            wait_for(
                lambda: ledger.count(SendStatus.SEND_OK) > ok_after + 20,
                "SEND_OK again after SIGCONT",
                WAIT_S,
            )
        finally:
            load.close()
        assert set(during) <= {s.value for s in STORED}, during
        target = admin.ha_status(group.master_addr).master_commit_log_max_offset

        def caught_up() -> bool:
            status = admin.ha_status(group.slave.addr)
            return status.client is not None and status.client.max_offset == target

        wait_for(caught_up, f"the slave at the master's max offset {target}", WAIT_S)
        _assert_identical_commit_logs(group.tmp, target)
        stored = ledger.stored(STORED)
        on_slave = assert_on_slave(api, group.slave, stored)
        print(
            f"stall: the slave caught up to {target}; it holds all {len(stored)} stored messages ({on_slave})"
        )
