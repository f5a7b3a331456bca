"""Orderly (FIFO) POP with real mqnamesrv/mqbroker processes and ``SimpleConsumer(fifo=True)``.

A FIFO consumer processes a batch in order and, once a message of a message group fails (not
acked, or its invisible time changed), skips the rest of that group in the batch: the broker
delivers them again after the failed one.  The tests check every group is processed in send order
with nothing missing (three consumers, 50 groups, random failures), that under
``popOrderBlockScope=group`` a group that keeps failing does not hold back the other groups of its
queue while under the default ``queue`` scope it does, and that a broker SIGKILL during FIFO
traffic loses nothing and keeps each group's order.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.consumer import SimpleConsumer
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting import lenient_json
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop import ConsumeInitMode, NotificationRequestHeader, PollingInfoRequestHeader
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import dlq_topic
from rocketq.client.testing import ServerProcess, create_topic, pull_queue, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import WaitTimeout, wait_value
from rocketq.client.transport.blocking import BlockingRemotingClient

INVISIBLE_S = 2.0


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def _consumer(ns: ServerProcess, group: str, topic: str, await_duration_s: float = 1.0) -> SimpleConsumer:
    """A started FIFO SimpleConsumer (shut it down)."""
    consumer = SimpleConsumer(
        ns.addr,
        group,
        {topic: "*"},
        await_duration_s=await_duration_s,
        init_mode=ConsumeInitMode.MIN,
        fifo=True,
    )
    consumer.start()
    return consumer


def _send_groups(ns: ServerProcess, topic: str, groups: list[str], per_group: int) -> None:
    """``per_group`` messages of each group, interleaved; body ``group:seq``."""
    with Producer(ns.addr, producer_group=f"pg-{topic}") as producer:
        for seq in range(per_group):
            for g in groups:
                producer.send(Message(topic, f"{g}:{seq}".encode(), message_group=g))


def _parse(msg: MessageExt) -> tuple[str, int]:
    group, _, seq = msg.body.decode().partition(":")
    assert msg.properties.get(MessageConst.SHARDING_KEY) == group
    return group, int(seq)


@dataclass
class Ledger:
    """What the consumers processed (acked), per message group, in processing order."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: held across an ack and its record, so that another consumer cannot record the group's next
    #: message (delivered once the broker had the ack) before this one is recorded
    acking: threading.Lock = field(default_factory=threading.Lock)
    processed: dict[str, list[int]] = field(default_factory=dict)
    done_at: dict[str, float] = field(default_factory=dict)
    out_of_order: list[str] = field(default_factory=list)
    redelivered_acked: int = 0

    def record(self, group: str, seq: int, per_group: int, t0: float) -> None:
        with self.lock:
            seen = self.processed.setdefault(group, [])
            if seq in seen:
                self.redelivered_acked += 1
                return
            if seq != len(seen):  # every earlier message of the group must be processed first
                self.out_of_order.append(f"{group}: {seq} after {seen[-5:]}")
            seen.append(seq)
            if len(seen) == per_group:
                self.done_at[group] = time.monotonic() - t0

    def ack(self, consumer: SimpleConsumer, msg: MessageExt, per_group: int, t0: float) -> None:
        """Ack ``msg`` and record it as processed (raises what the ack raises, recording nothing)."""
        group, seq = _parse(msg)
        with self.acking:
            consumer.ack(msg)
            self.record(group, seq, per_group, t0)

    def complete(self, groups: list[str], per_group: int) -> bool:
        with self.lock:
            return all(len(self.processed.get(g, [])) == per_group for g in groups)


