"""POP consumption against a real broker: pop, ack, change invisible time, revive, DLQ, SIGKILL.

Raw POP_MESSAGE / ACK_MESSAGE / BATCH_ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME requests go
through the client's remoting layer (``rocketq.client.remoting.pop`` headers), the receipt
handles are built from the pop response as the Java client builds them
(:func:`mark_popped_messages`), and every consumer of a test is its own connection.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import V5_POLLING_TIMEOUT, RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import StoredMessage, iter_stored_messages
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    mark_popped_messages,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import dlq_topic
from rocketq.client.testing import ServerProcess, create_topic, pull_queue, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import wait_value
from rocketq.client.transport.blocking import BlockingRemotingClient

BROKER = "broker-a"
TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Popped:
    """One popped message: its key (the body), handle, topic and queue to ack with, attempts."""

    body: bytes
    handle: ExtraInfo
    topic: str
    queue_id: int
    offset: int
    reconsume_times: int
    message: StoredMessage


class PopClient:
    """Raw POP requests to one broker over one connection."""

    def __init__(self, addr: str, group: str, topic: str) -> None:
        self.addr = addr
        self.group = group
        self.topic = topic
        self.client = BlockingRemotingClient()

    def close(self) -> None:
        self.client.close()

    def invoke(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        return self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), TIMEOUT_MS)

    def pop(
        self,
        n: int = 32,
        *,
        invisible_ms: int = 60_000,
        poll_ms: int = 0,
        exp: str | None = None,
        exp_type: str | None = None,
    ) -> list[Popped]:
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=self.topic,
            queue_id=-1,
            max_msg_nums=n,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            init_mode=0,
            exp=exp,
            exp_type=exp_type,
        )
        response = self.invoke(RequestCode.POP_MESSAGE, header.to_ext_fields())
        if response.code in (V5_POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return []
        assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
        rh = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        messages = list(iter_stored_messages(response.body))
        marks = mark_popped_messages(messages, rh, BROKER, order=False)
        out = []
        for m, mark in zip(messages, marks, strict=True):
            handle = ExtraInfo.parse(mark.pop_ck)
            assert handle.queue_offset is not None
            out.append(
                Popped(
                    m.body,
                    handle,
                    handle.real_topic(self.topic, self.group),
                    handle.queue_id,
                    handle.queue_offset,
                    m.reconsume_times,
                    m,
                )
            )
        return out

    def ack(self, p: Popped, handle: ExtraInfo | None = None) -> int:
        header = AckMessageRequestHeader(
            consumer_group=self.group,
            topic=p.topic,
            queue_id=p.queue_id,
            extra_info=str(handle or p.handle),
            offset=p.offset,
        )
        return self.invoke(RequestCode.ACK_MESSAGE, header.to_ext_fields()).code

    def batch_ack(self, popped: list[Popped]) -> int:
        by_ck: dict[tuple[str, int, int], list[Popped]] = {}
        for p in popped:
            by_ck.setdefault((p.topic, p.queue_id, p.handle.ck_queue_offset), []).append(p)
        acks = []
        for (_, queue_id, start), ps in by_ck.items():
            h = ps[0].handle
            acks.append(
                BatchAck(
                    consumer_group=self.group,
                    topic=self.topic,
                    retry_flag=h.retry_flag,
                    start_offset=start,
                    queue_id=queue_id,
                    revive_queue_id=h.revive_qid,
                    pop_time=h.pop_time,
                    invisible_time=h.invisible_time,
                    ack_indexes=tuple(p.offset - start for p in ps),
                )
            )
        body = BatchAckMessageRequestBody(BROKER, tuple(acks)).encode()
        return self.invoke(RequestCode.BATCH_ACK_MESSAGE, {}, body).code

    def change(self, p: Popped, invisible_ms: int) -> ExtraInfo:
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group,
            topic=p.topic,
            queue_id=p.queue_id,
            extra_info=str(p.handle),
            offset=p.offset,
            invisible_time=invisible_ms,
        )
        response = self.invoke(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())
        assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
        rh = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        return p.handle.changed(
            offset=p.offset, pop_time=rh.pop_time, invisible_time=rh.invisible_time, revive_qid=rh.revive_qid
        )


def pop_until(
    client: PopClient,
    want: int,
    timeout_s: float,
    *,
    invisible_ms: int = 60_000,
    exp: str | None = None,
    exp_type: str | None = None,
) -> list[Popped]:
    """Pop until ``want`` messages came or ``timeout_s`` passed (long polls of 1 s)."""
    got: list[Popped] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        n = min(32, want - len(got))
        got.extend(client.pop(n, invisible_ms=invisible_ms, poll_ms=1000, exp=exp, exp_type=exp_type))
    return got


def send(ns_addr: str, topic: str, bodies: list[bytes]) -> None:
    with Producer(ns_addr, producer_group=f"pg-{topic}") as producer:
        for i in range(0, len(bodies), 64):
            producer.send_batch([Message(topic, b) for b in bodies[i : i + 64]])


def set_group(addr: str, group: str, **fields: object) -> None:
    client = BlockingRemotingClient()
    try:
        body = json.dumps({"groupName": group, **fields}).encode()
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
        assert client.invoke(addr, cmd, TIMEOUT_MS).code == ResponseCode.SUCCESS
    finally:
        client.close()


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def start_broker(tmp_path: Path, ns: ServerProcess, flush_offsets_ms: int = 60_000) -> ServerProcess:
    """A broker of this file; consumer offsets are persisted every ``flush_offsets_ms``."""
    return spawn_broker(tmp_path, ns.addr, brokerName=BROKER, flushConsumerOffsetInterval=flush_offsets_ms)


def test_three_consumers_pop_and_ack_10000_once_each(tmp_path: Path, namesrv_proc: ServerProcess) -> None:
    n = 10_000
    with start_broker(tmp_path, namesrv_proc) as broker:
        create_topic(namesrv_proc.addr, "pop-many", 4)
        send(namesrv_proc.addr, "pop-many", [f"m{i}".encode() for i in range(n)])
        delivered: Counter[bytes] = Counter()
        lock = threading.Lock()
        failures: list[str] = []

        def consume(index: int) -> None:
            client = PopClient(broker.addr, "g-many", "pop-many")
            deadline = time.monotonic() + 45
            try:
                while time.monotonic() < deadline:
                    with lock:
                        if sum(delivered.values()) >= n:
                            return
                    popped = client.pop(32, poll_ms=500)
                    if not popped:
                        continue
                    with lock:
                        delivered.update(p.body for p in popped)
                    if index == 0:
                        codes = {client.ack(p) for p in popped}
                    else:
                        codes = {client.batch_ack(popped)}
                    if codes != {ResponseCode.SUCCESS}:
                        failures.append(f"consumer {index}: ack answered {codes}")
            finally:
                client.close()

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not failures
        assert set(delivered) == {f"m{i}".encode() for i in range(n)}
        assert [b for b, c in delivered.items() if c > 1] == []
        # everything acked: nothing is left to pop (nor revived later within this window)
        client = PopClient(broker.addr, "g-many", "pop-many")
        try:
            assert client.pop(32, poll_ms=0) == []
        finally:
            client.close()


@pytest.mark.parametrize("v2", [False, True], ids=["retry-v1", "retry-v2"])
def test_unacked_come_back_with_attempts_raised_then_dead_letter(
    tmp_path: Path, namesrv_proc: ServerProcess, v2: bool
) -> None:
    retry_topic = "%RETRY%g-retry+pop-retry" if v2 else "%RETRY%g-retry_pop-retry"
    with spawn_broker(tmp_path, namesrv_proc.addr, brokerName=BROKER, enableRetryTopicV2=v2) as broker:
        create_topic(namesrv_proc.addr, "pop-retry", 2)
        set_group(broker.addr, "g-retry", retryMaxTimes=2)
        send(namesrv_proc.addr, "pop-retry", [b"r0", b"r1", b"r2"])
        client = PopClient(broker.addr, "g-retry", "pop-retry")
        try:
            first = pop_until(client, 3, 20, invisible_ms=2000)
            assert sorted(p.body for p in first) == [b"r0", b"r1", b"r2"]
            assert {p.reconsume_times for p in first} == {0}
            assert client.ack(next(p for p in first if p.body == b"r0")) == ResponseCode.SUCCESS
            for attempt in (1, 2):  # r1, r2 come back from the retry topic, r0 (acked) does not
                again = pop_until(client, 2, 15, invisible_ms=2000)
                assert sorted(p.body for p in again) == [b"r1", b"r2"], attempt
                assert {p.reconsume_times for p in again} == {attempt}
                for p in again:
                    assert p.message.topic == "pop-retry"  # re-encoded with the original topic
                    assert p.topic == retry_topic  # ... and acked on the retry topic
                    assert p.message.properties[MessageConst.FIRST_POP_TIME] == str(first[0].handle.pop_time)
            r1 = next(p for p in again if p.body == b"r1")
            assert client.ack(r1) == ResponseCode.SUCCESS
            # r2 failed retryMaxTimes + 1 times: dead-lettered, not popped again
            assert pop_until(client, 1, 6, invisible_ms=2000) == []
        finally:
            client.close()
        api = BlockingMQClientAPI(namesrv_proc.addr)
        try:
            dead = wait_value(
                lambda: pull_queue(api, broker.addr, dlq_topic("g-retry"), 0) or None, "the DLQ message", 15
            )
        finally:
            api.close()
        assert [m.body for m in dead] == [b"r2"]
        assert dead[0].reconsume_times == 3
        assert dead[0].properties[MessageConst.RETRY_TOPIC] == "pop-retry"


def test_change_invisible_time_extends_shortens_and_new_handle_acks(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    with start_broker(tmp_path, namesrv_proc) as broker:
        create_topic(namesrv_proc.addr, "pop-change", 1)
        send(namesrv_proc.addr, "pop-change", [b"short", b"long", b"acked"])
        client = PopClient(broker.addr, "g-change", "pop-change")
        try:
            popped = {p.body: p for p in pop_until(client, 3, 20, invisible_ms=3000)}
            assert set(popped) == {b"short", b"long", b"acked"}
            client.change(popped[b"short"], 60_000)
            short_handle = client.change(popped[b"short"], 500)  # the old handle, as a client may
            long_handle = client.change(popped[b"long"], 60_000)
            acked_handle = client.change(popped[b"acked"], 1000)
            assert client.ack(popped[b"acked"], acked_handle) == ResponseCode.SUCCESS
            again = pop_until(client, 1, 10, invisible_ms=60_000)
            assert [p.body for p in again] == [b"short"]
            assert again[0].reconsume_times == 1
            assert short_handle.invisible_time == 500
            # past the first invisible time (3 s) and the 1 s one: "long" and "acked" stay away
            assert pop_until(client, 1, 5, invisible_ms=60_000) == []
            assert long_handle.invisible_time == 60_000
        finally:
            client.close()


@dataclass
class Ledger:
    """What the consumers of the SIGKILL test saw: deliveries, and acks the broker confirmed."""

    lock: threading.Lock
    delivered: list[tuple[float, bytes]]  # (time the pop was sent, body)
    acked: dict[bytes, float]  # body -> time its first ack was answered SUCCESS
    #: acks without an answer (the broker died): the broker may have stored them
    unanswered: set[bytes] = field(default_factory=set)

    def redelivered_after_ack(self) -> list[bytes]:
        return [b for t, b in self.delivered if b in self.acked and t > self.acked[b]]


def test_sigkill_during_pop_and_ack_loses_nothing_and_redelivers_no_acked(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    n = 3000
    bodies = {f"k{i}".encode() for i in range(n)}
    broker = start_broker(tmp_path, namesrv_proc, flush_offsets_ms=1000)
    addr = [broker.addr]
    ledger = Ledger(threading.Lock(), [], {})
    stop = threading.Event()
    try:
        create_topic(namesrv_proc.addr, "pop-kill", 4)
        send(namesrv_proc.addr, "pop-kill", sorted(bodies))

        def consume() -> None:
            client: PopClient | None = None
            deadline = time.monotonic() + 50
            while not stop.is_set() and time.monotonic() < deadline:
                with ledger.lock:
                    if len(ledger.acked) + len(ledger.unanswered - set(ledger.acked)) >= n:
                        return
                try:
                    if client is None or client.addr != addr[0]:
                        if client is not None:
                            client.close()
                        client = PopClient(addr[0], "g-kill", "pop-kill")
                    sent_at = time.monotonic()
                    popped = client.pop(16, invisible_ms=4000, poll_ms=300)
                    with ledger.lock:
                        ledger.delivered.extend((sent_at, p.body) for p in popped)
                    for p in popped:
                        try:
                            code = client.ack(p)
                        except Exception:
                            with ledger.lock:
                                ledger.unanswered.add(p.body)
                            raise
                        if code == ResponseCode.SUCCESS:
                            with ledger.lock:
                                ledger.acked.setdefault(p.body, time.monotonic())
                except Exception:  # the broker is down: try again (bounded by the deadline)
                    time.sleep(0.2)
            if client is not None:
                client.close()

        threads = [threading.Thread(target=consume) for _ in range(2)]
        for t in threads:
            t.start()
        wait_value(lambda: len(ledger.acked) >= n // 3 or None, "a third of the messages acked", 30)
        broker.kill9()
        broker = start_broker(tmp_path, namesrv_proc, flush_offsets_ms=1000)
        addr[0] = broker.addr
        for t in threads:
            t.join(55)
        stop.set()
        never_acked = bodies - set(ledger.acked)
        # an ack the dying broker stored without answering is an ack: its message stays away
        assert never_acked <= ledger.unanswered, f"{len(never_acked - ledger.unanswered)} messages lost"
        assert len(ledger.unanswered) <= 4  # at most one ack in flight per consumer per kill
        assert ledger.redelivered_after_ack() == []
    finally:
        stop.set()
        broker.terminate()


def test_filters_long_polling_peek_and_notification(tmp_path: Path, namesrv_proc: ServerProcess) -> None:
    with spawn_broker(tmp_path, namesrv_proc.addr, brokerName=BROKER, enablePropertyFilter=True) as broker:
        create_topic(namesrv_proc.addr, "pop-filter", 2)
        with Producer(namesrv_proc.addr, producer_group="pg-filter") as producer:
            for i in range(6):
                producer.send(
                    Message("pop-filter", f"f{i}".encode(), tags="ab"[i % 2], properties={"n": str(i)})
                )
        tags = PopClient(broker.addr, "g-tag", "pop-filter")
        sql = PopClient(broker.addr, "g-sql", "pop-filter")
        peek = PopClient(broker.addr, "g-peek", "pop-filter")
        waiter = PopClient(broker.addr, "g-wait", "pop-filter")
        try:
            got = pop_until(tags, 3, 10, exp="a")
            assert sorted(p.body for p in got) == [b"f0", b"f2", b"f4"]
            assert pop_until(tags, 1, 2, exp="a") == []  # the b's were stepped over, not leased
            got = pop_until(sql, 2, 10, exp="n >= 4", exp_type="SQL92")
            assert sorted(p.body for p in got) == [b"f4", b"f5"]
            # PEEK reads without leasing: twice the same, and a pop still gets them all afterwards
            header = PeekMessageRequestHeader(
                topic="pop-filter", queue_id=-1, max_msg_nums=32, consumer_group="g-peek"
            )
            peeked = [peek.invoke(RequestCode.PEEK_MESSAGE, header.to_ext_fields()) for _ in range(2)]
            assert [r.code for r in peeked] == [ResponseCode.SUCCESS] * 2
            assert [len(list(iter_stored_messages(r.body))) for r in peeked] == [6, 6]
            assert len(pop_until(peek, 6, 10)) == 6
            # NOTIFICATION: nothing for a drained group, something for a new one
            for group, expected in (("g-peek", "false"), ("g-wait", "true")):
                note = NotificationRequestHeader(
                    consumer_group=group,
                    topic="pop-filter",
                    queue_id=-1,
                    poll_time=0,
                    born_time=int(time.time() * 1000),
                )
                answer = peek.invoke(RequestCode.NOTIFICATION, note.to_ext_fields())
                assert (answer.code, answer.ext_fields["hasMsg"]) == (ResponseCode.SUCCESS, expected)
            assert len(pop_until(waiter, 6, 10)) == 6
            # a long poll is woken by a send: a poll that timed out would answer without messages
            result: list[list[Popped]] = []
            poller = threading.Thread(target=lambda: result.append(waiter.pop(32, poll_ms=20_000)))
            poller.start()
            info = PollingInfoRequestHeader(consumer_group="g-wait", topic="pop-filter", queue_id=-1)

            def polling_num() -> int | None:
                answer = peek.invoke(RequestCode.POLLING_INFO, info.to_ext_fields())
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                return int(answer.ext_fields["pollingNum"]) or None

            assert wait_value(polling_num, "the waiting pop in POLLING_INFO", 10) == 1
            with Producer(namesrv_proc.addr, producer_group="pg-filter") as producer:
                producer.send(Message("pop-filter", b"late"))
            poller.join(30)
            assert [[p.body for p in r] for r in result] == [[b"late"]]
        finally:
            for client in (tags, sql, peek, waiter):
                client.close()
