"""DLedger mode (``enableDLegerCommitLog=true``) with real processes and real signals.

A NameServer and the three brokers of ``examples/conf/dledger/`` (broker-n0..n2.conf) are started
as ``mqnamesrv`` / ``mqbroker`` processes from copies of the shipped files in which only the fixed
ports (``listenPort``, the ``dLegerPeers`` Raft ports) and the store paths are rewritten, plus the
small store files and short HA timeouts every failover test here uses.  Each member keeps its
ports across restarts.  The members' view is read from GET_BROKER_HA_STATUS (``master``,
``masterEpoch``, ``dLegerMaster``, ``fenced``...), the route from the NameServer.

The scenarios: a store of Java's DLedger (``dledger-n0/data``) stops the start with an error that
names it; the group forms (sends refused with "no leader yet" while one member alone is up,
then a master registered as brokerId 0 and the slaves as index + 1, and no acknowledgement
without a majority); a SIGKILL of the master under a per-key ordered producer with retries and a
push consumer (0 acknowledged messages lost, per-key order kept, the killed member rejoins as a
slave); a SIGSTOPped master, which answers no send with SEND_OK after it wakes, is replaced, and
truncates its unacknowledged tail to follow the new master; ``preferredLeaderId=n2``, which
becomes master once it holds the log and again after its restart; and the chaos test,
``ROCKETQ_DLEDGER_CHAOS_ROUNDS`` rounds (3 by default, docs/dledger.md gives the full run) of
SIGKILL or SIGSTOP of the current master, printing the failover times (p50, max).
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketq.client.errors import RocketQError
from rocketq.client.launcher import ServerProcess, free_port, spawn_broker, spawn_namesrv
from rocketq.client.model import Message, MessageExt, PullStatus, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.lenient_json import loads
from rocketq.client.testing import FAST_FAILOVER_BROKER_CONF, pull_header, send_header, wait_for
from rocketq.client.testing.chaos import SEND_ERRORS, Acked, Ledger, Load, broker_port
from rocketq.server.properties import parse_properties

pytestmark = [pytest.mark.slow, pytest.mark.serial]

CONF = Path(__file__).resolve().parents[1] / "examples" / "conf" / "dledger"
GROUP = "RaftNode00"
TOPIC = "DLedgerT"
QUEUES = 4
KEYS = tuple(f"key-{i}" for i in range(4))
WAIT_S = 90.0
ROUNDS = int(os.environ.get("ROCKETQ_DLEDGER_CHAOS_ROUNDS", "3"))
SEED = int(os.environ.get("ROCKETQ_DLEDGER_CHAOS_SEED", str(random.randrange(1 << 30))))
#: never a timing promise: a bound far above the targets (p50 <= 5 s, max <= 15 s, docs/dledger.md)
FAILOVER_BOUND_S = 30.0
FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
#: the test settings added to the shipped files: small store files, short HA timeouts, a disk
#: threshold a shared CI disk never trips (the DLedger keys and ports are the files' own)
TEST_CONF = {
    k: v
    for k, v in FAST_FAILOVER_BROKER_CONF.items()
    if k not in ("enableControllerMode", "allAckInSyncStateSet", "controllerHeartBeatTimeoutMills")
    and not k.startswith(("syncBrokerMetadata", "checkSyncStateSet"))
}


class DLedgerGroup:
    """The NameServer and the three members of the example files (slots 0..2 = n0..n2)."""

    def __init__(self, tmp: Path, **extra: object) -> None:
        self.tmp = tmp
        self._ports: dict[int, int] = {}
        self.props = [{**self._localized(CONF / f"broker-n{i}.conf", i), **extra} for i in range(3)]
        self.members: list[ServerProcess | None] = [None, None, None]
        self.namesrv = spawn_namesrv(tmp / "ns")
        self.api = BlockingMQClientAPI(self.namesrv.addr, config=FAST)

    def _port(self, match: re.Match[str]) -> str:
        fixed = int(match[0])
        if fixed not in self._ports:
            self._ports[fixed] = free_port()
        return str(self._ports[fixed])

    def _localized(self, path: Path, slot: int) -> dict[str, Any]:
        props: dict[str, Any] = parse_properties(path.read_text(encoding="utf-8"))
        for key in ("listenPort", "dLegerPeers"):
            props[key] = re.sub(r"(?<=:)\d+|^\d+$", self._port, props[key])
        props["storePathRootDir"] = str(self.tmp / f"node{slot}")
        del props["namesrvAddr"]  # the test's NameServer
        return {**props, **TEST_CONF}

    def start(self, *slots: int) -> None:
        for slot in slots or range(3):
            self.members[slot] = spawn_broker(self.tmp / f"b{slot}", self.namesrv.addr, **self.props[slot])

    def addr(self, slot: int) -> str:
        return f"127.0.0.1:{self.props[slot]['listenPort']}"

    def port(self, slot: int) -> int:
        return int(self.props[slot]["listenPort"])

    def slot_of(self, addr: str) -> int:
        return [self.addr(s) for s in range(3)].index(addr)

    def member(self, slot: int) -> ServerProcess:
        proc = self.members[slot]
        assert proc is not None
        return proc

    def status(self, slot: int) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS of one member; {} when it does not answer."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
        try:
            response = self.api.run(self.api.api.invoke(self.addr(slot), cmd, 2000), 5)
        except (RocketQError, TimeoutError):
            return {}
        obj = loads(response.body) if response.code == ResponseCode.SUCCESS else {}
        return obj if isinstance(obj, dict) else {}

    def route(self) -> dict[int, str]:
        try:
            bd = self.api.get_broker_cluster_info().broker_addr_table.get(GROUP)
        except (RocketQError, TimeoutError):
            return {}
        return dict(bd.broker_addrs) if bd is not None else {}

    def master(self) -> tuple[int, dict[str, Any]] | None:
        """The member the NameServer lists as brokerId 0, when it says it is an unfenced master."""
        addr = self.route().get(0)
        if addr is None:
            return None
        slot = self.slot_of(addr)
        st = self.status(slot)
        return (slot, st) if st.get("master") and not st.get("fenced") else None

    def following(self, master_slot: int, epoch: int) -> list[int]:
        """The other members that follow ``master_slot`` under ``epoch``."""
        out = []
        for slot in range(3):
            if slot == master_slot:
                continue
            st = self.status(slot)
            if (
                st
                and not st.get("master")
                and st.get("masterEpoch") == epoch
                and st.get("haClientRuntimeInfo")
            ):
                out.append(slot)
        return out

    def wait_master(
        self, what: str, ok: Callable[[int, dict[str, Any]], bool] = lambda s, st: True
    ) -> tuple[int, dict[str, Any]]:
        found: list[tuple[int, dict[str, Any]]] = []

        def ready() -> bool:
            m = self.master()
            if m is not None and ok(*m):
                found.append(m)
            return bool(found)

        wait_for(ready, what, WAIT_S)
        return found[-1]

    def wait_whole_group(self) -> tuple[int, dict[str, Any]]:
        """A master that both other members follow."""
        return self.wait_master(
            "a master followed by both other members",
            lambda slot, st: len(self.following(slot, st["masterEpoch"])) == 2,
        )

    def knows_topic(self, slot: int) -> bool:
        try:
            self.api.pull_message(
                self.addr(slot), pull_header(TOPIC, 0, 0, group="knows-topic", max_msg_nums=1), 3000
            )
        except (RocketQError, TimeoutError):
            return False
        return True

    def create_topic(self, master_slot: int) -> None:
        with Admin(self.namesrv.addr) as admin:
            admin.create_topic(
                TOPIC, broker_addr=self.addr(master_slot), read_queue_nums=QUEUES, write_queue_nums=QUEUES
            )
        for slot in range(3):
            wait_for(functools.partial(self.knows_topic, slot), f"member {slot} to know {TOPIC}", WAIT_S)

    def raw_send(self, slot: int, body: bytes, timeout_ms: int = 10_000) -> RemotingCommand | None:
        """A SEND_MESSAGE_V2 addressed to one member (no route, no retry); None without an answer."""
        header = send_header(TOPIC, default_topic_queue_nums=QUEUES, producer_group="dledger-raw")
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)
        try:
            return self.api.run(self.api.api.invoke(self.addr(slot), cmd, timeout_ms), timeout_ms / 1000 + 5)
        except (RocketQError, TimeoutError):
            return None

    def signal(self, slot: int, sig: signal.Signals) -> None:
        os.killpg(self.member(slot).pid, sig)

    def read_queues(self, slot: int) -> dict[tuple[int, int], MessageExt]:
        """Every message of the topic on one member, by (queue id, queue offset)."""
        stored: dict[tuple[int, int], MessageExt] = {}
        for queue_id in range(QUEUES):
            end = self.api.get_max_offset(self.addr(slot), TOPIC, queue_id)
            offset = 0
            for _ in range(end + 1):
                if offset >= end:
                    break
                header = pull_header(TOPIC, queue_id, offset, group="dledger-check", max_msg_nums=4000)
                result = self.api.pull_message(self.addr(slot), header, 10_000)
                assert result.status is PullStatus.FOUND, (slot, queue_id, offset, end, result.status)
                for m in result.messages:
                    stored[(queue_id, m.queue_offset)] = m
                offset = result.next_begin_offset
        return stored

    def close(self) -> str:
        tails = []
        for slot, proc in enumerate(self.members):
            if proc is None:
                continue
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
            proc.kill9()
            tails.append(f"--- member n{slot} ---\n{proc.log_tail(40)}")
        self.api.close()
        self.namesrv.kill9()
        return "\n".join(tails)


@pytest.fixture()
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    g = DLedgerGroup(tmp_path)
    try:
        yield g
    finally:
        print(g.close())


# -- load and checks -----------------------------------------------------------------------------


def send_key(producer: Producer, key: str, ledger: Ledger, stop: threading.Event) -> None:
    """Send ``key``'s messages in order until ``stop``; the sequence number moves on only at SEND_OK."""
    selector = SelectMessageQueueByHash()
    seq = attempt = 0
    deadline = time.monotonic() + 1800
    while not stop.is_set() and time.monotonic() < deadline:
        attempt += 1
        body = f"{key}:{seq}:{attempt}:".encode().ljust(100, b".")
        sent_at = time.monotonic()
        try:
            result = producer.send(Message(TOPIC, body, keys=[key]), selector=selector, arg=key)
        except SEND_ERRORS:
            ledger.add_failed()
            time.sleep(0.05)
            continue
        if result.send_status is not SendStatus.SEND_OK:
            ledger.add_failed()
            continue
        mq = result.message_queue
        ledger.add(
            Acked(result.msg_id, result.send_status, mq.queue_id, result.queue_offset, body,
                  broker_port(result.offset_msg_id), sent_at, time.monotonic(), key, seq)
        )  # fmt: skip
        seq += 1


