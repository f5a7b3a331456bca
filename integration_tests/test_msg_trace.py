"""Message traces end to end: real ``mqnamesrv`` and ``mqbroker`` processes, traced clients.

A message produced and consumed with ``enable_msg_trace`` is looked up by key and by msgId and
shows the producer's send (Pub: group, client and store hosts, time, cost, status) and the
consumer group's consumption (SubBefore/SubAfter); a custom trace topic (created by the broker's
auto-creation on the first trace send) carries batch, oneway and transactional traces; a trace
topic the broker refuses does not break the traced sends.  ``mqadmin queryMsgTraceById`` prints
the trace.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.mqadmin import main as mqadmin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import AsyncLitePullConsumer, AsyncPushConsumer, ConsumeConcurrentlyStatus
from rocketq.client.model import LocalTransactionState, Message, MessageExt, SendStatus
from rocketq.client.producer import AsyncProducer, AsyncTransactionProducer
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC, TRACE_TOPIC
from rocketq.client.testing import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.trace.codec import decode_trace_data
from rocketq.client.trace.lookup import TraceView, msg_ids_by_key, query_trace, query_trace_by_key
from rocketq.client.trace.model import MessageType, TraceType

FAST = ClientConfig(heartbeat_broker_interval_ms=1000, persist_consumer_offset_interval_ms=500)
BROKER_CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": 16 << 20,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
    "traceTopicEnable": True,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("msg-trace")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **BROKER_CONF) as broker:
        yield ns, broker
        print(f"--- broker log tail ---\n{broker.log_tail()}")


async def _eventually(
    probe: Callable[[], Awaitable[list[TraceView]]],
    done: Callable[[list[TraceView]], bool],
    what: str,
    timeout_s: float = 30.0,
) -> list[TraceView]:
    deadline = time.monotonic() + timeout_s
    views = await probe()
    while not done(views):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not found within {timeout_s}s; the trace has {views}")
        await asyncio.sleep(0.3)
        views = await probe()
    return views


def _types(views: list[TraceView]) -> list[TraceType]:
    return [v.trace_type for v in views]


async def _produce_and_consume(ns_addr: str, topic: str, key: str) -> tuple[str, str]:
    """Send one message with a traced producer and one with an untraced one, consume both with
    a traced consumer; returns both msgIds."""
    producer = AsyncProducer(ns_addr, producer_group="trace-pg", enable_msg_trace=True, client=FAST)
    plain = AsyncProducer(ns_addr, producer_group="plain-pg", client=FAST)
    await producer.start()
    await plain.start()
    try:
        result = await producer.send(Message(topic, b"traced body", tags="TagA", keys=[key]))
        assert result.send_status is SendStatus.SEND_OK
        untraced = await plain.send(Message(topic, b"untraced"))
    finally:
        await producer.shutdown()  # sends the queued trace
        await plain.shutdown()
    got: asyncio.Queue[MessageExt] = asyncio.Queue()

    async def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got.put_nowait(m)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AsyncPushConsumer(
        ns_addr,
        consumer_group="trace-cg",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_msg_trace=True,
        client=FAST,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        received = {(await asyncio.wait_for(got.get(), 30)).msg_id for _ in range(2)}
        assert received == {result.msg_id, untraced.msg_id}
    finally:
        await consumer.shutdown()
    return result.msg_id, untraced.msg_id


def test_trace_of_a_produced_and_consumed_message_by_key_and_by_id(
    cluster: tuple[ServerProcess, ServerProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    ns, broker = cluster
    topic, key = f"TraceT{uuid.uuid4().hex[:8]}", f"order-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[str, list[TraceView]]:
        async with AsyncAdmin(ns.addr) as admin:
            route = await admin.topic_route(TRACE_TOPIC)  # traceTopicEnable: created at start
            assert sum(q.write_queue_nums for q in route.queue_datas) == 1
            await admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
            msg_id, untraced_id = await _produce_and_consume(ns.addr, topic, key)
            complete = {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}
            views = await _eventually(
                lambda: query_trace(admin, msg_id),
                lambda vs: complete <= set(_types(vs)),
                f"the Pub, SubBefore and SubAfter records of {msg_id}",
            )
            assert await msg_ids_by_key(admin, topic, key) == [msg_id]
            by_key = await query_trace_by_key(admin, topic, key)
            assert list(by_key) == [msg_id]
            assert set(_types(by_key[msg_id])) == complete
            # the untraced producer wrote no Pub; the traced consumer traced its consumption
            untraced = await _eventually(
                lambda: query_trace(admin, untraced_id),
                lambda vs: TraceType.SubAfter in _types(vs),
                f"the consumer's records of the untraced {untraced_id}",
            )
            assert _types(untraced) == [TraceType.SubBefore, TraceType.SubAfter]
            return msg_id, views

    msg_id, views = asyncio.run(run())
    assert _types(views) == [TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter], views
    pub, before, after = views
    assert (pub.group_name, pub.topic, pub.msg_id, pub.keys, pub.tags) == (
        "trace-pg",
        topic,
        msg_id,
        key,
        "TagA",
    )
    assert pub.store_host == broker.addr
    assert pub.client_host.startswith(("127.", "1", "2", "9")) and ":" in pub.client_host
    assert pub.success and pub.msg_type is MessageType.Normal_Msg and pub.body_length == len(b"traced body")
    assert pub.offset_msg_id and pub.cost_time_ms >= 0
    assert (before.group_name, after.group_name) == ("trace-cg", "trace-cg")
    assert (before.topic, after.topic) == (topic, topic)  # from the Pub: consume lines carry none
    assert before.request_id == after.request_id and after.success and after.cost_time_ms >= 0
    assert 0 < pub.timestamp_ms <= before.timestamp_ms <= after.timestamp_ms

    assert mqadmin(["queryMsgTraceById", "-n", ns.addr, "-i", msg_id]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert [line[0] for line in lines] == ["#Type", "Pub", "SubBefore", "SubAfter"], out
    assert lines[1][1] == "trace-pg" and lines[1][3] == broker.addr and lines[1][-1] == "success", out
    assert lines[3][1] == "trace-cg" and lines[3][-1] == "success", out


def test_lite_pull_consumer_traces(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, _ = cluster
    topic, trace_topic = f"TraceL{uuid.uuid4().hex[:8]}", f"LiteTrace{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        async with AsyncAdmin(ns.addr) as admin:
            await admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1)
            async with AsyncProducer(ns.addr, producer_group="lite-src-pg") as producer:
                sent = await producer.send(Message(topic, b"pulled"))
            consumer = AsyncLitePullConsumer(
                ns.addr,
                consumer_group="trace-lite",
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                enable_msg_trace=True,
                custom_trace_topic=trace_topic,
            )
            consumer.subscribe(topic, "*")
            await consumer.start()
            try:
                deadline = time.monotonic() + 30
                polled: list[MessageExt] = []
                while not polled and time.monotonic() < deadline:
                    polled = await consumer.poll(500)
                assert [m.msg_id for m in polled] == [sent.msg_id]
            finally:
                await consumer.shutdown()
            views = await _eventually(
                lambda: query_trace(admin, sent.msg_id, trace_topic=trace_topic),
                lambda vs: len(vs) == 2,
                "the lite pull consumer's SubBefore and SubAfter",
            )
            assert [(v.trace_type, v.group_name, v.success) for v in views] == [
                (TraceType.SubBefore, "trace-lite", True),
                (TraceType.SubAfter, "trace-lite", True),
            ]

    asyncio.run(run())


def test_custom_trace_topic_batch_oneway_and_transaction(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, _ = cluster
    topic, trace_topic = f"TraceB{uuid.uuid4().hex[:8]}", f"MyTrace{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        producer = AsyncTransactionProducer(
            ns.addr, producer_group="trace-tx-pg", enable_msg_trace=True, custom_trace_topic=trace_topic
        )
        await producer.start()
        try:
            batch = await producer.send_batch(
                [Message(topic, f"b{i}".encode(), keys=f"k{i}") for i in range(3)]
            )
            batch_ids = batch[0].msg_id.split(",")
            await producer.send_oneway(Message(topic, b"oneway", keys="oneway-key"))
            tx = await producer.send_message_in_transaction(
                Message(topic, b"tx"), lambda _m, _a: LocalTransactionState.COMMIT_MESSAGE
            )
        finally:
            await producer.shutdown()
        async with AsyncAdmin(ns.addr) as admin:
            for i, msg_id in enumerate(batch_ids):
                views = await _eventually(
                    lambda m=msg_id: query_trace(admin, m, trace_topic=trace_topic),  # type: ignore[misc]
                    lambda vs: bool(vs),
                    f"the Pub of batch message {msg_id}",
                )
                assert _types(views) == [TraceType.Pub] and views[0].keys == f"k{i}" and views[0].success
            tx_views = await _eventually(
                lambda: query_trace(admin, tx.msg_id, trace_topic=trace_topic),
                lambda vs: len(vs) == 2,
                "the half message's Pub and its EndTransaction",
            )
            assert [(v.trace_type, v.msg_type) for v in tx_views] == [
                (TraceType.Pub, MessageType.Trans_Msg_Half),
                (TraceType.EndTransaction, MessageType.Trans_msg_Commit),
            ]
            assert tx_views[1].transaction_state is LocalTransactionState.COMMIT_MESSAGE
            assert await query_trace(admin, batch_ids[0]) == []  # not in the default trace topic
            # a trace message is keyed by the traced messages' keys too
            carriers = await admin.query_msg_by_key(trace_topic, "oneway-key")
            records = [r for c in carriers for r in decode_trace_data(c.body.decode())]
            assert [(r.trace_type, r.keys) for r in records if r.keys == "oneway-key"] == [
                (TraceType.Pub, "oneway-key")
            ]

    asyncio.run(run())


def test_a_trace_topic_the_broker_refuses_does_not_break_sends(
    cluster: tuple[ServerProcess, ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    ns, _ = cluster
    topic = f"TraceR{uuid.uuid4().hex[:8]}"

    def refusal_logged() -> bool:
        return any(
            "is forbidden" in r.getMessage() for r in caplog.records if r.name == "rocketq.client.trace"
        )

    async def run() -> None:
        # the broker refuses sends to its system topics (NO_PERMISSION)
        producer = AsyncProducer(
            ns.addr,
            producer_group="trace-refused-pg",
            enable_msg_trace=True,
            custom_trace_topic=SCHEDULE_TOPIC,
        )
        await producer.start()
        try:
            for i in range(5):
                result = await producer.send(Message(topic, f"m{i}".encode()))
                assert result.send_status is SendStatus.SEND_OK
            deadline = time.monotonic() + 30
            while not refusal_logged() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            await producer.shutdown()

    with caplog.at_level("WARNING", logger="rocketq.client.trace"):
        asyncio.run(run())
    assert refusal_logged(), "the trace dispatcher did not report the broker's refusal"


@pytest.mark.spark
def test_spark_sink_and_source_with_enable_msg_trace(
    spark_session: Any, cluster: tuple[ServerProcess, ServerProcess]
) -> None:
    ns, broker = cluster
    topic, key = f"TraceS{uuid.uuid4().hex[:8]}", f"sink-{uuid.uuid4().hex[:8]}"
    rows = [(f"row{i}", [f"{key}-{i}"]) for i in range(3)]
    df = spark_session.createDataFrame(rows, "body string, keys array<string>")
    df.write.format("rocketmq").option("nameServer", ns.addr).option("topic", topic).option(
        "enableMsgTrace", "true"
    ).mode("append").save()
    read = (
        spark_session.read.format("rocketmq")
        .option("nameServer", ns.addr)
        .option("topic", topic)
        .option("group", "trace-spark-src")
        .option("enableMsgTrace", "true")
        .load()
    )
    assert sorted(r.body for r in read.collect()) == [b"row0", b"row1", b"row2"]

    async def run() -> None:
        async with AsyncAdmin(ns.addr) as admin:
            for i in range(3):
                (msg_id,) = await msg_ids_by_key(admin, topic, f"{key}-{i}")
                views = await _eventually(
                    lambda m=msg_id: query_trace(admin, m),  # type: ignore[misc]
                    lambda vs: len(vs) == 3,
                    f"the sink's Pub and the source's SubBefore/SubAfter of {msg_id}",
                )
                pub, before, after = views
                assert (pub.trace_type, pub.keys, pub.store_host) == (
                    TraceType.Pub,
                    f"{key}-{i}",
                    broker.addr,
                )
                assert pub.group_name == "spark-rocketmq-sink" and pub.success
                assert [(v.trace_type, v.group_name, v.keys) for v in (before, after)] == [
                    (TraceType.SubBefore, "trace-spark-src", f"{key}-{i}"),
                    (TraceType.SubAfter, "trace-spark-src", f"{key}-{i}"),
                ]
                assert after.success and before.request_id == after.request_id

    asyncio.run(run())
