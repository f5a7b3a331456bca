"""Producing end to end: every send mode, per-key order, long polling, queries, bad input.

One ``mqnamesrv`` and one ``mqbroker`` (free ports, temp dirs) serve the module; each test uses
its own topic and groups.  A second broker with ``autoCreateTopicEnable=false`` checks the error
a producer gets for an unknown topic.  Timings are printed (``pytest -s``), never asserted beyond
"well before the long-poll timeout".
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer, PullStatus
from rocketq.client.errors import (
    MessageIllegalError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    RocketQError,
    TopicNotExistError,
)
from rocketq.client.model import Message, MessageExt, SendResult, SendStatus
from rocketq.client.producer import AsyncProducer, Producer, SelectMessageQueueByHash
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    drain,
    run_mqadmin,
    send_header,
    spawn_broker,
    spawn_namesrv,
    wait_value,
)

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
BROKER_MAX_MESSAGE_SIZE = 256 * 1024
SMALL_STORE: dict[str, Any] = {
    "mappedFileSizeCommitLog": 16 << 20,
    "maxMessageSize": BROKER_MAX_MESSAGE_SIZE,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("e2e-send")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **SMALL_STORE) as broker:
        yield ns, broker
        print(f"--- broker log tail ---\n{broker.log_tail()}")


@pytest.fixture()
def ns_addr(cluster: tuple[ServerProcess, ServerProcess]) -> str:
    return cluster[0].addr


def _drain(ns_addr: str, topic: str, expected: int, timeout_s: float = 30.0) -> list[MessageExt]:
    """Every message of ``topic`` from offset 0 (assign all queues, no commits)."""
    consumer = LitePullConsumer(
        ns_addr, consumer_group=f"drain-{topic}", consume_from_where=FIRST, auto_commit=False
    )
    consumer.assign(consumer.fetch_message_queues(topic))
    consumer.start()
    try:
        got = drain(consumer, expected, timeout_s, poll_ms=300)
        got.extend(consumer.poll(300))  # nothing more may arrive
    finally:
        consumer.shutdown()
    return got


# ---------------------------------------------------------------------------- send modes


def test_round_trip_every_send_mode(ns_addr: str) -> None:
    topic = "I4Modes"
    create_topic(ns_addr, topic, timeout_s=15)
    expected: dict[bytes, str | None] = {}  # body -> uniq key (None: oneway, unknown)
    callbacks: list[tuple[SendResult | None, BaseException | None]] = []
    done = threading.Event()
    with Producer(ns_addr, producer_group="pg-i4-modes") as producer:
        for i in range(5):
            r = producer.send(Message(topic, b"sync-%d" % i, tags="S", keys=f"sync-{i}"))
            assert r.send_status is SendStatus.SEND_OK and r.message_queue.topic == topic
            expected[b"sync-%d" % i] = r.msg_id
        futures = []
        for i in range(5):

            def cb(res: SendResult | None, exc: BaseException | None) -> None:
                callbacks.append((res, exc))
                if len(callbacks) == 5:
                    done.set()

            futures.append(producer.send_async(Message(topic, b"async-%d" % i, tags="A"), cb))
        for i, fut in enumerate(futures):
            expected[b"async-%d" % i] = fut.result(10).msg_id
        assert done.wait(10) and all(res is not None and exc is None for res, exc in callbacks)
        for i in range(5):
            producer.send_oneway(Message(topic, b"oneway-%d" % i, tags="O"))
            expected[b"oneway-%d" % i] = None
        batch = [Message(topic, b"batch-%d" % i, tags="B") for i in range(20)]
        results = producer.send_batch(batch)
        ids = [i for r in results for i in r.msg_id.split(",")]
        assert len(ids) == 20 and len(set(ids)) == 20
        for i, uid in enumerate(ids):
            expected[b"batch-%d" % i] = uid
        queues = producer.fetch_publish_message_queues(topic)
        for key in ("alpha", "beta", "gamma"):
            r = producer.send(
                Message(topic, f"sel-{key}".encode()), selector=SelectMessageQueueByHash(), arg=key
            )
            assert r.message_queue == queues[abs(java_string_hash(key)) % len(queues)]
            expected[f"sel-{key}".encode()] = r.msg_id
        r = producer.send(Message(topic, b"explicit"), queue=queues[-1])
        assert r.message_queue == queues[-1]
        expected[b"explicit"] = r.msg_id

    async def produce_async() -> None:
        async with AsyncProducer(ns_addr, producer_group="pg-i4-modes-aio") as aio:
            res = await aio.send(Message(topic, b"aio-sync"))
            expected[b"aio-sync"] = res.msg_id
            task = aio.send_async(Message(topic, b"aio-task"))
            expected[b"aio-task"] = (await task).msg_id
            await aio.send_oneway(Message(topic, b"aio-oneway"))
            expected[b"aio-oneway"] = None
            out = await aio.send_batch([Message(topic, b"aio-batch-%d" % i) for i in range(3)])
            for i, uid in enumerate(u for r in out for u in r.msg_id.split(",")):
                expected[b"aio-batch-%d" % i] = uid

    asyncio.run(produce_async())
    got = _drain(ns_addr, topic, len(expected))
    bodies = [m.body for m in got]
    assert sorted(bodies) == sorted(expected), "every message exactly once"
    for m in got:
        if expected[m.body] is not None:
            assert m.uniq_key == expected[m.body]
    tags = {m.body: m.tags for m in got}
    assert tags[b"sync-0"] == "S" and tags[b"batch-3"] == "B" and tags[b"oneway-1"] == "O"


# ---------------------------------------------------------------------------- per-key order

_PRODUCER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from rocketq.client.model import Message
    from rocketq.client.producer import Producer, SelectMessageQueueByHash

    ns, topic, name, per_key = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    keys = [f"key-{k}" for k in range(8)]
    out = []
    with Producer(ns, producer_group="pg-order-" + name) as producer:
        sel = SelectMessageQueueByHash()
        for seq in range(per_key):
            for key in keys:
                body = f"{name}|{key}|{seq}".encode()
                r = producer.send(Message(topic, body, keys=key), selector=sel, arg=key)
                out.append([key, r.message_queue.queue_id, r.queue_offset])
    print(json.dumps(out))
    """
)


