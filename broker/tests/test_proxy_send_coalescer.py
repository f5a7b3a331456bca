"""The proxy's send coalescing (rocketq.proxy.send_coalescer) against an in-memory producer.

Concurrent plain sends to one topic leave as one batch and each caller gets its own id and
offset; a lone send leaves at once as a plain send; FIFO and timer messages keep their own sends;
a failed batch fails each of its callers; the size limits split the queue; a cancelled caller
leaves the others unharmed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rocketq.client.errors import MQBrokerError
from rocketq.client.model import Message, MessageQueue, SendResult, SendStatus
from rocketq.client.producer import AsyncProducer
from rocketq.proxy.send_coalescer import SendCoalescer


class FakeProducer:
    """Records what is sent; ``gate`` holds every send until set; ``fail`` makes sends raise."""

    def __init__(self) -> None:
        self.sends: list[str] = []
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None
        self.offset = 100

    def _result(self, ids: Sequence[str]) -> SendResult:
        first, self.offset = self.offset, self.offset + len(ids)
        return SendResult(
            send_status=SendStatus.SEND_OK,
            msg_id=",".join(ids),
            offset_msg_id=",".join(f"off-{i}" for i in ids),
            message_queue=MessageQueue("T", "broker-a", 3),
            queue_offset=first,
        )

    async def send(self, message: Message) -> SendResult:
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.sends.append(message.properties["UNIQ_KEY"])
        return self._result([message.properties["UNIQ_KEY"]])

    async def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        ids = [m.properties["UNIQ_KEY"] for m in messages]
        self.batches.append(ids)
        return [self._result(ids)]


def _message(i: int, **kw: object) -> Message:
    return Message("T", b"x" * 10, properties={"UNIQ_KEY": f"id-{i}"}, **kw)  # type: ignore[arg-type]


def _coalescer(producer: FakeProducer, **kw: int) -> SendCoalescer:
    return SendCoalescer(producer, **kw)  # type: ignore[arg-type]  # the fake has send and send_batch


def test_concurrent_sends_leave_as_one_batch_and_each_caller_gets_its_id_and_offset() -> None:
    async def run() -> None:
        producer = FakeProducer()
        sends = _coalescer(producer)
        results = await asyncio.gather(*(sends.send(_message(i)) for i in range(10)))
        assert producer.batches == [[f"id-{i}" for i in range(10)]] and producer.sends == []
        assert [r.msg_id for r in results] == [f"id-{i}" for i in range(10)]
        assert [r.offset_msg_id for r in results] == [f"off-id-{i}" for i in range(10)]
        assert [r.queue_offset for r in results] == list(range(100, 110))
        lone = await sends.send(_message(99))  # nothing in flight: a plain send, at once
        assert (lone.msg_id, producer.sends) == ("id-99", ["id-99"])

    asyncio.run(run())


def test_sends_queue_only_while_earlier_ones_are_in_flight() -> None:
    async def run() -> None:
        producer = FakeProducer()
        producer.gate.clear()
        sends = _coalescer(producer, max_in_flight=1)
        first = asyncio.create_task(sends.send(_message(0)))
        await asyncio.sleep(0)  # the first leaves alone and waits for its answer
        rest = [asyncio.create_task(sends.send(_message(i))) for i in range(1, 6)]
        await asyncio.sleep(0)
        producer.gate.set()
        await asyncio.gather(first, *rest)
        assert producer.sends == ["id-0"]
        assert producer.batches == [[f"id-{i}" for i in range(1, 6)]]

    asyncio.run(run())


def test_fifo_and_timer_messages_keep_their_own_sends() -> None:
    async def run() -> None:
        producer = FakeProducer()
        sends = _coalescer(producer)
        await asyncio.gather(
            sends.send(_message(0, message_group="g")),
            sends.send(_message(1, message_group="g")),
            sends.send(_message(2, deliver_at=2_000_000_000_000)),
            sends.send(_message(3, delay_time_level=2)),
        )
        assert sorted(producer.sends) == ["id-0", "id-1", "id-2", "id-3"] and producer.batches == []

    asyncio.run(run())


def test_a_failed_batch_fails_each_of_its_callers() -> None:
    async def run() -> None:
        producer = FakeProducer()
        producer.fail = MQBrokerError.for_code(14, "system busy", "127.0.0.1:10911")
        sends = _coalescer(producer)
        outcomes = await asyncio.gather(*(sends.send(_message(i)) for i in range(5)), return_exceptions=True)
        assert all(isinstance(o, MQBrokerError) and o.code == 14 for o in outcomes), outcomes
        producer.fail = None
        assert (await sends.send(_message(9))).msg_id == "id-9"  # the topic keeps working

    asyncio.run(run())


@pytest.mark.parametrize(
    ("limits", "expected"), [({"max_messages": 4}, [4, 4, 2]), ({"max_bytes": 35}, [3, 3, 3, 1])]
)
def test_the_limits_split_the_queue(limits: dict[str, int], expected: list[int]) -> None:
    async def run() -> None:
        producer = FakeProducer()
        sends = _coalescer(producer, max_in_flight=1, **limits)
        results = await asyncio.gather(*(sends.send(_message(i)) for i in range(10)))
        sizes = [len(b) for b in producer.batches] + [1] * len(producer.sends)
        assert sorted(sizes, reverse=True) == sorted(expected, reverse=True)
        assert [r.msg_id for r in results] == [f"id-{i}" for i in range(10)]

    asyncio.run(run())


def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    async def run() -> None:
        producer = FakeProducer()
        producer.gate.clear()
        sends = _coalescer(producer)
        calls = [asyncio.create_task(sends.send(_message(i))) for i in range(4)]
        await asyncio.sleep(0)
        calls[1].cancel()
        producer.gate.set()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(outcomes[1], asyncio.CancelledError)
        assert [o.msg_id for i, o in enumerate(outcomes) if i != 1] == ["id-0", "id-2", "id-3"]  # type: ignore[union-attr]

    asyncio.run(run())


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        SendCoalescer(AsyncProducer("127.0.0.1:9876"), max_in_flight=0)
