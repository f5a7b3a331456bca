"""AsyncTransactionProducer: two-phase (transactional) sends, RocketMQ's TransactionMQProducer.

Theory of operation (A.3.6, B.11 item 3).  ``send_message_in_transaction`` runs three steps that
the blocking :class:`~rocketq.client.producer.blocking.TransactionProducer` reuses one by one
(so that its local transaction runs in the caller's thread, as Java's does):

1. :meth:`AsyncTransactionProducer.send_half_message` copies the message with ``TRAN_MSG=true``,
   ``PGROUP=<group>`` and a fixed ``UNIQ_KEY`` (the transaction id; it stays the same across
   retries) and sends it synchronously; the producer core turns ``TRAN_MSG`` into the
   ``TRANSACTION_PREPARED`` sysFlag.  Only failures that certainly stored nothing are retried on
   another broker: after a timeout, a lost connection or a stored-but-not-OK status a retry could
   leave two half messages.  Batches and delayed messages are refused.
2. The local transaction runs (only after SEND_OK; a stored-but-not-OK half message is rolled
   back, as Java does).  ``None`` or an exception count as UNKNOW; the exception is logged and its
   text goes to the broker in the END_TRANSACTION remark.
3. :meth:`AsyncTransactionProducer.end_transaction` sends END_TRANSACTION oneway to the master
   of the broker that stored the half message: ``tranStateTableOffset`` = the half message's queue
   offset, ``commitLogOffset`` decoded from the offset msgId, ``commitOrRollback`` 8/12/0.  A
   failure to send it is logged, not raised: the broker's check-back will ask again.

Check-back: the broker sends CHECK_TRANSACTION_STATE (oneway) over a connection on which a
producer of the group heartbeats (every producer is in the HeartbeatData's producerDataSet; this
one also heartbeats a broker at once the first time it stores a half message there, rather than
up to 30 s later).  The client instance decodes it and calls :meth:`check_transaction_state`,
which queues the check: synchronous checkers run in a thread pool of
``check_thread_pool_max_size`` threads (1 by default, like Java's checkExecutor) with at most
``check_request_hold_max`` (2000) waiting checks (more are dropped with a warning; the broker asks
again at its next pass); coroutine checkers are awaited on the event loop, as many at a time.  The
answer is a oneway END_TRANSACTION with ``fromTransactionCheck=true`` and the offsets of the
request header.

Batched transactions (rocketq extension, :mod:`.transaction_batch`): :meth:`send_half_batch`
stores many half messages of one queue (messages, or an encoded :class:`PreparedHalfBatch`) in
one request, :meth:`end_transaction_batch` ends them
with one ranged request per queue (module function :func:`.transaction_batch.end_transaction_batch`
does the same without a producer, e.g. on a Spark driver).  Each half message of a batch is
checked back individually, through the same check listener.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from rocketq.client.config import ProducerConfig
from rocketq.client.errors import MQClientError, RemotingError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import (
    LocalTransactionState,
    Message,
    MessageExt,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from rocketq.client.producer.core import AsyncProducer
from rocketq.client.producer.transaction_batch import (
    HalfBatchResult,
    PreparedHalfBatch,
    end_transaction_batch,
    send_half_batch,
)
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import MessageQueue, ResponseCode

__all__ = [
    "AsyncTransactionProducer",
    "CheckListener",
    "HalfBatchResult",
    "LocalTransaction",
    "PreparedHalfBatch",
    "TransactionListener",
    "as_transaction_state",
    "run_local_transaction",
    "run_local_transaction_async",
]

log = logging.getLogger("rocketq.client.transaction")

DEFAULT_CHECK_REQUEST_HOLD_MAX = 2000

StateOrAwaitable = LocalTransactionState | None | Awaitable[LocalTransactionState | None]
LocalTransaction = Callable[[Message, Any], StateOrAwaitable]
"""``(message, arg) -> LocalTransactionState`` (a coroutine function for the asyncio producer)."""
CheckListener = Callable[[MessageExt], StateOrAwaitable]
"""``(half message as stored) -> LocalTransactionState``: the broker's check-back question."""