def test_per_key_order_with_concurrent_producers(ns_addr: str) -> None:
    topic = "I4Order"
    create_topic(ns_addr, topic, 8, timeout_s=15)
    per_key = 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PRODUCER_SCRIPT, ns_addr, topic, f"proc{n}", str(per_key)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    errors: list[BaseException] = []

    def thread_producer(name: str) -> None:
        try:
            with Producer(ns_addr, producer_group=f"pg-order-{name}") as producer:
                for seq in range(per_key):
                    for k in range(8):
                        key = f"key-{k}"
                        producer.send(
                            Message(topic, f"{name}|{key}|{seq}".encode(), keys=key),
                            selector=SelectMessageQueueByHash(),
                            arg=key,
                        )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=thread_producer, args=(f"thread{n}",)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert len(json.loads(out)) == per_key * 8
    assert not errors, errors
    total = 4 * per_key * 8
    got = _drain(ns_addr, topic, total)
    assert len(got) == total
    queue_of_key: dict[str, set[int]] = {}
    sequence: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for m in got:
        name, key, seq = m.body.decode().split("|")
        queue_of_key.setdefault(key, set()).add(m.queue_id)
        sequence.setdefault((name, key), []).append((m.queue_offset, int(seq)))
    for key, qids in queue_of_key.items():
        assert len(qids) == 1, f"{key} spread over queues {qids}"
        assert qids == {abs(java_string_hash(key)) % 8}
    for (name, key), pairs in sequence.items():
        seqs = [seq for _, seq in sorted(pairs)]
        assert seqs == list(range(per_key)), f"{name}/{key} out of send order: {seqs}"


# ---------------------------------------------------------------------------- long polling


def test_long_polling_returns_soon_after_a_send(ns_addr: str) -> None:
    topic = "I4LongPoll"
    create_topic(ns_addr, topic, 1, timeout_s=15)
    suspend_ms = 15_000
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group="cg-i4-longpoll",
        broker_suspend_max_time_ms=suspend_ms,
        consumer_timeout_when_suspend_ms=suspend_ms + 10_000,
    )
    consumer.start()
    with Producer(ns_addr, producer_group="pg-i4-longpoll") as producer:
        mq = MessageQueue(topic, producer.fetch_publish_message_queues(topic)[0].broker_name, 0)
        producer.send(Message(topic, b"warm-up"), queue=mq)  # connections and routes are warm
        samples: list[float] = []
        try:
            for round_ in range(3):
                offset = 1 + round_
                box: list[Any] = []
                returned = threading.Event()

                def park(at: int = offset, out: list[Any] = box, ev: threading.Event = returned) -> None:
                    try:
                        out.append(consumer.pull(mq, at, 32, block=True))
                    except BaseException as exc:
                        out.append(exc)
                    out.append(time.monotonic())
                    ev.set()

                started = time.monotonic()
                t = threading.Thread(target=park)
                t.start()
                time.sleep(0.5)  # the pull is parked on the broker by now
                assert not returned.is_set(), "the pull returned before any message was sent"
                sent_at = time.monotonic()
                producer.send(Message(topic, b"poke-%d" % round_), queue=mq)
                assert returned.wait(suspend_ms / 1000 + 5)
                t.join()
                result, ended = box
                assert not isinstance(result, BaseException), result
                assert result.status is PullStatus.FOUND
                assert [m.body for m in result.messages] == [b"poke-%d" % round_]
                assert ended - started < suspend_ms / 2000, "the parked pull was not woken by the send"
                samples.append((ended - sent_at) * 1000)
        finally:
            consumer.shutdown()
    print(
        f"\nlong polling: send -> parked pull returned in {', '.join(f'{s:.1f}' for s in samples)} ms "
        f"(suspend timeout {suspend_ms} ms)"
    )


