"""Blocking consumers: LitePullConsumer and PushConsumer over the asyncio implementations.

Each method runs the matching coroutine of :class:`AsyncLitePullConsumer` /
:class:`AsyncPushConsumer` on the process's background event-loop thread
(:mod:`rocketq.client.loop`).  A PushConsumer's listener is a plain function; it runs in the
consumer's pool of ``consume_thread_nums`` threads, never on the loop thread.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, Generic, Self, TypeVar

from rocketq.client.blocking_facade import blocking_method
from rocketq.client.config import ConsumerConfig
from rocketq.client.consumer.allocate import AllocateFn
from rocketq.client.consumer.listener import MessageListenerConcurrently, MessageListenerOrderly
from rocketq.client.consumer.lite_pull import AsyncLitePullConsumer
from rocketq.client.consumer.push import AsyncPushConsumer
from rocketq.client.consumer.subscription import SUB_ALL, Subscribable
from rocketq.client.loop import BackgroundLoop, acquire_loop, release_loop
from rocketq.client.remoting.route import MessageQueue

__all__ = ["LitePullConsumer", "PushConsumer"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound=AsyncLitePullConsumer | AsyncPushConsumer)


class _Blocking(Generic[_C]):
    """What both blocking consumers share: building the asyncio consumer ``_C`` on the loop,
    ``subscribe``, ``start``, ``shutdown`` and the context manager."""

    _loop: BackgroundLoop
    _released: bool
    _consumer: _C
    _async_class: type[_C]

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        self._consumer = self._make(self._async_class, namesrv_addr, config, allocate=allocate, **settings)

    @property
    def config(self) -> ConsumerConfig:
        return self._consumer.config

    @property
    def async_consumer(self) -> _C:
        """The underlying asyncio consumer (lives on the background loop)."""
        return self._consumer

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"TagA || TagB"``) or a
        :class:`MessageSelector` (``MessageSelector.by_sql("a > 5")``); a string that cannot be a
        tag expression raises MQClientError."""

        async def run() -> None:
            self._consumer.subscribe(topic, expression)

        self._run(run())

    def start(self) -> None:
        self._run(self._consumer.start())

    def shutdown(self) -> None:
        if self._released:
            return
        try:
            self._run(self._consumer.shutdown(), 60.0)
        finally:
            self._release()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

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


class LitePullConsumer(_Blocking[AsyncLitePullConsumer]):
    """Blocking lite-pull consumer: ``subscribe``/``assign``, ``start``, ``poll`` /
    ``poll_batch``, ``seek``, ``commit``."""

    _async_class = AsyncLitePullConsumer

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        self._run(self._consumer.assign(list(mqs)))

    # The blocking twins of AsyncLitePullConsumer's methods: same parameters, same docstrings.
    poll = blocking_method(AsyncLitePullConsumer.poll, "_consumer")
    poll_batch = blocking_method(AsyncLitePullConsumer.poll_batch, "_consumer")
    seek = blocking_method(AsyncLitePullConsumer.seek, "_consumer")
    seek_to_begin = blocking_method(AsyncLitePullConsumer.seek_to_begin, "_consumer")
    seek_to_end = blocking_method(AsyncLitePullConsumer.seek_to_end, "_consumer")
    offset_for_timestamp = blocking_method(AsyncLitePullConsumer.offset_for_timestamp, "_consumer")
    commit = blocking_method(AsyncLitePullConsumer.commit, "_consumer")
    committed = blocking_method(AsyncLitePullConsumer.committed, "_consumer")
    fetch_message_queues = blocking_method(AsyncLitePullConsumer.fetch_message_queues, "_consumer")
    pull = blocking_method(AsyncLitePullConsumer.pull, "_consumer")

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


class PushConsumer(_Blocking[AsyncPushConsumer]):
    """Blocking push consumer: ``subscribe``, ``register_message_listener[_orderly]``, ``start``,
    ``shutdown``.  Listeners are plain functions run in the consume thread pool."""

    _async_class = AsyncPushConsumer

    def register_message_listener(self, listener: MessageListenerConcurrently) -> None:
        self._consumer.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        self._consumer.register_message_listener_orderly(listener)