def _consume(
    consumer: SimpleConsumer,
    ledger: Ledger,
    per_group: int,
    fails: Callable[[str, int], str | None],
    stop: threading.Event,
    t0: float,
) -> None:
    """One FIFO consumer: process in order, a failure ("drop" or "change") skips the rest of its group."""
    while not stop.is_set():
        batch = consumer.receive(16, INVISIBLE_S)
        failed: set[str] = set()
        for msg in batch:
            group, seq = _parse(msg)
            if group in failed:
                continue
            how = fails(group, seq)
            if how is not None:
                failed.add(group)
                if how == "change":
                    consumer.change_invisible_duration(msg, 1.0)
                continue
            ledger.ack(consumer, msg, per_group, t0)


def _run(
    ns: ServerProcess,
    group: str,
    topic: str,
    groups: list[str],
    per_group: int,
    fails: Callable[[str, int], str | None],
    *,
    consumers: int,
    until: Callable[[Ledger], bool],
    timeout_s: float,
) -> tuple[Ledger, float]:
    ledger = Ledger()
    stop = threading.Event()
    t0 = time.monotonic()
    with_consumers = [_consumer(ns, group, topic) for _ in range(consumers)]
    try:
        threads = [
            threading.Thread(target=_consume, args=(c, ledger, per_group, fails, stop, t0), daemon=True)
            for c in with_consumers
        ]
        for t in threads:
            t.start()
        deadline = t0 + timeout_s
        while time.monotonic() < deadline and not until(ledger):
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(10)
    finally:
        for c in with_consumers:
            c.shutdown()
    return ledger, elapsed