@runtime_checkable
class TransactionListener(Protocol):
    """Java's TransactionListener: run the local transaction, and answer the broker's checks."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


def as_transaction_state(value: object, what: str = "local transaction") -> LocalTransactionState:
    """The state a callback returned; None (and anything that is not a state) counts as UNKNOW."""
    if isinstance(value, LocalTransactionState):
        return value
    if value is not None:
        log.warning("%s returned %r, not a LocalTransactionState: treated as UNKNOW", what, value)
    return LocalTransactionState.UNKNOW


def run_local_transaction(
    fn: LocalTransaction, msg: Message, arg: Any
) -> tuple[LocalTransactionState, BaseException | None]:
    """Run a synchronous local transaction in this thread: (state, the exception it raised)."""
    try:
        result = fn(msg, arg)
    except Exception as exc:
        log.warning("local transaction of %s raised; state UNKNOW: %r", _tid(msg), exc, exc_info=True)
        return LocalTransactionState.UNKNOW, exc
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        misuse = MQClientError("the local transaction returned an awaitable; use AsyncTransactionProducer")
        log.warning("local transaction of %s: %s", _tid(msg), misuse)
        return LocalTransactionState.UNKNOW, misuse
    return as_transaction_state(result), None


async def run_local_transaction_async(
    fn: LocalTransaction, msg: Message, arg: Any
) -> tuple[LocalTransactionState, BaseException | None]:
    """Run a local transaction on the event loop, awaiting it when it is a coroutine function."""
    try:
        result = fn(msg, arg)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        log.warning("local transaction of %s raised; state UNKNOW: %r", _tid(msg), exc, exc_info=True)
        return LocalTransactionState.UNKNOW, exc
    return as_transaction_state(result), None


def _tid(msg: Message | MessageExt) -> str:
    return msg.properties.get(MessageConst.UNIQ_KEY) or "?"


class AsyncTransactionProducer(AsyncProducer):
    """The asyncio transactional producer; every AsyncProducer send is available too.

    ``transaction_listener`` supplies both callbacks; alternatively pass ``check_listener`` (the
    check-back callback) and give each ``send_message_in_transaction`` its ``local_transaction``.
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
        instance: ClientInstance | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(namesrv_addr, config, instance=instance, **settings)
        if not 1 <= check_thread_pool_min_size <= check_thread_pool_max_size:
            raise MQClientError("need 1 <= check_thread_pool_min_size <= check_thread_pool_max_size")
        if check_request_hold_max < 0:
            raise MQClientError("check_request_hold_max must be >= 0")
        self.transaction_listener = transaction_listener
        self.check_listener = check_listener
        self.check_thread_pool_min_size = (
            check_thread_pool_min_size  # Java's corePoolSize; threads start lazily
        )
        self.check_thread_pool_max_size = check_thread_pool_max_size
        self.check_request_hold_max = check_request_hold_max
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._check_slots: asyncio.Semaphore | None = None
        self._check_tasks: set[asyncio.Task[None]] = set()
        self._heartbeated: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._running:
            return
        if self._checker() is None:
            log.warning(
                "transaction producer %s has no check listener: it cannot answer the broker's "
                "check-backs, so undecided transactions will be parked",
                self.group,
            )
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.check_thread_pool_max_size,
                thread_name_prefix=f"rocketq-tx-check-{self.group}",
            )
            self._check_slots = asyncio.Semaphore(self.check_thread_pool_max_size)
        await super().start()

    async def shutdown(self) -> None:
        was_running = self._running
        await super().shutdown()
        if not was_running:
            return
        tasks = list(self._check_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def __aenter__(self) -> AsyncTransactionProducer:
        await self.start()
        return self

    # ------------------------------------------------------------------ the transaction

    async def send_message_in_transaction(
        self,
        msg: Message,
        local_transaction: LocalTransaction | None = None,
        arg: Any = None,
        *,
        timeout_ms: int | None = None,
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction.

        ``local_transaction(msg, arg)`` (default: the listener's ``execute_local_transaction``)
        receives the message as sent (its ``properties["UNIQ_KEY"]`` is the transaction id) and
        returns COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW (then the broker checks back later).
        A synchronous function runs on the event loop: keep it short, or make it a coroutine
        function.  Raises when the half message cannot be sent; never because of the local
        transaction (its exception is logged and the state is UNKNOW).
        """
        fn = self.local_transaction_of(local_transaction)
        half, result = await self.send_half_message(msg, timeout_ms=timeout_ms)
        if result.send_status is SendStatus.SEND_OK:
            state, error = await run_local_transaction_async(fn, half, arg)
        else:
            state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        return await self.end_transaction(half, result, state, error)

    def local_transaction_of(self, local_transaction: LocalTransaction | None) -> LocalTransaction:
        """The local transaction to run: the argument, else the listener's; raises if neither."""
        if local_transaction is not None:
            return local_transaction
        if self.transaction_listener is not None:
            return self.transaction_listener.execute_local_transaction
        raise MQClientError("no local transaction: pass local_transaction or set a transaction_listener")

    async def send_half_message(
        self, msg: Message, *, timeout_ms: int | None = None
    ) -> tuple[Message, SendResult]:
        """Step 1: store ``msg`` as a half message; returns (the message as sent, the result)."""
        self.check_running()
        half = self.half_message(msg)
        timeout = timeout_ms or self.config.send_msg_timeout_ms
        result = await self._send_default(
            half, self.config.retry_times_when_send_failed, timeout, retry_if_maybe_stored=False
        )
        if result.transaction_id:
            half.properties[MessageConst.TRANSACTION_ID] = result.transaction_id
        await self._heartbeat_once(result)
        return half, result

    async def end_transaction(
        self,
        half: Message,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None = None,
    ) -> TransactionSendResult:
        """Step 3: END_TRANSACTION (oneway) with ``state``; returns the TransactionSendResult."""
        tid = half.properties.get(MessageConst.UNIQ_KEY) or result.msg_id
        remark = f"executeLocalTransactionBranch exception: {error!r}" if error is not None else None
        addr = ""
        try:
            header = EndTransactionRequestHeader(
                producer_group=self.group,
                tran_state_table_offset=result.queue_offset,
                commit_log_offset=decode_offset_msg_id(result.offset_msg_id)[2],
                commit_or_rollback=state.commit_or_rollback,
                from_transaction_check=False,
                msg_id=result.offset_msg_id,
                transaction_id=tid,
                topic=half.topic,
            )
            mq = result.message_queue
            addr = await self.instance.find_master_addr_or_refresh(mq.broker_name, mq.topic)
            await self.instance.api.end_transaction(addr, header, remark)
        except RocketQError as exc:  # the broker will check back: the transaction is not lost
            log.warning(
                "END_TRANSACTION (%s) for %s failed, the broker will check back: %s", state.value, tid, exc
            )
            if isinstance(exc, RemotingError):  # the master may be gone: the next one uses the new
                await self.instance.refresh_route_after_failure(half.topic)
        if self._tracer is not None:
            self._tracer.on_end_transaction(half, result.msg_id, tid, addr, state, from_check=False)
        return TransactionSendResult(
            send_status=result.send_status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            message_queue=result.message_queue,
            queue_offset=result.queue_offset,
            transaction_id=tid,
            region_id=result.region_id,
            trace_on=result.trace_on,
            local_transaction_state=state,
        )

    async def send_half_batch(
        self,
        mq: MessageQueue,
        batch: Sequence[Message] | PreparedHalfBatch,
        *,
        timeout_ms: int | None = None,
    ) -> HalfBatchResult:
        """Store ``batch`` as half messages of queue ``mq`` in one request (rocketq brokers), or
        one by one (other brokers); the handle is picklable.

        ``batch`` is a list of messages of ``mq.topic``, or a :class:`PreparedHalfBatch`: an
        encoded body whose entries already carry the transaction properties, sent as it is (see
        :meth:`PreparedHalfBatch.of_encoded` to add them to a plain encoded batch).  A topic with
        no route yet is created by a broker with ``autoCreateTopicEnable``, as for every send.
        See :mod:`.transaction_batch`."""
        return await send_half_batch(self, mq, batch, timeout_ms=timeout_ms)

    async def end_transaction_batch(
        self,
        handles: Sequence[HalfBatchResult],
        state: LocalTransactionState,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit or roll back the half messages of ``handles``: one ranged END_TRANSACTION per
        queue (two-way); raises MQBrokerError with the broker's code and remark on failure."""
        await end_transaction_batch(self.instance.api, self.group, handles, state, timeout_ms=timeout_ms)

    async def heartbeat_broker(self, addr: str) -> None:
        """Heartbeat ``addr`` once, the first time it holds our half messages (see _heartbeat_once)."""
        if addr in self._heartbeated:
            return
        try:
            await self.instance.send_heartbeat_to(addr)
            self._heartbeated.add(addr)
        except RocketQError as exc:
            log.warning("heartbeat to %s failed (the periodic one will retry): %s", addr, exc)

    def half_message(self, msg: Message) -> Message:
        """Internal API: ``msg`` as sent as a half message of this producer (``TRAN_MSG``,
        ``PGROUP`` and a ``UNIQ_KEY`` fixed before any retry); refuses batches and delays."""
        if not isinstance(msg, Message):
            raise MQClientError(
                f"send_message_in_transaction takes one Message, not {type(msg).__name__}: batch "
                "messages cannot be sent in a transaction",
                code=ResponseCode.MESSAGE_ILLEGAL,
            )
        if msg.delay_time_level > 0 or MessageConst.DELAY_TIME_LEVEL in msg.properties:
            raise MQClientError(
                "delayed messages cannot be sent in a transaction", code=ResponseCode.MESSAGE_ILLEGAL
            )
        props = dict(msg.properties)
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        props[MessageConst.PRODUCER_GROUP] = self.group
        if not props.get(MessageConst.UNIQ_KEY):
            props[MessageConst.UNIQ_KEY] = self.next_uniq_key()  # fixed before any retry
        return dataclasses.replace(msg, properties=props)

    async def _heartbeat_once(self, result: SendResult) -> None:
        """Register the group with a broker at once the first time it holds our half messages, so
        that an early check-back finds a channel (the periodic heartbeat keeps it registered)."""
        addr = self.instance.find_broker_addr(result.message_queue.broker_name)
        if addr is not None:
            await self.heartbeat_broker(addr)

    # ------------------------------------------------------------------ check-back

    def _checker(self) -> CheckListener | None:
        if self.check_listener is not None:
            return self.check_listener
        if self.transaction_listener is not None:
            return self.transaction_listener.check_local_transaction
        return None

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """A broker asks about a half message: queue the check (called on the event loop)."""
        if not self._running:
            log.debug("check of %s ignored: the producer is shut down", _tid(msg))
            return
        if self._checker() is None:
            log.warning("check of %s from %s ignored: no check listener", _tid(msg), broker_addr)
            return
        if len(self._check_tasks) >= self.check_thread_pool_max_size + self.check_request_hold_max:
            log.warning(
                "check of %s from %s rejected: %d checks already waiting (the broker asks again)",
                _tid(msg),
                broker_addr,
                len(self._check_tasks),
            )
            return
        task = asyncio.get_running_loop().create_task(self._check_and_answer(broker_addr, msg, header))
        self._check_tasks.add(task)
        task.add_done_callback(self._check_tasks.discard)

    async def _check_and_answer(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        try:
            state, error = await self._run_check(msg)
            await self._answer_check(broker_addr, msg, header, state, error)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("check-back of %s from %s failed", _tid(msg), broker_addr)

    async def _run_check(self, msg: MessageExt) -> tuple[LocalTransactionState, BaseException | None]:
        checker = self._checker()
        assert checker is not None and self._executor is not None and self._check_slots is not None
        what = f"check of transaction {_tid(msg)}"
        try:
            if inspect.iscoroutinefunction(checker):
                async with self._check_slots:
                    result = await checker(msg)
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, checker, msg)
                if inspect.isawaitable(result):
                    result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s raised; answering UNKNOW: %r", what, exc, exc_info=True)
            return LocalTransactionState.UNKNOW, exc
        return as_transaction_state(result, what), None

    async def _answer_check(
        self,
        broker_addr: str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
        state: LocalTransactionState,
        error: BaseException | None,
    ) -> None:
        uniq = msg.properties.get(MessageConst.UNIQ_KEY)
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=True,
            msg_id=header.msg_id or uniq or msg.offset_msg_id,
            transaction_id=header.transaction_id or uniq,
            topic=header.topic or msg.topic,
        )
        if state is LocalTransactionState.UNKNOW:
            log.info(
                "check of transaction %s: still UNKNOW (the broker asks again later)", end.transaction_id
            )
        remark = f"checkLocalTransactionState Exception: {error!r}" if error is not None else None
        if not self._running:
            return
        await self.instance.api.end_transaction(broker_addr, end, remark)
        if self._tracer is not None:
            tid = end.transaction_id
            self._tracer.on_end_transaction(msg, uniq or msg.msg_id, tid, broker_addr, state, from_check=True)
