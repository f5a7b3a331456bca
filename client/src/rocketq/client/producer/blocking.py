"""Producer: the blocking producer, a thin facade over AsyncProducer on the background loop.

Every method submits the matching coroutine of :class:`~rocketq.client.producer.core.AsyncProducer`
to the process's client event-loop thread (:mod:`rocketq.client.loop`) and waits for it, so the
blocking and asyncio producers share one implementation.  ``send_async`` returns a
``concurrent.futures.Future``; its callbacks run on the loop thread, so keep them short.
(``TransactionProducer`` will subclass this with the two-phase send.)
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any

from rocketq.client.config import ProducerConfig
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.model import Message, SendResult
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.producer.selector import MessageQueueSelector
from rocketq.client.remoting.route import MessageQueue

__all__ = ["Producer"]


class Producer:
    """Blocking producer: ``start()``, ``send()``, ``send_oneway()``, ``send_async()``,
    ``send_batch()``, ``shutdown()``; also a context manager."""

    def __init__(
        self, namesrv_addr: str | Sequence[str], config: ProducerConfig | None = None, **settings: Any
    ) -> None:
        self._namesrv_addr = namesrv_addr
        self._loop = acquire_loop()

        async def make() -> AsyncProducer:
            return AsyncProducer(namesrv_addr, config, **settings)

        try:
            self._producer = self._loop.run(make())
        except BaseException:
            release_loop(self._loop)
            raise
        self._released = False

    @property
    def config(self) -> ProducerConfig:
        return self._producer.config

    @property
    def async_producer(self) -> AsyncProducer:
        """The underlying asyncio producer (lives on the background loop)."""
        return self._producer

    def start(self) -> None:
        self._loop.run(self._producer.start())

    def shutdown(self) -> None:
        if self._released:
            return
        try:
            self._loop.run(self._producer.shutdown(), 30.0)
        finally:
            self._released = True
            release_loop(self._loop)

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        return self._loop.run(
            self._producer.send(msg, queue=queue, selector=selector, arg=arg, timeout_ms=timeout_ms)
        )

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        self._loop.run(self._producer.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Send in the background; ``callback(result, exception)`` runs when it finishes."""

        async def run() -> SendResult:
            return await self._producer.send_async(
                msg, queue=queue, selector=selector, arg=arg, timeout_ms=timeout_ms
            )

        future = self._loop.submit(run())
        if callback is not None:

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                exc = f.exception() if not f.cancelled() else concurrent.futures.CancelledError()
                callback(None if exc else f.result(), exc)

            future.add_done_callback(done)
        return future

    def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        return self._loop.run(self._producer.send_batch(msgs, queue=queue, timeout_ms=timeout_ms))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop.run(self._producer.fetch_publish_message_queues(topic))