def test_three_fifo_consumers_50_groups_random_failures_in_order(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic, per_group = "fifo-50", 8
    groups = [f"g{i:02d}" for i in range(50)]
    rng = random.Random(31)
    lock = threading.Lock()

    def fails(group: str, seq: int) -> str | None:
        with lock:
            r = rng.random()
        return "drop" if r < 0.07 else "change" if r < 0.14 else None

    with spawn_broker(tmp_path, namesrv_proc.addr):
        create_topic(namesrv_proc.addr, topic, 4)
        _send_groups(namesrv_proc, topic, groups, per_group)
        ledger, elapsed = _run(
            namesrv_proc,
            "fifo-cg",
            topic,
            groups,
            per_group,
            fails,
            consumers=3,
            until=lambda led: led.complete(groups, per_group),
            timeout_s=120,  # about 30-50 s on 2 busy cores: every failure holds its queue 1-2 s
        )
    print(
        f"FIFO 50 groups x {per_group}: all processed in {elapsed:.1f} s, "
        f"acked messages delivered again {ledger.redelivered_acked}"
    )
    assert ledger.out_of_order == []
    missing = {g: per_group - len(ledger.processed.get(g, [])) for g in groups}
    assert {g: n for g, n in missing.items() if n} == {}


def _stuck_run(
    tmp_path: Path, ns: ServerProcess, scope: str | None, fail_for_s: float
) -> tuple[Ledger, float]:
    """One queue, 10 groups of 6; group ``stuck`` fails every delivery for ``fail_for_s`` seconds."""
    topic, per_group = f"fifo-stuck-{scope or 'queue'}", 6
    groups = ["stuck", *[f"o{i}" for i in range(9)]]
    others = groups[1:]
    t0 = time.monotonic()

    def fails(group: str, seq: int) -> str | None:
        return "change" if group == "stuck" and time.monotonic() - t0 < fail_for_s else None

    with spawn_broker(tmp_path / (scope or "queue"), ns.addr, popOrderBlockScope=scope or "queue"):
        create_topic(ns.addr, topic, 1)
        _send_groups(ns, topic, groups, per_group)
        t0 = time.monotonic()
        return _run(
            ns,
            f"cg-{topic}",
            topic,
            groups,
            per_group,
            fails,
            consumers=2,
            until=lambda led: led.complete(others, per_group) or led.complete(groups, per_group),
            timeout_s=fail_for_s + 25,
        )


def test_group_scope_stuck_group_does_not_hold_back_its_queue_but_queue_scope_does(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    fail_for_s = 10.0
    others = [f"o{i}" for i in range(9)]
    grouped, _ = _stuck_run(tmp_path, namesrv_proc, "group", fail_for_s)
    g_done = max(grouped.done_at.get(g, float("inf")) for g in others)
    print(
        f"popOrderBlockScope=group: the 9 other groups of the queue done at {g_done:.1f} s, "
        f"the stuck group fails until {fail_for_s:.0f} s"
    )
    assert grouped.out_of_order == []
    assert g_done < fail_for_s, "under group scope the other groups must finish while one keeps failing"

    queued, _ = _stuck_run(tmp_path, namesrv_proc, None, fail_for_s)
    q_done = max(queued.done_at.get(g, float("inf")) for g in others)
    print(
        f"popOrderBlockScope=queue: the 9 other groups done at {q_done:.1f} s "
        f"(stuck group fails until {fail_for_s:.0f} s)"
    )
    assert queued.out_of_order == []
    assert q_done >= fail_for_s, "under queue scope the stuck group holds its whole queue"


def _consume_through_outage(
    consumer: SimpleConsumer, ledger: Ledger, per_group: int, stop: threading.Event, t0: float
) -> None:
    """A FIFO consumer that keeps going while the broker is down (errors: wait and receive again)."""
    while not stop.is_set():
        try:
            batch = consumer.receive(16, INVISIBLE_S)
        except Exception:  # the broker is down: receive again (bounded by the caller's stop)
            time.sleep(0.2)
            continue
        failed: set[str] = set()
        for msg in batch:
            group = _parse(msg)[0]
            if group in failed:
                continue
            try:
                ledger.ack(consumer, msg, per_group, t0)
            except Exception:  # not acked: the rest of its group waits for its redelivery
                failed.add(group)


def test_broker_sigkill_during_fifo_traffic_keeps_order_and_loses_nothing(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic, per_group = "fifo-kill", 20
    groups = [f"k{i:02d}" for i in range(20)]
    broker = spawn_broker(
        tmp_path, namesrv_proc.addr, brokerName="fifo-kill-b", flushConsumerOffsetInterval=1000
    )
    ledger = Ledger()
    stop = threading.Event()
    consumers: list[SimpleConsumer] = []
    try:
        create_topic(namesrv_proc.addr, topic, 4)
        _send_groups(namesrv_proc, topic, groups, per_group)
        t0 = time.monotonic()
        consumers = [_consumer(namesrv_proc, "fifo-kill-cg", topic) for _ in range(2)]
        threads = [
            threading.Thread(
                target=_consume_through_outage, args=(c, ledger, per_group, stop, t0), daemon=True
            )
            for c in consumers
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(len(v) for v in ledger.processed.values()) < 130:
            time.sleep(0.05)
        broker.kill9()
        broker = spawn_broker(
            tmp_path, namesrv_proc.addr, brokerName="fifo-kill-b", flushConsumerOffsetInterval=1000
        )
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not ledger.complete(groups, per_group):
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(10)
    finally:
        stop.set()
        for c in consumers:
            c.shutdown()
        broker.terminate()
    print(f"SIGKILL during FIFO traffic: acked messages delivered again {ledger.redelivered_acked}")
    assert ledger.out_of_order == []
    missing = {g: per_group - len(ledger.processed.get(g, [])) for g in groups}
    assert {g: n for g, n in missing.items() if n} == {}


def test_orderly_message_beyond_retry_limit_goes_to_dlq_and_queue_moves_on(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    """The default retryMaxTimes is 16: the 18th delivery would exceed it, so the broker dead-letters.

    a:1 was delivered behind a:0 every time without being tried; once a:0 is gone it fails twice
    and is delivered again (its own retries count, not the deliveries behind a:0)."""
    topic, group = "fifo-dlq", "fifo-dlq-cg"
    with spawn_broker(tmp_path, namesrv_proc.addr) as broker:
        create_topic(namesrv_proc.addr, topic, 1)
        _send_groups(namesrv_proc, topic, ["a"], 3)  # a:0 always fails, a:1 and a:2 follow it
        consumer = _consumer(namesrv_proc, group, topic)
        deliveries: list[tuple[int, int]] = []  # (seq, reconsume_times)
        acked: list[int] = []
        a1_failures = 0
        try:
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline and len(acked) < 2:
                for msg in consumer.receive(4, 1.0):
                    _, seq = _parse(msg)
                    deliveries.append((seq, msg.reconsume_times))
                    if seq == 0 or (seq == 1 and a1_failures < 2):
                        a1_failures += seq
                        consumer.change_invisible_duration(msg, 0.1)
                        break  # the rest of the group waits for it
                    consumer.ack(msg)
                    acked.append(seq)
        finally:
            consumer.shutdown()
        api = BlockingMQClientAPI(namesrv_proc.addr)
        try:
            dead = wait_value(
                lambda: pull_queue(api, broker.addr, dlq_topic(group), 0) or None, "the DLQ message", 15
            )
        finally:
            api.close()
    zero = [n for s, n in deliveries if s == 0]
    print(
        f"orderly dead letter: a:0 delivered {len(zero)} times (reconsume times up to {max(zero)}), then DLQ"
    )
    assert acked == [1, 2]
    assert a1_failures == 2
    assert len(zero) == 17 and zero == sorted(zero) and max(zero) == 16
    assert [m.body for m in dead] == [b"a:0"]
    assert dead[0].properties.get(MessageConst.RETRY_TOPIC) == topic


def _bodies(msgs: list[MessageExt]) -> list[str]:
    return [m.body.decode() for m in msgs]


@pytest.mark.parametrize("scope", ["queue", "group"])
def test_batch_ack_of_an_orderly_batch_commits_it_and_releases_the_queue_or_group(
    tmp_path: Path, namesrv_proc: ServerProcess, scope: str
) -> None:
    """``ack_many`` sends one BATCH_ACK_MESSAGE for the orderly batch: the next batch follows at once.

    Under ``group`` scope a batch ack of one group's messages releases that group only."""
    topic, group = f"fifo-bAck-{scope}", f"fifo-bAck-cg-{scope}"
    with spawn_broker(tmp_path, namesrv_proc.addr, popOrderBlockScope=scope):
        create_topic(namesrv_proc.addr, topic, 1)
        _send_groups(namesrv_proc, topic, ["A", "B"], 3)  # A:0 B:0 A:1 B:1 A:2 B:2
        first, second = _consumer(namesrv_proc, group, topic), _consumer(namesrv_proc, group, topic)
        try:
            batch = first.receive(4, 30)
            assert _bodies(batch) == ["A:0", "B:0", "A:1", "B:1"]
            assert second.receive(4, 30) == []  # held by the un-acked batch
            if scope == "group":
                first.ack_many([m for m in batch if _parse(m)[0] == "A"])
                assert _bodies(second.receive(4, 30)) == ["A:2"]  # B is still held
                assert second.receive(4, 30) == []
                first.ack_many([m for m in batch if _parse(m)[0] == "B"])
                assert _bodies(second.receive(4, 30)) == ["B:2"]
            else:
                first.ack_many(batch)
                assert _bodies(second.receive(4, 30)) == ["A:2", "B:2"]
        finally:
            first.shutdown()
            second.shutdown()


class RawPop:
    """NOTIFICATION and POLLING_INFO requests of one consumer group to one broker."""

    def __init__(self, addr: str, group: str, topic: str) -> None:
        self.addr, self.group, self.topic = addr, group, topic
        self.client = BlockingRemotingClient()

    def close(self) -> None:
        self.client.close()

    def has_msg(self, poll_ms: int = 0) -> bool:
        header = NotificationRequestHeader(
            consumer_group=self.group,
            topic=self.topic,
            queue_id=-1,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            order=True,
        )
        request = RemotingCommand.request(RequestCode.NOTIFICATION, header.to_ext_fields())
        answer = self.client.invoke(self.addr, request, poll_ms + 10_000)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return answer.ext_fields["hasMsg"] == "true"

    def polling_num(self) -> int:
        header = PollingInfoRequestHeader(consumer_group=self.group, topic=self.topic, queue_id=-1)
        answer = self.client.invoke(
            self.addr, RemotingCommand.request(RequestCode.POLLING_INFO, header.to_ext_fields()), 10_000
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return int(answer.ext_fields["pollingNum"])

    def wait_for_waiter(self) -> None:
        wait_value(lambda: self.polling_num() > 0, "a long poll waiting in POLLING_INFO", 15)


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[tuple[object, float]]]:
    """Run ``fn`` in a thread; the list gets (its result, seconds it took)."""
    out: list[tuple[object, float]] = []

    def run() -> None:
        t0 = time.monotonic()
        result = fn()
        out.append((result, time.monotonic() - t0))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_orderly_long_polls_are_woken_when_the_holding_batch_is_acked(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    """A NOTIFICATION and a POP long-polling (20 s) on a held queue answer as soon as the batch
    holding it is acked, long before their poll time ends; NOTIFICATION says whether the queue
    has messages for an orderly consumer: none while it is held, none when all are consumed."""
    topic, group, poll_s = "fifo-wake", "fifo-wake-cg", 20.0
    with spawn_broker(tmp_path, namesrv_proc.addr) as broker:
        create_topic(namesrv_proc.addr, topic, 1)
        _send_groups(namesrv_proc, topic, ["A"], 6)
        holder = _consumer(namesrv_proc, group, topic)
        waiter = _consumer(namesrv_proc, group, topic, await_duration_s=poll_s)
        raw = RawPop(broker.addr, group, topic)
        try:
            batch = holder.receive(3, 30)
            assert _bodies(batch) == ["A:0", "A:1", "A:2"]
            assert not raw.has_msg()  # held: an orderly pop would get nothing
            thread, noted = _in_thread(lambda: raw.has_msg(int(poll_s * 1000)))
            raw.wait_for_waiter()
            holder.ack(batch[0])  # A:1 and A:2 still hold the queue: no wake
            holder.ack_many(batch[1:])
            thread.join(poll_s + 10)
            assert [r for r, _ in noted] == [True]
            assert noted[0][1] < poll_s / 2, f"NOTIFICATION answered after {noted[0][1]:.1f} s"
            assert raw.has_msg()

            batch = holder.receive(2, 30)
            assert _bodies(batch) == ["A:3", "A:4"]
            assert not raw.has_msg()
            thread, popped = _in_thread(lambda: waiter.receive(3, 30))
            raw.wait_for_waiter()
            holder.ack_many(batch)
            thread.join(poll_s + 10)
            assert len(popped) == 1
            msgs, took = popped[0]
            assert isinstance(msgs, list) and _bodies(msgs) == ["A:5"]
            assert took < poll_s / 2, f"the long-polling orderly POP answered after {took:.1f} s"
            waiter.ack_many(msgs)
            assert not raw.has_msg()  # everything consumed
        finally:
            raw.close()
            holder.shutdown()
            waiter.shutdown()


@pytest.mark.parametrize("scope", ["queue", "group"])
def test_orderly_long_polls_are_woken_when_the_holding_batch_becomes_visible_again(
    tmp_path: Path, namesrv_proc: ServerProcess, scope: str
) -> None:
    """A NOTIFICATION and a POP long-polling (20 s) on a queue (or message group) held by a batch
    of 3 s invisible time answer when that time runs out, long before their poll time ends: the
    NOTIFICATION says there is a message, the POP gets the batch again."""
    topic, group, poll_s, invisible_s = f"fifo-expire-{scope}", f"fifo-expire-{scope}-cg", 20.0, 3.0
    with spawn_broker(tmp_path, namesrv_proc.addr, popOrderBlockScope=scope) as broker:
        create_topic(namesrv_proc.addr, topic, 1)
        _send_groups(namesrv_proc, topic, ["A"], 3)
        holder = _consumer(namesrv_proc, group, topic)
        waiter = _consumer(namesrv_proc, group, topic, await_duration_s=poll_s)
        raw = RawPop(broker.addr, group, topic)
        try:
            assert _bodies(holder.receive(3, invisible_s)) == ["A:0", "A:1", "A:2"]
            thread, popped = _in_thread(lambda: waiter.receive(3, invisible_s))
            raw.wait_for_waiter()
            thread.join(poll_s + 10)
            assert len(popped) == 1
            msgs, took = popped[0]
            assert isinstance(msgs, list) and _bodies(msgs) == ["A:0", "A:1", "A:2"]
            assert took < 12, f"the long-polling orderly POP answered after {took:.1f} s"

            assert not raw.has_msg()  # the redelivered batch holds the queue (group) again
            thread, noted = _in_thread(lambda: raw.has_msg(int(poll_s * 1000)))
            raw.wait_for_waiter()
            thread.join(poll_s + 10)
            assert [r for r, _ in noted] == [True]
            assert noted[0][1] < 12, f"NOTIFICATION answered after {noted[0][1]:.1f} s"
        finally:
            raw.close()
            holder.shutdown()
            waiter.shutdown()


def test_orderly_notification_under_group_scope_sees_only_free_groups(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic, group = "fifo-note-group", "fifo-note-group-cg"
    with spawn_broker(tmp_path, namesrv_proc.addr, popOrderBlockScope="group") as broker:
        create_topic(namesrv_proc.addr, topic, 1)
        _send_groups(namesrv_proc, topic, ["A"], 3)
        consumer = _consumer(namesrv_proc, group, topic)
        raw = RawPop(broker.addr, group, topic)
        try:
            batch = consumer.receive(1, 30)
            assert _bodies(batch) == ["A:0"]
            assert not raw.has_msg(), "A:1 and A:2 wait for A:0: an orderly pop gets nothing"
            _send_groups(namesrv_proc, topic, ["B"], 1)
            assert raw.has_msg()  # B:0 is free
            assert _bodies(consumer.receive(4, 30)) == ["B:0"]
            assert not raw.has_msg()
            consumer.ack_many(batch)
            assert raw.has_msg()
        finally:
            raw.close()
            consumer.shutdown()


def _order_info_of(store_root: Path, group: str, message_group: str) -> dict[int, int]:
    """From ``config/consumerOrderInfo.json``: queue offset -> consumed count of the popped,
    un-acked messages of ``message_group`` (the file as the broker last saved it)."""
    path = store_root / "config" / "consumerOrderInfo.json"
    if not path.exists():
        return {}
    table = lenient_json.loads(path.read_text()).get("table", {})
    out: dict[int, int] = {}
    for key, queues in table.items():
        if not key.endswith(f"@{group}"):
            continue
        for entry in queues.values():
            rq = entry.get("rq", {})
            acked = {int(o) for o in rq.get("ak", [])}
            counts = {int(o): int(n) for o, n in (entry.get("oc") or {}).items()}
            for o, g in (rq.get("g") or {}).items():
                if g == message_group and int(o) not in acked:
                    out[int(o)] = counts.get(int(o), 0)
    return out


def test_broker_sigkill_under_group_scope_restores_the_order_table_and_loses_nothing(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    """Eight message groups flow while a ninth (``stuck``) is never acked; the broker is killed
    with SIGKILL and restarted on its store.  Its consumerOrderInfo.json brings the stuck group's
    state back (its message is delivered again with its consumed count carried on, not from 0),
    every group is processed in send order and nothing is missing once ``stuck`` is let through."""
    topic, group, per_group = "fifo-kill-group", "fifo-kill-group-cg", 24
    groups = [f"g{i}" for i in range(8)]

    def start() -> ServerProcess:
        return spawn_broker(
            tmp_path,
            namesrv_proc.addr,
            brokerName="fifo-kill-g",
            flushConsumerOffsetInterval=500,
            popOrderBlockScope="group",
        )

    broker = start()
    store_root = tmp_path / "store-fifo-kill-g-0"
    ledger = Ledger()
    stuck_deliveries: list[tuple[float, int]] = []  # (when, reconsume times) of stuck:0
    release = threading.Event()
    stop = threading.Event()
    consumers: list[SimpleConsumer] = []

    def consume(consumer: SimpleConsumer) -> None:
        while not stop.is_set():
            try:
                batch = consumer.receive(8, INVISIBLE_S)
            except Exception:  # the broker is down: receive again (bounded by stop)
                time.sleep(0.2)
                continue
            failed: set[str] = set()
            for msg in batch:
                g, seq = _parse(msg)
                if g in failed:
                    continue
                if g == "stuck" and not release.is_set():
                    if seq == 0:
                        stuck_deliveries.append((time.monotonic(), msg.reconsume_times))
                    failed.add(g)  # not acked: the rest of the group waits behind it
                    continue
                time.sleep(0.05)  # processing: the traffic goes on when the broker is killed
                try:
                    ledger.ack(consumer, msg, per_group, 0.0)
                except Exception:  # not acked: the rest of its group waits for its redelivery
                    failed.add(g)

    try:
        create_topic(namesrv_proc.addr, topic, 2)
        _send_groups(namesrv_proc, topic, ["stuck", *groups], per_group)
        consumers = [_consumer(namesrv_proc, group, topic) for _ in range(2)]
        threads = [threading.Thread(target=consume, args=(c,), daemon=True) for c in consumers]
        for t in threads:
            t.start()

        def saved_state() -> dict[int, int] | None:
            # stuck:0 (the group's lowest popped offset) delivered again and that saved; later
            # messages of the group a pop took along may still be at count 0
            state = _order_info_of(store_root, group, "stuck")
            return state if state and state[min(state)] >= 1 else None

        try:
            what = "the stuck group's redelivery saved in consumerOrderInfo.json"
            saved = wait_value(saved_state, what, 30)
        except WaitTimeout as exc:
            raise AssertionError(
                f"{exc}; stuck:0 deliveries (monotonic time, reconsume times): {stuck_deliveries}; "
                f"saved state of the group (offset: count): {_order_info_of(store_root, group, 'stuck')}"
            ) from exc
        assert not ledger.processed.get("stuck")
        assert not ledger.complete(groups, per_group), "killed during the traffic"
        broker.kill9()
        killed_at = time.monotonic()
        assert _order_info_of(store_root, group, "stuck"), "the saved state is on disk after SIGKILL"
        broker = start()

        def after_restart() -> list[int] | None:
            return [n for t, n in stuck_deliveries if t > killed_at] or None

        after = wait_value(after_restart, "stuck:0 delivered again after the restart", 30)
        wait_value(lambda: ledger.complete(groups, per_group), "the eight other groups", 60)
        release.set()
        wait_value(lambda: ledger.complete(["stuck"], per_group), "the stuck group once let through", 30)
    finally:
        stop.set()
        for c in consumers:
            c.shutdown()
        broker.terminate()
    print(
        f"SIGKILL under group scope: stuck:0 consumed count {saved[min(saved)]} saved (group state "
        f"{saved}), "
        f"{after[0]} at its first delivery after the restart; acked messages delivered again "
        f"{ledger.redelivered_acked}"
    )
    assert after[0] > saved[min(saved)], "stuck:0's consumed count went on from the saved state"
    assert ledger.out_of_order == []
    missing = {g: per_group - len(ledger.processed.get(g, [])) for g in ["stuck", *groups]}
    assert {g: n for g, n in missing.items() if n} == {}