# ---------------------------------------------------------------------------- queries


def test_query_by_key_and_by_id(ns_addr: str) -> None:
    topic = "I4Query"
    create_topic(ns_addr, topic, 2, timeout_s=15)
    with Producer(ns_addr, producer_group="pg-i4-query") as producer:
        r1 = producer.send(Message(topic, b"order created", keys=["order-7", "customer-3"]))
        r2 = producer.send(Message(topic, b"order paid", keys="order-7"))
        producer.send(Message(topic, b"other", keys="order-8"))
    with Admin(ns_addr) as admin:

        def both_indexed() -> list[MessageExt] | None:
            found = admin.query_msg_by_key(topic, "order-7")
            return found if len(found) >= 2 else None

        # the index is built by the dispatcher, shortly after the send
        found = wait_value(both_indexed, "both order-7 messages in the index", 10)
        assert sorted(m.body for m in found) == [b"order created", b"order paid"]
        assert [m.body for m in admin.query_msg_by_key(topic, "customer-3")] == [b"order created"]
        assert admin.query_msg_by_key(topic, "no-such-key") == []
        assert admin.query_msg_by_id(r1.offset_msg_id).body == b"order created"
        by_uniq = admin.query_msg_by_id(r2.msg_id, topic)
        assert by_uniq.body == b"order paid" and by_uniq.uniq_key == r2.msg_id
        with pytest.raises(MQClientError, match="give the topic"):
            admin.query_msg_by_id(r2.msg_id)  # a UNIQ_KEY without its topic
    by_key = run_mqadmin("queryMsgByKey", "-n", ns_addr, "-t", topic, "-k", "order-7")
    assert by_key.returncode == 0, by_key.stderr
    listed = [line.split()[0] for line in by_key.stdout.splitlines()[1:] if line.strip()]
    assert r1.offset_msg_id in listed and len(listed) == 2
    by_id = run_mqadmin("queryMsgById", "-n", ns_addr, "-i", r1.offset_msg_id)
    assert by_id.returncode == 0 and "Message Body: order created" in by_id.stdout, by_id.stderr
    by_uniq_cli = run_mqadmin("queryMsgById", "-n", ns_addr, "-t", topic, "-i", r2.msg_id)
    assert by_uniq_cli.returncode == 0 and "Message Body: order paid" in by_uniq_cli.stdout, (
        by_uniq_cli.stderr
    )


# ---------------------------------------------------------------------------- bad input


