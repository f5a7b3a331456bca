"""Blocking consumers: LitePullConsumer and PushConsumer over the asyncio implementations.

Each method runs the matching coroutine of :class:`AsyncLitePullConsumer` /
:class:`AsyncPushConsumer` on the process's background event-loop thread
(:mod:`rocketq.client.loop`).  A PushConsumer's listener is a plain function; it runs in the
consumer's pool of ``consume_thread_nums`` threads, never on the loop thread.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from rocketq.client.config import ConsumerConfig
from rocketq.client.consumer.allocate import AllocateFn
from rocketq.client.consumer.listener import MessageListenerConcurrently, MessageListenerOrderly
from rocketq.client.consumer.lite_pull import AsyncLitePullConsumer
from rocketq.client.consumer.push import AsyncPushConsumer
from rocketq.client.loop import BackgroundLoop, acquire_loop, release_loop
from rocketq.client.model import MessageExt, PullResult
from rocketq.client.remoting.route import MessageQueue

__all__ = ["LitePullConsumer", "PushConsumer"]

_T = TypeVar("_T")


class _Blocking:
    _loop: BackgroundLoop
    _released: bool
    _consumer: AsyncLitePullConsumer | AsyncPushConsumer

    @property
    def config(self) -> ConsumerConfig:
        return self._consumer.config

    def subscribe(self, topic: str, expression: str | None = "*") -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"TagA || TagB"``)."""

        async def run() -> None:
            self._consumer.subscribe(topic, expression)

        self._run(run())

    def _make(self, factory: Any, *args: Any, **kwargs: Any) -> Any:
        self._loop = acquire_loop()
        self._released = False

        async def make() -> Any:
            return factory(*args, **kwargs)

        try:
            return self._loop.run(make())
        except BaseException:
            release_loop(self._loop)
            raise

    def _run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        return self._loop.run(coro, timeout_s)

    def _release(self) -> None:
        if not self._released:
            self._released = True
            release_loop(self._loop)


class LitePullConsumer(_Blocking):
    """Blocking lite-pull consumer: ``subscribe``/``assign``, ``start``, ``poll``, ``seek``, ``commit``."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        self._consumer: AsyncLitePullConsumer = self._make(
            AsyncLitePullConsumer, namesrv_addr, config, allocate=allocate, **settings
        )

    @property
    def async_consumer(self) -> AsyncLitePullConsumer:
        return self._consumer

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        self._run(self._consumer.assign(list(mqs)))

    def start(self) -> None:
        self._run(self._consumer.start())

    def shutdown(self) -> None:
        if self._released:
            return
        try:
            self._run(self._consumer.shutdown(), 60.0)
        finally:
            self._release()

    def __enter__(self) -> LitePullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return self._run(self._consumer.poll(timeout_ms))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._consumer.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._consumer.offset_for_timestamp(mq, timestamp_ms))

    def commit(self, offsets: dict[MessageQueue, int] | None = None, *, persist: bool = True) -> None:
        self._run(self._consumer.commit(offsets, persist=persist))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self._consumer.committed(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        items = list(mqs)

        async def run() -> None:
            self._consumer.pause(items)

        self._run(run())

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        items = list(mqs)

        async def run() -> None:
            self._consumer.resume(items)

        self._run(run())

    def assignment(self) -> set[MessageQueue]:
        async def run() -> set[MessageQueue]:
            return self._consumer.assignment()

        return self._run(run())

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return self._run(self._consumer.fetch_message_queues(topic))

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str | None = "*",
        block: bool = False,
    ) -> PullResult:
        return self._run(self._consumer.pull(mq, offset, max_nums, expression=expression, block=block))


class PushConsumer(_Blocking):
    """Blocking push consumer: ``subscribe``, ``register_message_listener[_orderly]``, ``start``,
    ``shutdown``.  Listeners are plain functions run in the consume thread pool."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        self._consumer: AsyncPushConsumer = self._make(
            AsyncPushConsumer, namesrv_addr, config, allocate=allocate, **settings
        )

    @property
    def async_consumer(self) -> AsyncPushConsumer:
        return self._consumer

    def register_message_listener(self, listener: MessageListenerConcurrently) -> None:
        self._consumer.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        self._consumer.register_message_listener_orderly(listener)

    def start(self) -> None:
        self._run(self._consumer.start())

    def shutdown(self) -> None:
        if self._released:
            return
        try:
            self._run(self._consumer.shutdown(), 60.0)
        finally:
            self._release()

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
