"""Concurrent SDK sends to one topic leave the proxy as one SEND_BATCH_MESSAGE.

Theory of operation.  The 5.x SDKs put one message in each SendMessage call, so a proxy that
forwards each as its own SEND_MESSAGE pays a remoting request, a socket write and a broker
request per message; on loopback the write alone was the largest item of the proxy's profile.
:class:`SendCoalescer` is group commit for sends: a plain message (no message group, no delivery
time, no delay level) joins its topic's queue, and while fewer than ``max_in_flight`` sends of
that topic are on their way, a sender takes what is queued (up to ``max_messages`` and
``max_bytes`` of bodies) and sends it, one message as a plain send, more as one batch.  Nothing
waits for a timer: a lone send leaves at once, and messages queue only while earlier sends of
their topic are in flight, which is when batching pays.  Every caller gets its own SendResult:
its UNIQ_KEY as ``msg_id`` and the batch's first queue offset plus its index (a batch is stored
in one queue, consecutively).  A failed send fails every message it carried: each SDK call gets
the error and retries its own message, as after a failed single send.  FIFO, delay and
transactional messages keep their own sends (their queue or properties are their own).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Sequence

from rocketq.client.model import Message, SendResult
from rocketq.client.producer import AsyncProducer

__all__ = ["SendCoalescer"]

_Pending = tuple[Message, "asyncio.Future[SendResult]"]


class _Topic:
    __slots__ = ("in_flight", "queue")

    def __init__(self) -> None:
        self.queue: deque[_Pending] = deque()
        self.in_flight = 0


class SendCoalescer:
    """``await send(message)`` as ``AsyncProducer.send``, batching concurrent sends per topic."""

    def __init__(
        self,
        producer: AsyncProducer,
        *,
        max_in_flight: int = 2,
        max_messages: int = 64,
        max_bytes: int = 1024 * 1024,
    ) -> None:
        if max_in_flight < 1 or max_messages < 1 or max_bytes < 1:
            raise ValueError("max_in_flight, max_messages and max_bytes must be positive")
        self.producer = producer
        self.max_in_flight = max_in_flight
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._topics: dict[str, _Topic] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, message: Message) -> SendResult:
        if message.sharding_key or message.deliver_at is not None or message.delay_time_level:
            return await self.producer.send(message)
        topic = self._topics.get(message.topic)
        if topic is None:
            topic = self._topics[message.topic] = _Topic()
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        topic.queue.append((message, future))
        if topic.in_flight < self.max_in_flight:
            topic.in_flight += 1
            task = asyncio.create_task(self._drain(topic))
            self._tasks.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self, topic: _Topic) -> None:
        try:
            while topic.queue:
                taken = self._take(topic.queue)
                try:
                    results = await self._send(taken)
                except Exception as exc:  # every caller sees its send's failure
                    for _, future in taken:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                except BaseException:  # cancelled (the proxy stops): so are the calls waiting
                    for _, future in taken:
                        future.cancel()
                    raise
                for (_, future), result in zip(taken, results, strict=True):
                    if not future.done():  # a cancelled gRPC call
                        future.set_result(result)
        finally:
            topic.in_flight -= 1
            if topic.in_flight == 0:  # only after a cancellation can messages be left behind
                while topic.queue:
                    topic.queue.popleft()[1].cancel()

    def _take(self, queue: deque[_Pending]) -> list[_Pending]:
        taken = [queue.popleft()]
        size = len(taken[0][0].body)
        while queue and len(taken) < self.max_messages:
            size += len(queue[0][0].body)
            if size > self.max_bytes:
                break
            taken.append(queue.popleft())
        return taken

    async def _send(self, taken: Sequence[_Pending]) -> list[SendResult]:
        if len(taken) == 1:
            return [await self.producer.send(taken[0][0])]
        answers = await self.producer.send_batch([message for message, _ in taken])
        results: list[SendResult] = []
        for answer in answers:  # one per request (a batch over maxMessageSize is split)
            ids = answer.msg_id.split(",")
            offset_ids = answer.offset_msg_id.split(",")
            for i, msg_id in enumerate(ids):
                results.append(
                    dataclasses.replace(
                        answer,
                        msg_id=msg_id,
                        offset_msg_id=offset_ids[i] if len(offset_ids) == len(ids) else answer.offset_msg_id,
                        queue_offset=answer.queue_offset + i,
                    )
                )
        if len(results) != len(taken):
            raise RuntimeError(f"a batch of {len(taken)} messages was answered for {len(results)}")
        return results
