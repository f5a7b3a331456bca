"""Producer: the blocking producer, a thin facade over AsyncProducer on the background loop.

Every method submits the matching coroutine of :class:`~rocketq.client.producer.core.AsyncProducer`
to the process's client event-loop thread (:mod:`rocketq.client.loop`) and waits for it, so the
blocking and asyncio producers share one implementation.  ``send_async`` returns a
``concurrent.futures.Future``; its callbacks run on the loop thread, so keep them short.

:class:`TransactionProducer` adds the two-phase send of
:class:`~rocketq.client.producer.transaction.AsyncTransactionProducer`, step by step: the half
message is sent and the transaction ended on the loop, while the local transaction runs in the
caller's thread (as Java runs it), so thread-bound resources such as a database session work.
Check-backs run in the async producer's check thread pool.  It also offers the batched
transactions of :mod:`~rocketq.client.producer.transaction_batch` (``send_half_batch``,
``end_transaction_batch``).
"""

from __future__ import annotations

import concurrent.futures
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from rocketq.client.blocking_facade import blocking_method
from rocketq.client.config import ProducerConfig
from rocketq.client.errors import MQClientError
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.model import LocalTransactionState, Message, SendResult, SendStatus, TransactionSendResult
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.producer.selector import MessageQueueSelector
from rocketq.client.producer.transaction import (
    DEFAULT_CHECK_REQUEST_HOLD_MAX,
    AsyncTransactionProducer,
    CheckListener,
    LocalTransaction,
    TransactionListener,
    run_local_transaction,
)
from rocketq.client.producer.transaction_batch import HalfBatchResult, PreparedHalfBatch
from rocketq.client.remoting.route import MessageQueue

__all__ = ["Producer", "TransactionProducer"]


class Producer:
    """Blocking producer: ``start()``, ``send()``, ``send_oneway()``, ``send_async()``,
    ``send_batch()``, ``send_encoded_batch()``, ``shutdown()``; also a context manager."""

    def __init__(
        self, namesrv_addr: str | Sequence[str], config: ProducerConfig | None = None, **settings: Any
    ) -> None:
        self._namesrv_addr = namesrv_addr
        self._loop = acquire_loop()

        async def make() -> AsyncProducer:
            return self._new_async_producer(namesrv_addr, config, settings)

        try:
            self._producer = self._loop.run(make())
        except BaseException:
            release_loop(self._loop)
            raise
        self._released = False

    def _new_async_producer(
        self, namesrv_addr: str | Sequence[str], config: ProducerConfig | None, settings: dict[str, Any]
    ) -> AsyncProducer:
        """Build the asyncio twin (runs on the loop thread); subclasses build their own kind."""
        return AsyncProducer(namesrv_addr, config, **settings)

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

    # The blocking twins of AsyncProducer's methods: same parameters, same docstrings.
    send = blocking_method(AsyncProducer.send, "_producer")
    send_oneway = blocking_method(AsyncProducer.send_oneway, "_producer")
    recall = blocking_method(AsyncProducer.recall, "_producer")
    send_batch = blocking_method(AsyncProducer.send_batch, "_producer")
    send_encoded_batch = blocking_method(AsyncProducer.send_encoded_batch, "_producer")
    fetch_publish_message_queues = blocking_method(AsyncProducer.fetch_publish_message_queues, "_producer")

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


class TransactionProducer(Producer):
    """Blocking transactional producer (Java's TransactionMQProducer); see AsyncTransactionProducer.

    ``send_message_in_transaction(msg, local_transaction, arg)`` runs ``local_transaction`` in the
    calling thread; ``check_listener`` (or ``transaction_listener.check_local_transaction``) runs in
    a pool of ``check_thread_pool_max_size`` threads when a broker checks a transaction back.
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ProducerConfig | None = None,
        *,
        transaction_listener: TransactionListener | None = None,
        check_listener: CheckListener | None = None,
        check_thread_pool_min_size: int = 1,
        check_thread_pool_max_size: int = 1,
        check_request_hold_max: int = DEFAULT_CHECK_REQUEST_HOLD_MAX,
        **settings: Any,
    ) -> None:
        self._tx_options: dict[str, Any] = {
            "transaction_listener": transaction_listener,
            "check_listener": check_listener,
            "check_thread_pool_min_size": check_thread_pool_min_size,
            "check_thread_pool_max_size": check_thread_pool_max_size,
            "check_request_hold_max": check_request_hold_max,
        }
        super().__init__(namesrv_addr, config, **settings)

    def _new_async_producer(
        self, namesrv_addr: str | Sequence[str], config: ProducerConfig | None, settings: dict[str, Any]
    ) -> AsyncProducer:
        return AsyncTransactionProducer(namesrv_addr, config, **self._tx_options, **settings)

    @property
    def async_producer(self) -> AsyncTransactionProducer:
        producer = self._producer
        assert isinstance(producer, AsyncTransactionProducer)
        return producer

    def __enter__(self) -> TransactionProducer:
        self.start()
        return self

    def send_message_in_transaction(
        self,
        msg: Message,
        local_transaction: LocalTransaction | None = None,
        arg: Any = None,
        *,
        timeout_ms: int | None = None,
    ) -> TransactionSendResult:
        """Send a half message, run ``local_transaction(msg, arg)`` here, end the transaction.

        The function returns a LocalTransactionState (None or an exception = UNKNOW: the broker
        checks back later).  Raises when the half message cannot be sent.
        """
        producer = self.async_producer
        fn = producer.local_transaction_of(local_transaction)
        if inspect.iscoroutinefunction(fn):
            raise MQClientError("a coroutine local transaction needs AsyncTransactionProducer")
        half, result = self._loop.run(producer.send_half_message(msg, timeout_ms=timeout_ms))
        if result.send_status is SendStatus.SEND_OK:
            state, error = run_local_transaction(fn, half, arg)
        else:
            state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        return self._loop.run(producer.end_transaction(half, result, state, error))

    def send_half_batch(
        self,
        mq: MessageQueue,
        batch: Sequence[Message] | PreparedHalfBatch,
        *,
        timeout_ms: int | None = None,
    ) -> HalfBatchResult:
        """Store ``batch`` (messages, or a :class:`PreparedHalfBatch`) as half messages of ``mq``
        (see AsyncTransactionProducer.send_half_batch)."""
        return self._loop.run(self.async_producer.send_half_batch(mq, batch, timeout_ms=timeout_ms))

    def end_transaction_batch(
        self,
        handles: Sequence[HalfBatchResult],
        state: LocalTransactionState,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit or roll back the half messages of ``handles`` (one ranged request per queue)."""
        self._loop.run(self.async_producer.end_transaction_batch(handles, state, timeout_ms=timeout_ms))
