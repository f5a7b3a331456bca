"""TraceDispatcher and the trace hooks without a broker: bounded, non-blocking queueing, drops
counted and logged, packing into size-bounded trace messages keyed by msgId and keys, failed
trace sends that never reach the traced client, and the Pub records of an encoded batch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from rocketq.client.config import ClientConfig, ConsumerConfig, ProducerConfig
from rocketq.client.errors import ClientError, MQBrokerError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import Message, SendResult, SendStatus
from rocketq.client.producer.core import trace_sender
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.trace.codec import decode_trace_data
from rocketq.client.trace.dispatcher import CONSUME_TRACE, TraceDispatcher
from rocketq.client.trace.hooks import ProducerTracer, consume_outcome
from rocketq.client.trace.model import ConsumeReturnType, MessageType, TraceRecord, TraceType


def _record(i: int, keys: str | None = None) -> TraceRecord:
    return TraceRecord(trace_type=TraceType.Pub, msg_id=f"ID{i:04d}", keys=keys, topic="T", group_name="pg")


class FakeBroker:
    """Collects trace messages; ``gate`` holds every send until it is set (a slow broker)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.sent: list[Message] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = fail

    async def start(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def send(self, msg: Message) -> object:
        await self.gate.wait()
        if self.fail:
            raise MQBrokerError.for_code(16, "Sending message to topic[T] is forbidden.", "127.0.0.1:1")
        self.sent.append(msg)
        return None

    def records(self) -> list[TraceRecord]:
        return [r for m in self.sent for r in decode_trace_data(m.body.decode())]


def _dispatcher(broker: FakeBroker, **kwargs: Any) -> TraceDispatcher:
    return TraceDispatcher(broker, trace_topic="TRACE_T", owner_group="pg", kind="PRODUCE", **kwargs)


def _run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_full_queue_drops_without_waiting_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    broker = FakeBroker()

    async def scenario() -> None:
        d = _dispatcher(broker, queue_size=10, batch_size=5)
        await d.start()
        broker.gate.clear()  # the broker stops answering
        assert d.append([_record(i) for i in range(5)])
        await asyncio.sleep(0)  # the sender takes these 5 and waits for the broker
        assert d.append([_record(i) for i in range(5, 15)])
        assert not d.append([_record(15), _record(16)])  # full: dropped at once, no waiting
        assert d.dropped == 2
        broker.gate.set()
        await d.shutdown()
        assert [r.msg_id for r in broker.records()] == [f"ID{i:04d}" for i in range(15)]
        assert d.sent_records == 15 and d.sent_messages == 3  # batches of batch_size records

    with caplog.at_level("WARNING", logger="rocketq.client.trace"):
        _run(scenario)
    assert any(
        "dropped 2 trace records" in r.getMessage() and "full" in r.getMessage() for r in caplog.records
    )


def test_trace_messages_are_size_bounded_and_keyed_by_msg_id_and_keys() -> None:
    broker = FakeBroker()

    async def scenario() -> None:
        d = _dispatcher(broker, max_msg_size=200)
        await d.start()
        d.append([_record(i, keys=f"order-{i}") for i in range(10)])
        await d.shutdown()

    _run(scenario)
    assert len(broker.sent) > 1 and all(len(m.body) <= 200 for m in broker.sent)
    assert [r.msg_id for r in broker.records()] == [f"ID{i:04d}" for i in range(10)]
    for m in broker.sent:
        assert m.topic == "TRACE_T"
        ids = [r.msg_id for r in decode_trace_data(m.body.decode())]
        assert m.keys == [k for i in ids for k in (i, f"order-{int(i[2:])}")]


def test_failed_trace_sends_are_counted_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    broker = FakeBroker(fail=True)

    async def scenario() -> None:
        d = _dispatcher(broker)
        await d.start()
        assert d.append([_record(1)])
        await asyncio.sleep(0.05)
        assert d.append([_record(2)])  # still accepting
        await d.shutdown()
        assert d.send_failures >= 1 and d.sent_messages == 0

    with caplog.at_level("WARNING", logger="rocketq.client.trace"):
        _run(scenario)
    assert any("is forbidden" in r.getMessage() for r in caplog.records)


def test_records_appended_before_start_or_after_shutdown_are_dropped() -> None:
    broker = FakeBroker()

    async def scenario() -> None:
        d = _dispatcher(broker)
        assert not d.append([_record(1)])
        await d.start()
        await d.shutdown()
        assert not d.append([_record(2)])
        assert d.dropped == 2

    _run(scenario)
    assert broker.sent == []


def test_pub_records_of_an_encoded_batch() -> None:
    broker = FakeBroker()
    props = [{"UNIQ_KEY": f"U{i}", "KEYS": f"k{i}", "TAGS": "t", "WAIT": "true"} for i in range(3)]
    body = encode_batch([(0, f"body-{i}".encode(), p) for i, p in enumerate(props)])
    mq = MessageQueue("T", "broker-a", 0)
    result = SendResult(SendStatus.SEND_OK, "U0,U1,U2", "O0,O1,O2", mq, 7)

    async def scenario() -> None:
        tracer = ProducerTracer(_dispatcher(broker), "pg")
        await tracer.start()
        tracer.on_batch("T", body, result, "127.0.0.1:10911", 1000, prepared=True)
        tracer.on_batch("TRACE_T", body, result, "127.0.0.1:10911", 1000, prepared=False)  # not traced
        tracer.on_batch("T", b"garbage", result, "127.0.0.1:10911", 1000, prepared=False)  # logged, skipped
        await tracer.shutdown()

    _run(scenario)
    records = broker.records()
    assert [(r.msg_id, r.keys, r.offset_msg_id, r.body_length) for r in records] == [
        (f"U{i}", f"k{i}", f"O{i}", 6) for i in range(3)
    ]
    assert {(r.trace_type, r.msg_type, r.store_host, r.success) for r in records} == {
        (TraceType.Pub, MessageType.Trans_Msg_Half, "127.0.0.1:10911", True)
    }


def test_consume_outcomes() -> None:
    assert consume_outcome("CONSUME_SUCCESS", True, False) is ConsumeReturnType.SUCCESS
    assert consume_outcome("RECONSUME_LATER", False, False) is ConsumeReturnType.FAILED
    assert consume_outcome(None, False, False) is ConsumeReturnType.RETURNNULL
    assert consume_outcome("RECONSUME_LATER", False, True) is ConsumeReturnType.EXCEPTION


def test_trace_settings_take_java_names_and_check_the_topic() -> None:
    cfg = ProducerConfig.from_properties({"enableMsgTrace": "true", "customizedTraceTopic": "MyTrace"})
    assert (cfg.enable_msg_trace, cfg.custom_trace_topic) == (True, "MyTrace")
    consumer = ConsumerConfig.from_properties({"consumerGroup": "cg", "enableMsgTrace": "true"})
    assert (consumer.enable_msg_trace, consumer.custom_trace_topic) == (True, None)
    assert ProducerConfig().enable_msg_trace is False
    with pytest.raises(ClientError, match="custom_trace_topic 'bad topic'"):
        ProducerConfig(custom_trace_topic="bad topic")


def test_the_dispatcher_starts_and_stops_its_sender() -> None:
    calls: list[str] = []

    class Sender(FakeBroker):
        async def start(self) -> None:
            calls.append("start")

        async def shutdown(self) -> None:
            calls.append("shutdown")

    broker = Sender()

    async def scenario() -> None:
        d = _dispatcher(broker)
        await d.start()
        d.append([_record(1)])
        await d.shutdown()

    _run(scenario)
    assert calls == ["start", "shutdown"] and len(broker.sent) == 1


def test_the_inner_trace_producer_shares_the_traced_clients_settings() -> None:
    client = ClientConfig(access_key="ak", secret_key="sk")
    instance = ClientInstance("127.0.0.1:1", config=client)
    sender = trace_sender("127.0.0.1:1", instance, "cg", CONSUME_TRACE)
    assert sender.instance is instance
    assert sender.group == "_INNER_TRACE_PRODUCER-cg-CONSUME"
    assert sender.config.client == client and sender.config.enable_msg_trace is False
    assert sender.config.max_message_size == 4 * 1024 * 1024
