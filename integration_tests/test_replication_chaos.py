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

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.errors import NoRouteError, RocketQError
from rocketq.client.model import Message, PullStatus, SendResult, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.vocabulary import ExpressionType, PullSysFlag
from rocketq.client.testing import ServerProcess, free_port, spawn_broker, spawn_namesrv

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


@dataclass(frozen=True)
class Stored:
    """Where a send's answer says a message is, and what it holds."""

    queue_id: int
    queue_offset: int
    body: bytes


class Ledger:
    """What the senders were told, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_status: dict[SendStatus, dict[str, Stored]] = {s: {} for s in SendStatus}
        self.statuses: Counter[str] = Counter()
        self.failed = 0  # sends that raised: the broker died or did not answer in time

    def record(self, msgs: list[Message], results: list[SendResult]) -> None:
        """A batch's results come one per request, each naming its messages' UNIQ_KEYs in order."""
        it = iter(msgs)
        with self.lock:
            for result in results:
                for i, uniq in enumerate(result.msg_id.split(",")):
                    msg = next(it)
                    where = Stored(result.message_queue.queue_id, result.queue_offset + i, msg.body)
                    self.by_status[result.send_status][uniq] = where
                    self.statuses[result.send_status.value] += 1

    def stored(self, statuses: frozenset[SendStatus]) -> dict[str, Stored]:
        with self.lock:
            return {k: v for s in statuses for k, v in self.by_status[s].items()}

    def count(self, status: SendStatus) -> int:
        with self.lock:
            return len(self.by_status[status])

    def more_than(self, status: SendStatus, n: int) -> Callable[[], bool]:
        """A predicate for :func:`_wait`: more than ``n`` answers with ``status``."""
        return lambda: self.count(status) > n


def _send_loop(producer: Producer, name: str, batches: bool, stop: threading.Event, ledger: Ledger) -> None:
    rng = random.Random(f"{SEED}-{name}")
    seq = 0
    deadline = time.monotonic() + 300  # a bound even if nobody sets ``stop``
    while not stop.is_set() and time.monotonic() < deadline:
        n = rng.randint(2, 16) if batches else 1
        msgs = [Message(TOPIC, f"{name}:{seq + i}:".encode().ljust(100, b".")) for i in range(n)]
        seq += n
        try:
            results = producer.send_batch(msgs) if batches else [producer.send(msgs[0])]
        except (RocketQError, TimeoutError, OSError):  # not acknowledged: nothing is promised
            with ledger.lock:
                ledger.failed += n
            time.sleep(0.05)
            continue
        ledger.record(msgs, results)


class Load:
    """``len(SENDERS)`` threads sending through one producer until :meth:`stop`."""

    def __init__(self, ns_addr: str, label: str, ledger: Ledger) -> None:
        self.ledger = ledger
        self.producer = Producer(ns_addr, producer_group=f"pg-{label}", send_msg_timeout_ms=2000)
        self.producer.start()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=_send_loop, args=(self.producer, f"{label}-{i}", b, self._stop, ledger), daemon=True
            )
            for i, b in enumerate(SENDERS)
        ]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        assert not any(t.is_alive() for t in self._threads), "a sender hangs"
        self.producer.shutdown()


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.05)


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


def _has_route(admin: Admin) -> bool:
    try:
        return bool(admin.topic_route(TOPIC).queue_datas)
    except NoRouteError:  # the NameServer has not heard of it yet
        return False


def _setup_topic(g: Group) -> None:
    admin, api = g.admin, g.api
    admin.create_topic(TOPIC, broker_addr=g.master_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    _wait(lambda: _has_route(admin), "the topic's route")
    _wait(lambda: _slave_knows_topic(api, g.slave.addr), "the slave to copy the topic config")


def _pull_header(queue_id: int, offset: int) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group="chaos-check",
        topic=TOPIC,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=4000,
        sys_flag=int(PullSysFlag.SUBSCRIPTION),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
        expression_type=ExpressionType.TAG,
    )


def _slave_knows_topic(api: BlockingMQClientAPI, addr: str) -> bool:
    try:
        api.pull_message(addr, _pull_header(0, 0), 3000)
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
            result = api.pull_message(addr, _pull_header(queue_id, offset), 10_000)
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
        _wait(lambda: _in_sync(g.admin, g.master_addr), f"round {round_no}: the slave in sync")
        rejoined_s = time.monotonic() - t0
        if round_no == 1:
            _setup_topic(g)
        ok_before, failed_before = ledger.count(SendStatus.SEND_OK), ledger.failed
        load = Load(g.ns.addr, f"r{round_no}", ledger)
        try:
            _wait(ledger.more_than(SendStatus.SEND_OK, ok_before + 20), "acknowledged sends")
            time.sleep(delay_s)
            master.kill9()
        finally:
            load.stop()
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
        _wait(lambda: _in_sync(group.admin, group.master_addr), "the slave in sync after the last round")


def _commit_log(tmp: Path, broker_id: int) -> Path:
    return tmp / f"store-{BROKER}-{broker_id}" / "commitlog"


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
        _wait(lambda: _in_sync(admin, group.master_addr), "the slave in sync")
        _setup_topic(group)
        load = Load(group.ns.addr, "stall", ledger)
        try:
            _wait(lambda: ledger.count(SendStatus.SEND_OK) > 50, "acknowledged sends")
            group.slave.popen.send_signal(signal.SIGSTOP)
            try:
                before = dict(ledger.statuses)
                _wait(lambda: ledger.count(SendStatus.FLUSH_SLAVE_TIMEOUT) > 0, "FLUSH_SLAVE_TIMEOUT")
                _wait(
                    lambda: not admin.ha_status(group.master_addr).connections, "the master drops the slave"
                )
                _wait(lambda: ledger.count(SendStatus.SLAVE_NOT_AVAILABLE) > 0, "SLAVE_NOT_AVAILABLE")
                during = ledger.statuses - Counter(before)
            finally:
                group.slave.popen.send_signal(signal.SIGCONT)
            print(f"\nstall: while the slave was stopped the master answered {dict(during)}")
            _wait(lambda: _in_sync(admin, group.master_addr), "the slave back in sync after SIGCONT")
            ok_after = ledger.count(SendStatus.SEND_OK)
            _wait(lambda: ledger.count(SendStatus.SEND_OK) > ok_after + 20, "SEND_OK again after SIGCONT")
        finally:
            load.stop()
        assert set(during) <= {s.value for s in STORED}, during
        target = admin.ha_status(group.master_addr).master_commit_log_max_offset

        def caught_up() -> bool:
            status = admin.ha_status(group.slave.addr)
            return status.client is not None and status.client.max_offset == target

        _wait(caught_up, f"the slave at the master's max offset {target}")
        _assert_identical_commit_logs(group.tmp, target)
        stored = ledger.stored(STORED)
        on_slave = assert_on_slave(api, group.slave, stored)
        print(
            f"stall: the slave caught up to {target}; it holds all {len(stored)} stored messages ({on_slave})"
        )