def start_load(g: DLedgerGroup, ledger: Ledger) -> Load:
    producer = Producer(g.namesrv.addr, producer_group="pg-dledger", send_msg_timeout_ms=3000)
    producer.start()
    return Load(producer, [functools.partial(send_key, producer, k, ledger) for k in KEYS])


class Reader:
    """A push consumer of the topic, collecting the UNIQ_KEYs it read."""

    def __init__(self, namesrv_addr: str) -> None:
        self._consumed: set[str] = set()
        self._lock = threading.Lock()
        self.consumer = PushConsumer(
            namesrv_addr, consumer_group="cg-dledger", client=FAST, rebalance_interval_ms=1000,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        self.consumer.subscribe(TOPIC, "*")
        self.consumer.register_message_listener(self._on_messages)
        self.consumer.start()

    def _on_messages(self, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self._lock:
            self._consumed.update(m.msg_id for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def missing(self, wanted: set[str], quiet_s: float = 20.0) -> set[str]:
        """The ``wanted`` ids not read once all are read or nothing new came for ``quiet_s``."""
        with self._lock:
            seen = set(self._consumed)
        last_change, deadline = time.monotonic(), time.monotonic() + 180
        while not wanted <= seen and time.monotonic() - last_change < quiet_s and time.monotonic() < deadline:
            time.sleep(0.5)
            with self._lock:
                now = set(self._consumed)
            if len(now) != len(seen):
                seen, last_change = now, time.monotonic()
        return wanted - seen

    def close(self) -> None:
        self.consumer.shutdown()


def check_stored(g: DLedgerGroup, ledger: Ledger, slot: int) -> str:
    """0 acknowledged messages lost on member ``slot``, none replaced, per-key order kept."""
    acked = ledger.acked()
    places: dict[tuple[int, int], Acked] = {}
    for a in acked:
        other = places.setdefault((a.queue_id, a.queue_offset), a)
        assert other is a, f"two acknowledged sends name {a.queue_id}/{a.queue_offset}: {other}, {a}"
    stored = g.read_queues(slot)
    wrong = [
        (place, a.body[:20], None if m is None else m.body[:20])
        for place, a in places.items()
        if (m := stored.get(place)) is None or m.msg_id != a.msg_id or m.body != a.body
    ]
    assert not wrong, f"{len(wrong)} of {len(acked)} acknowledged messages lost or replaced: {wrong[:5]}"
    for key in KEYS:
        mine = sorted((a for a in acked if a.key == key), key=lambda a: (a.queue_id, a.queue_offset))
        assert len({a.queue_id for a in mine}) <= 1, f"{key} went to several queues"
        seqs = [a.seq for a in mine]
        assert seqs == sorted(set(seqs)), f"{key}: out of order along the queue: {seqs[:40]}"
    return f"{len(acked)} acknowledged, {len(stored)} stored on n{slot}: 0 lost, per-key order kept"


def rejoined(g: DLedgerGroup, slot: int, epoch: int) -> Callable[[], bool]:
    def check() -> bool:
        st = g.status(slot)
        return (
            bool(st)
            and not st.get("master")
            and st.get("masterEpoch", 0) >= epoch
            and bool(st.get("haClientRuntimeInfo"))
        )

    return check


# -- tests ---------------------------------------------------------------------------------------


def test_the_group_forms_and_acknowledges_only_with_a_majority(group: DLedgerGroup) -> None:
    g = group
    g.start(0)
    answer = g.raw_send(0, b"alone")
    assert answer is not None and answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, answer
    assert "no leader yet" in (answer.remark or ""), answer.remark
    g.start(1, 2)
    master, st = g.wait_whole_group()
    route = g.route()
    slaves = {slot + 1: g.addr(slot) for slot in range(3) if slot != master}  # n<i> is brokerId i + 1
    assert route == {0: g.addr(master), **slaves}, route
    assert st["dLegerMaster"] == f"n{master}" and st["masterEpoch"] >= 1
    g.create_topic(master)
    with Producer(
        g.namesrv.addr, producer_group="pg-form", send_msg_timeout_ms=5000, client=FAST
    ) as producer:
        assert producer.send(Message(TOPIC, b"first")).send_status is SendStatus.SEND_OK
    others = [s for s in range(3) if s != master]
    for slot in others:  # one slave stopped: 2 of 3 still acknowledge
        g.signal(slot, signal.SIGSTOP)
        answer = g.raw_send(master, b"two of three")
        assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        g.signal(slot, signal.SIGCONT)
        wait_for(lambda: len(g.following(master, st["masterEpoch"])) == 2, "both slaves back", WAIT_S)
    for slot in others:
        g.signal(slot, signal.SIGSTOP)
    try:
        answer = g.raw_send(master, b"one of three")
        assert answer is None or answer.code != ResponseCode.SUCCESS, "acknowledged without a majority"
    finally:
        for slot in others:
            g.signal(slot, signal.SIGCONT)
    g.wait_whole_group()


def test_a_store_of_javas_dledger_stops_the_start(group: DLedgerGroup, tmp_path: Path) -> None:
    g = group
    root = Path(g.props[0]["storePathRootDir"])
    (root / "dledger-n0" / "data").mkdir(parents=True)
    conf = tmp_path / "java-store.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in g.props[0].items()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "rocketq.broker", "-c", str(conf), "-n", g.namesrv.addr],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done
    assert "written by Java's DLedger" in done.stderr and str(root / "dledger-n0") in done.stderr, done.stderr


def test_master_sigkill_under_ordered_load_loses_nothing(group: DLedgerGroup) -> None:
    g = group
    g.start()
    old, old_st = g.wait_whole_group()
    g.create_topic(old)
    ledger = Ledger()
    reader = Reader(g.namesrv.addr)
    load = start_load(g, ledger)
    try:
        wait_for(ledger.more_than(SendStatus.SEND_OK, 40), "acknowledged sends before the kill", WAIT_S)
        killed_at = time.monotonic()
        g.member(old).kill9()
        wait_for(
            lambda: ledger.first_ack_after(killed_at, g.port(old)) is not None, "a SEND_OK after", WAIT_S
        )
        first = ledger.first_ack_after(killed_at, g.port(old))
        assert first is not None
        new, new_st = g.wait_master("the new master", lambda s, st: s != old)
        assert new_st["masterEpoch"] > old_st["masterEpoch"]
        print(f"SIGKILL of n{old}: new master n{new}, first SEND_OK after {first.acked_at - killed_at:.2f} s")
        g.start(old)
        wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
        count = ledger.count()
        wait_for(ledger.more_than(SendStatus.SEND_OK, count + 20), "sends after the rejoin", WAIT_S)
    finally:
        load.close()
    print(check_stored(g, ledger, new))
    missing = reader.missing({a.msg_id for a in ledger.acked()})
    reader.close()
    assert not missing, f"the consumer did not read {len(missing)} acknowledged messages"


def test_a_stopped_master_acknowledges_nothing_and_truncates_on_return(group: DLedgerGroup) -> None:
    g = group
    g.start()
    old, old_st = g.wait_whole_group()
    g.create_topic(old)
    others = [s for s in range(3) if s != old]
    with Producer(
        g.namesrv.addr, producer_group="pg-stop", send_msg_timeout_ms=5000, client=FAST
    ) as producer:
        assert producer.send(Message(TOPIC, b"before")).send_status is SendStatus.SEND_OK
        # a tail only the master holds: stored, never acknowledged (the slaves are gone; a
        # stopped slave would still find it in its socket when it wakes)
        for slot in others:
            g.member(slot).kill9()
        unacked = g.raw_send(old, b"unacked")
        assert unacked is not None and unacked.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, unacked
        g.signal(old, signal.SIGSTOP)
        stopped_at = time.monotonic()
        g.start(*others)
        # a send that reaches the stopped master waits in its socket and is read when it wakes
        late: list[RemotingCommand | None] = []
        sender = threading.Thread(target=lambda: late.append(g.raw_send(old, b"stale", 60_000)), daemon=True)
        sender.start()
        new, new_st = g.wait_master("a master other than the stopped one", lambda s, st: s != old)
        print(f"SIGSTOP of n{old}: n{new} master after {time.monotonic() - stopped_at:.2f} s")
        assert new_st["masterEpoch"] > old_st["masterEpoch"]
        after = producer.send(Message(TOPIC, b"after"))
        assert after.send_status is SendStatus.SEND_OK and broker_port(after.offset_msg_id) == g.port(new)
        g.signal(old, signal.SIGCONT)
        sender.join(90)
        assert late and (late[0] is None or late[0].code != ResponseCode.SUCCESS), late
        again = g.raw_send(old, b"stale again")
        assert again is None or again.code != ResponseCode.SUCCESS, again
        wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
        last = producer.send(Message(TOPIC, b"last"))
        assert last.send_status is SendStatus.SEND_OK

    def holds_the_new_log() -> bool:
        bodies = {m.body for m in g.read_queues(old).values()}
        return {b"before", b"after", b"last"} <= bodies

    wait_for(holds_the_new_log, f"n{old} to hold the new master's messages", WAIT_S)
    bodies = [m.body for m in g.read_queues(old).values()]
    assert not {b"unacked", b"stale", b"stale again"} & set(bodies), "the unacknowledged tail survived"
    assert sorted(bodies) == sorted(m.body for m in g.read_queues(new).values())
    assert "truncating the CommitLog" in g.member(old).log_text(), "the old master truncated nothing"


def test_the_preferred_leader_takes_over_once_it_holds_the_log(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path, preferredLeaderId="n2")
    try:
        g.start()
        g.wait_master("n2, the preferred leader, as master", lambda slot, st: slot == 2)
        g.create_topic(2)
        with Producer(
            g.namesrv.addr, producer_group="pg-preferred", send_msg_timeout_ms=5000, client=FAST
        ) as producer:
            assert producer.send(Message(TOPIC, b"one")).send_status is SendStatus.SEND_OK
            g.member(2).kill9()
            other, st = g.wait_master("another master", lambda slot, st: slot != 2)
            for body in (b"two", b"three"):
                assert producer.send(Message(TOPIC, body)).send_status is SendStatus.SEND_OK
            g.start(2)  # it catches up as a slave, then the master hands over
            g.wait_master(
                "n2 as master again", lambda slot, s: slot == 2 and s["masterEpoch"] > st["masterEpoch"]
            )
            assert producer.send(Message(TOPIC, b"four")).send_status is SendStatus.SEND_OK
        bodies = sorted(m.body for m in g.read_queues(2).values())
        assert bodies == sorted([b"one", b"two", b"three", b"four"]), bodies
        assert "handing the mastership over to the preferred n2" in g.member(other).log_text()
    finally:
        print(g.close())


def chaos_round(g: DLedgerGroup, ledger: Ledger, rng: random.Random, round_no: int) -> float:
    """Kill the current master (round 1 SIGKILL, round 2 SIGSTOP, then either), bring it back and
    wait until it follows the new master; returns the failover time (kill -> first SEND_OK of a
    send begun after it, through another member)."""
    old, old_st = g.wait_whole_group()
    count = ledger.count()
    wait_for(ledger.more_than(SendStatus.SEND_OK, count + 10), "sends before the kill", WAIT_S)
    sig = "SIGKILL" if round_no == 1 else "SIGSTOP" if round_no == 2 else rng.choice(["SIGKILL", "SIGSTOP"])
    time.sleep(rng.uniform(0.2, 2.0))
    killed_at = time.monotonic()
    if sig == "SIGKILL":
        g.member(old).kill9()
    else:
        g.signal(old, signal.SIGSTOP)
    wait_for(
        lambda: ledger.first_ack_after(killed_at, g.port(old)) is not None,
        f"round {round_no}: a SEND_OK through a new master",
        WAIT_S,
    )
    first = ledger.first_ack_after(killed_at, g.port(old))
    assert first is not None
    took = first.acked_at - killed_at
    new, new_st = g.wait_master("the new master", lambda s, st: s != old)
    print(f"round {round_no}: {sig} of n{old} (epoch {old_st['masterEpoch']}), new master n{new} "
          f"(epoch {new_st['masterEpoch']}), first SEND_OK after {took:.2f} s")  # fmt: skip
    if sig == "SIGKILL":
        g.start(old)
    else:
        g.signal(old, signal.SIGCONT)
    wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
    return took


def test_dledger_chaos(group: DLedgerGroup) -> None:
    g = group
    rng = random.Random(SEED)
    print(f"seed {SEED}, {ROUNDS} rounds")
    g.start()
    master, _ = g.wait_whole_group()
    g.create_topic(master)
    ledger = Ledger()
    reader = Reader(g.namesrv.addr)
    load = start_load(g, ledger)
    try:
        times = [chaos_round(g, ledger, rng, n) for n in range(1, ROUNDS + 1)]
    finally:
        load.close()
    master, _ = g.wait_master("a master for the final read")
    print(check_stored(g, ledger, master))
    print(f"failover p50 {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} rounds")
    missing = reader.missing({a.msg_id for a in ledger.acked()})
    reader.close()
    assert not missing, f"the consumer did not read {len(missing)} acknowledged messages"
    assert max(times) <= FAILOVER_BOUND_S, times