def test_bad_input_at_the_client_api(ns_addr: str, cluster: tuple[ServerProcess, ServerProcess]) -> None:
    topic = "I4Bad"
    create_topic(ns_addr, topic, 1, timeout_s=15)
    with Producer(ns_addr, producer_group="pg-i4-bad") as producer:
        # over the client's own limit: refused before anything is sent
        with Producer(ns_addr, producer_group="pg-i4-small", max_message_size=1024) as small:
            with pytest.raises(MQClientError, match="body size over max value") as info:
                small.send(Message(topic, b"x" * 1025))
            assert info.value.code == 13
        # within the client's limit (4 MiB) but over the broker's: MESSAGE_ILLEGAL from the broker
        # (random bytes: the client compresses bodies over 4 KiB, and the broker checks what it gets)
        with pytest.raises(MessageIllegalError) as broker_info:
            producer.send(Message(topic, os.urandom(BROKER_MAX_MESSAGE_SIZE + 1)))
        assert broker_info.value.code == 13 and not broker_info.value.retriable
        assert broker_info.value.remark, "the broker says why"
        with pytest.raises(MessageIllegalError):
            producer.send_batch([Message(topic, b"y" * 100_000) for _ in range(3)])  # never compressed
        # illegal topic names are refused by the client
        for bad in ("bad topic", "a/b", "x" * 128, "TBW102"):
            with pytest.raises(MQClientError) as topic_info:
                producer.send(Message(bad, b"x"))
            assert topic_info.value.code == 13, bad
        with pytest.raises(MQClientError, match="empty"):
            producer.send(Message(topic, b""))
        # properties longer than the broker allows (Short.MAX_VALUE)
        big = Message(topic, b"x")
        big.put_user_property("big", "v" * 33_000)
        with pytest.raises(RocketQError) as prop_info:
            producer.send(big)
        assert getattr(prop_info.value, "code", None) == 13, prop_info.value
        # the producer still works after all that
        assert producer.send(Message(topic, b"fine")).send_status is SendStatus.SEND_OK
        mq = producer.fetch_publish_message_queues(topic)[0]

    consumer = LitePullConsumer(ns_addr, consumer_group="cg-i4-bad")
    consumer.start()
    try:
        # a queue the topic does not have
        with pytest.raises(MQBrokerError) as pull_info:
            consumer.pull(MessageQueue(topic, mq.broker_name, 77), 0)
        assert "queueId" in pull_info.value.remark or pull_info.value.remark
        # offsets past the end
        high = consumer.pull(mq, 0).max_offset
        past = consumer.pull(mq, high + 1000)
        # RocketMQ's OFFSET_OVERFLOW_BADLY: back to the min offset when it is 0, else the max
        assert past.status is PullStatus.OFFSET_ILLEGAL and past.next_begin_offset in (0, high)
        at_end = consumer.pull(mq, high)
        assert at_end.status is PullStatus.NO_NEW_MSG
        with pytest.raises(MQClientError, match="outside"):
            consumer.assign([mq])
            consumer.seek(mq, high + 5)
    finally:
        consumer.shutdown()

    # a garbage frame closes only its own connection; the client API keeps working
    host, port = cluster[1].addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10\xff\xff\xff\xffgarbage!")
        sock.settimeout(5)
        try:
            assert sock.recv(100) == b""
        except ConnectionResetError:
            pass
    with Producer(ns_addr, producer_group="pg-i4-bad2") as producer:
        assert producer.send(Message(topic, b"after-garbage")).send_status is SendStatus.SEND_OK


@pytest.fixture(scope="module")
def no_auto_create(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("e2e-noauto")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, autoCreateTopicEnable=False, **SMALL_STORE):
        yield ns


def test_unknown_topic_with_auto_create_off(no_auto_create: ServerProcess) -> None:
    ns_addr = no_auto_create.addr
    with Producer(ns_addr, producer_group="pg-i4-noauto") as producer:
        with pytest.raises(NoRouteError) as info:
            producer.send(Message("NoSuchTopic", b"x"))
        assert info.value.code == 17 and "autoCreateTopicEnable" in str(info.value)
        # a request that reaches the broker anyway (a stale route) gets its TOPIC_NOT_EXIST
        create_topic(ns_addr, "I4Exists", 1, timeout_s=15)
        mq = producer.fetch_publish_message_queues("I4Exists")[0]
    with Admin(ns_addr) as admin:
        broker_addr = admin.topic_route("I4Exists").master_addr(mq.broker_name)
    assert broker_addr is not None
    from rocketq.client.api import BlockingMQClientAPI

    with BlockingMQClientAPI(ns_addr) as api:
        header = send_header("NoSuchTopic")
        with pytest.raises(TopicNotExistError) as broker_info:
            api.send_message(broker_addr, mq.broker_name, Message("NoSuchTopic", b"x"), header, 5000)
        assert "NoSuchTopic" in broker_info.value.remark
    consumer = LitePullConsumer(ns_addr, consumer_group="cg-i4-noauto")
    consumer.start()
    try:
        with pytest.raises(NoRouteError, match="No route info of this topic: NoSuchTopic"):
            consumer.fetch_message_queues("NoSuchTopic")
    finally:
        consumer.shutdown()


def test_unknown_topic_error_names_the_topic(no_auto_create: ServerProcess) -> None:
    with Producer(no_auto_create.addr, producer_group="pg-i4-noauto-name") as producer:
        with pytest.raises(NoRouteError) as info:
            producer.send(Message("NoSuchTopic", b"x"))
    assert "No route info of this topic: NoSuchTopic" in str(info.value)
