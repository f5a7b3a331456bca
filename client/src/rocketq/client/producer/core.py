"""AsyncProducer: sync, async and oneway sends, ordered sends through a selector, batches.

Theory of operation (DefaultMQProducerImpl): a send validates the message, finds the topic's
:class:`~rocketq.client.producer.fault.TopicPublishInfo` (route cache; when the NameServer has no
route, the ``TBW102`` template route so that a broker with ``autoCreateTopicEnable`` creates the
topic), picks a queue with the fault strategy, and sends SEND_MESSAGE_V2 to the queue's master.
Plain sends retry ``retry_times_when_send_failed`` times (async sends
``retry_times_when_send_async_failed``), each time on another broker when there is one, within
one overall ``send_msg_timeout_ms``; transport errors and the retriable response codes (errors'
``retriable``) lead to a retry, other broker answers are raised at once.  Every send records its
latency with the fault strategy (a failure isolates the broker), which avoids slow brokers when
``send_latency_fault_enable`` is on.  Sends to an explicit queue or through a selector (and
encoded batches) keep their queue: after a failure they refresh the route at once and retry on the
queue's new master within the same timeout, and fail at once when the queue's broker group is gone
(``_on_queue``; see :mod:`.routes`).  A message with a ``message_group`` (``sharding_key``) and
no queue or selector goes through :class:`~.selector.SelectMessageQueueByHash` on the group, so
one group keeps one queue and its order (RocketMQ 5's FIFO message groups).  While a request
waits for its answer the route is looked up again every ``route_refresh_on_failure_interval_ms``,
so a hung master that another one replaced does not hold a send until its timeout
(:meth:`ClientInstance.watch_route_while`).

Bodies over ``compress_msg_body_over_howmuch`` bytes are compressed (zlib level 5 by default, LZ4
with ``compression_type``) and flagged in the sysFlag; batches are never compressed.  Each
message gets a ``UNIQ_KEY`` (the ``msg_id`` of its SendResult).  ``send_encoded_batch`` sends a
SEND_BATCH_MESSAGE body its caller encoded (the Spark sink) to a given queue: same header, route
lookup and errors, no decoding.  Methods marked "Internal API" (``check_running``, ``validate``,
``next_uniq_key``, ``broker_addr_of``, ``send_batch_request``) are what the transaction
producer's batching layer (:mod:`.transaction_batch`, through its ``HalfBatchSender`` protocol)
builds on.  :func:`trace_sender` builds the inner producer that a traced client's trace
dispatcher is given as its sender.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from rocketq.client.config import ProducerConfig
from rocketq.client.errors import (
    MQBrokerError,
    MQClientError,
    NoRouteError,
    RemotingConnectError,
    RemotingError,
)
from rocketq.client.instance import ClientInstance
from rocketq.client.model import Message, SendResult, SendStatus
from rocketq.client.producer.batch import EncodedBatch, prepare_batches
from rocketq.client.producer.fault import MQFaultStrategy, TopicPublishInfo
from rocketq.client.producer.request import WAIT_STORE_OK, check_topic, prepare_send, send_header
from rocketq.client.producer.routes import PublishRoutes, QueueState, queue_unavailable_error
from rocketq.client.producer.selector import MessageQueueSelector, SelectMessageQueueByHash
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import RecallMessageRequestHeader
from rocketq.client.remoting.message import SysFlag
from rocketq.client.remoting.msgid import UniqKeyGenerator
from rocketq.client.remoting.recall_handle import RecallHandleError, decode_recall_handle
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import (
    MASTER_ID,
    MessageQueue,
    RequestCode,
    ResponseCode,
)
from rocketq.client.trace.dispatcher import PRODUCE_TRACE, trace_producer_config
from rocketq.client.trace.hooks import ProducerTracer, now_ms, producer_tracer

__all__ = ["AsyncProducer", "BatchReply", "check_topic", "trace_sender"]

_R = TypeVar("_R")
#: The queue of a message group: Java's hash of the group over the topic's writable queues.
_BY_MESSAGE_GROUP: Final = SelectMessageQueueByHash()

#: a bound on the attempts of one send to a fixed queue (besides its timeout; the retries after
#: a failure wait for the route refresh windows, so the timeout ends the loop long before)
MAX_QUEUE_ATTEMPTS = 100


@dataclass(frozen=True, slots=True)
class BatchReply:
    """A broker's answer to one SEND_BATCH_MESSAGE of :meth:`AsyncProducer.send_batch_request`:
    the SendResult (the stored-but-not-OK codes included), the broker's address, and the
    response's code, remark and header fields (protocol extensions read theirs there)."""

    result: SendResult
    broker_addr: str
    code: int
    remark: str | None
    ext_fields: Mapping[str, str]


class AsyncProducer:
    """The asyncio producer.  ``await start()`` before sending, ``await shutdown()`` at the end."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ProducerConfig | None = None,
        *,
        instance: ClientInstance | None = None,
        **settings: Any,
    ) -> None:
        """``settings`` are ProducerConfig fields (``producer_group="pg"``...) overriding ``config``."""
        base = config or ProducerConfig()
        self.config = dataclasses.replace(base, **settings) if settings else base
        self._own_instance = instance is None
        self._namesrv_addr = namesrv_addr
        self._instance = instance
        c = self.config
        self.routes = PublishRoutes(lambda: self.instance, c.create_topic_key, c.default_topic_queue_nums)
        self.fault_strategy = MQFaultStrategy(
            enabled=c.send_latency_fault_enable,
            latency_max_ms=c.latency_max_ms,
            not_available_duration_ms=c.not_available_duration_ms,
        )
        self._uniq: UniqKeyGenerator | None = None
        self._tracer: ProducerTracer | None = None  # enable_msg_trace: Pub/EndTransaction records
        self._running = False

    # ------------------------------------------------------------------ lifecycle / Member

    @property
    def group(self) -> str:
        return self.config.producer_group

    @property
    def instance(self) -> ClientInstance:
        """The client instance (created on first use; its background jobs start with ``start()``)."""
        if self._instance is None:
            self._instance = ClientInstance(self._namesrv_addr, config=self.config.client)
        return self._instance

    async def start(self) -> None:
        if self._running:
            return
        inst = self.instance
        inst.register(self)
        await inst.start()
        self._uniq = UniqKeyGenerator(inst.api.client_ip)
        if self.config.enable_msg_trace and self._tracer is None:
            sender = trace_sender(self._namesrv_addr, inst, self.group, PRODUCE_TRACE)
            tracer = producer_tracer(sender, self.group, self.config.custom_trace_topic)
            await tracer.start()
            self._tracer = tracer
        self._running = True

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._tracer is not None:  # sends the queued traces while the instance is still open
            await self._tracer.shutdown()
            self._tracer = None
        inst = self.instance
        inst.unregister(self)
        await inst.unregister_from_brokers(producer_group=self.group)
        if self._own_instance:
            await inst.close()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def publish_info(self) -> dict[str, TopicPublishInfo]:
        """The topics this producer sends to and their routes (see :class:`PublishRoutes`)."""
        return self.routes.table

    def topics_in_use(self) -> set[str]:
        return set(self.routes.table)

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "producer", {"groupName": self.group}

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        self.routes.on_route_changed(topic, route)

    def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
        """A new master is a fresh start: forget the group's latency faults (the old one's)."""
        if master_addr is not None:
            self.fault_strategy.forget(broker_name)

    async def periodic(self, what: str) -> None:
        return None

    # ------------------------------------------------------------------ routes

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a selector chooses among (:meth:`PublishRoutes.selector_queues`)."""
        return list(self.routes.selector_queues(await self.routes.get(topic)))

    # ------------------------------------------------------------------ public sends

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
        deliver_at: int | datetime | None = None,
        delay: float | timedelta | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer.  ``queue`` or ``selector`` fix the queue.
        ``deliver_at``/``delay`` send ``msg`` as a timer message (see :class:`Message`)."""
        if deliver_at is not None or delay is not None:
            msg = dataclasses.replace(msg, deliver_at=deliver_at, delay=delay)
        return await self._send_routed(
            msg, queue, selector, arg, timeout_ms, self.config.retry_times_when_send_failed
        )

    def send_async(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
        on_success: Callable[[SendResult], None] | None = None,
        on_exception: Callable[[BaseException], None] | None = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send in the background; the task's result is the SendResult.  Callbacks, if
        given, run on the event loop when it finishes."""

        async def run() -> SendResult:
            return await self._send_routed(
                msg, queue, selector, arg, timeout_ms, self.config.retry_times_when_send_async_failed
            )

        task = asyncio.get_running_loop().create_task(run())
        if on_success is not None or on_exception is not None:
            task.add_done_callback(lambda t: _dispatch(t, on_success, on_exception))
        return task

    async def recall(self, topic: str, recall_handle: str, *, timeout_ms: int | None = None) -> str:
        """Cancel a timer message not yet delivered (RECALL_MESSAGE, RocketMQ 5.3.2): ``recall_handle``
        is its ``SendResult.recall_handle``.  Returns the message id.  ClientError when the handle
        is not one; MQBrokerError with the broker's answer otherwise (NO_PERMISSION while the broker
        runs with ``recallMessageEnable=false``, ILLEGAL_OPERATION when the message is due or past)."""
        self.check_running()
        try:
            handle = decode_recall_handle(recall_handle)
        except RecallHandleError:
            raise MQClientError(
                f"{recall_handle!r} is not a recall handle (use SendResult.recall_handle)"
            ) from None
        addr = await self.instance.find_master_addr_or_refresh(handle.broker_name, topic)
        header = RecallMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            recall_handle=recall_handle,
            broker_name=handle.broker_name,
        )
        timeout = timeout_ms if timeout_ms is not None else self.config.send_msg_timeout_ms
        return await self.instance.api.recall_message(addr, header, timeout)

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer; no retry."""
        self.check_running()
        self.validate(msg)
        info = await self.routes.get(msg.topic)
        mq = self._choose(info, msg, queue, selector, arg)
        await self._send_kernel(msg, mq, self.config.send_msg_timeout_ms, oneway=True)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_ms: int | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE requests of at most 4 MiB each.

        Returns one SendResult per request; its ``msg_id`` lists the UNIQ_KEYs, comma-joined.
        """
        self.check_running()
        if not msgs:
            return []
        assert self._uniq is not None
        timeout = timeout_ms or self.config.send_msg_timeout_ms
        self.validate(msgs[0])  # the topic once: prepare_batches checks that all topics are equal
        max_size = self.config.max_message_size
        for m in msgs:
            if not m.body or len(m.body) > max_size:
                self.validate(m)  # raises the precise error
        results: list[SendResult] = []
        for batch in prepare_batches(msgs, self._uniq, self.config.max_message_size):
            if queue is not None:
                deadline = time.monotonic() + timeout / 1000
                results.append(
                    await self._on_queue(
                        queue,
                        deadline,
                        functools.partial(self._send_one, batch.message, queue, batch=batch),
                    )
                )
            else:
                results.append(
                    await self._send_default(
                        batch.message, self.config.retry_times_when_send_failed, timeout, batch=batch
                    )
                )
        return results

    async def send_encoded_batch(
        self,
        mq: MessageQueue,
        body: bytes,
        *,
        count: int,
        msg_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send ``body``, an already encoded SEND_BATCH_MESSAGE body of ``count`` messages, to
        ``mq`` in one request.

        ``body`` is the batch entry format of :func:`rocketq.client.remoting.batch.encode_batch`;
        every entry carries its own flag, body and properties (its ``UNIQ_KEY`` included: nothing
        is decoded here).  The producer builds the header, looks the route up (through the
        ``TBW102`` template when the topic has none yet, so that a broker with
        ``autoCreateTopicEnable`` creates the topic, as for every send) and returns the
        SendResult; its ``msg_id`` is ``msg_id`` if given, else the broker's offset msgIds.
        The queue never changes (it is the caller's choice): a failover of the queue's broker group
        is ridden through within the timeout as for selector sends; errors say whether a retry may help
        (``retriable``) — MQBrokerError with the broker's code and remark, RemotingError,
        NoRouteError, MQClientError (code 13) for an empty body or one over ``max_message_size``.
        """
        reply = await self.send_batch_request(mq, body, count=count, msg_id=msg_id, timeout_ms=timeout_ms)
        return reply.result

    async def send_batch_request(
        self,
        mq: MessageQueue,
        body: bytes,
        *,
        count: int,
        prepared: bool = False,
        msg_id: str | None = None,
        timeout_ms: int | None = None,
    ) -> BatchReply:
        """Internal API (the transaction producer's half batches): :meth:`send_encoded_batch`
        returning the whole answer; ``prepared`` sets the TRANSACTION_PREPARED sysFlag, so that
        every entry is stored as a half message."""
        self.check_running()
        if count < 1 or not body:
            raise MQClientError(
                "an encoded batch needs at least one message", code=ResponseCode.MESSAGE_ILLEGAL
            )
        limit = self.config.max_message_size
        if len(body) > limit:
            raise MQClientError(
                f"the batch of {count} messages is {len(body)} bytes, more than max_message_size={limit}: "
                "split it",
                code=ResponseCode.MESSAGE_ILLEGAL,
            )
        self._check_send_topic(mq.topic)
        timeout = timeout_ms or self.config.send_msg_timeout_ms
        deadline = time.monotonic() + timeout / 1000
        sys_flag = int(SysFlag.TRANSACTION_PREPARED) if prepared else 0
        header = send_header(
            self.group, self.config, mq, sys_flag=sys_flag, flag=0, properties=WAIT_STORE_OK, batch=True
        )
        ext_fields = header.to_ext_fields()

        async def attempt(remaining: int) -> BatchReply:
            begin_ms = now_ms() if self._tracer is not None else 0
            addr = await self.broker_addr_of(mq)
            api = self.instance.api
            cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, dict(ext_fields), body)
            response = await self.instance.watch_route_while(mq.topic, api.invoke(addr, cmd, remaining))
            result = api.process_send_response(
                addr, mq.broker_name, Message(mq.topic, body), response, msg_id
            )
            if self._tracer is not None:
                self._tracer.on_batch(mq.topic, body, result, addr, begin_ms, prepared=prepared)
            return BatchReply(result, addr, response.code, response.remark, response.ext_fields)

        await self.routes.get(mq.topic)
        # half messages are retried only when certainly not stored (the caller renumbers a retry)
        return await self._on_queue(mq, deadline, attempt, retry_if_maybe_stored=not prepared)

    # ------------------------------------------------------------------ internals

    def check_running(self) -> None:
        """Internal API: raise MQClientError unless ``start()`` was called."""
        if not self._running:
            raise MQClientError("the producer is not started; call start() first")

    def validate(self, msg: Message) -> None:
        """Internal API: Java's ``Validators.checkMessage`` (topic, body, size); raises MQClientError."""
        self._check_send_topic(msg.topic)
        if not msg.body:
            raise MQClientError("the message body is empty", code=ResponseCode.MESSAGE_ILLEGAL)
        if len(msg.body) > self.config.max_message_size:
            raise MQClientError(
                f"the message body size over max value, MAX: {self.config.max_message_size}",
                code=ResponseCode.MESSAGE_ILLEGAL,
            )

    def _check_send_topic(self, topic: str) -> None:
        check_topic(topic)
        if topic == self.config.create_topic_key:
            raise MQClientError(
                f"the topic {topic} is reserved for auto-creation", code=ResponseCode.MESSAGE_ILLEGAL
            )

    def next_uniq_key(self) -> str:
        """Internal API: a new ``UNIQ_KEY`` (message id) from this producer's generator."""
        self.check_running()
        assert self._uniq is not None
        return self._uniq.next_id()

    async def broker_addr_of(self, mq: MessageQueue) -> str:
        """Internal API: the master address of ``mq``'s broker, after the route lookup of every
        send (the ``TBW102`` template when the NameServer knows no route for the topic yet)."""
        return await self.routes.broker_addr_of(mq)

    def _choose(
        self,
        info: TopicPublishInfo,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
    ) -> MessageQueue:
        if queue is not None:
            if queue.topic != msg.topic:
                raise MQClientError(f"message topic {msg.topic} differs from the queue's {queue.topic}")
            return queue
        if selector is not None:
            mq = selector(list(self.routes.selector_queues(info)), msg, arg)
            if mq is None:
                raise MQClientError("the selector returned no message queue")
            return mq
        if msg.sharding_key:
            return _BY_MESSAGE_GROUP(list(self.routes.selector_queues(info)), msg, None)
        return self.fault_strategy.select_one_message_queue(info, None)

    async def _send_routed(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout_ms: int | None,
        retry_times: int,
    ) -> SendResult:
        """A two-way send: one attempt to the queue ``queue`` or ``selector`` fixes, if given,
        else :meth:`_send_default` with up to ``retry_times`` retries."""
        timeout = timeout_ms or self.config.send_msg_timeout_ms
        if queue is not None or selector is not None or msg.sharding_key:
            return await self._send_to_chosen_queue(msg, queue, selector, arg, timeout)
        return await self._send_default(msg, retry_times, timeout)

    async def _send_to_chosen_queue(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout_ms: int,
    ) -> SendResult:
        self.check_running()
        self.validate(msg)
        deadline = time.monotonic() + timeout_ms / 1000
        info = await self.routes.get(msg.topic)
        mq = self._choose(info, msg, queue, selector, arg)
        return await self._on_queue(mq, deadline, lambda remaining: self._send_one(msg, mq, remaining))

    async def _send_one(
        self, msg: Message, mq: MessageQueue, timeout_ms: int, batch: EncodedBatch | None = None
    ) -> SendResult:
        result = await self._send_kernel(msg, mq, timeout_ms, batch=batch)
        assert result is not None
        return result

    async def _on_queue(
        self,
        mq: MessageQueue,
        deadline: float,
        attempt: Callable[[int], Awaitable[_R]],
        *,
        retry_if_maybe_stored: bool = True,
    ) -> _R:
        """Run ``attempt(remaining_ms)`` (a request to ``mq``'s master) until it succeeds, on the
        same queue, within ``deadline`` (a ``time.monotonic()`` value).

        After a transport error, a master that does not answer (see
        :meth:`ClientInstance.watch_route_while`), a retriable refusal (a demoted or fenced
        master) or no master in the route, the route is refreshed at once (rate-limited) and the
        send is made again to the queue's new master; while the group lists no new master the
        retry waits for the next refresh window.  A queue whose group is gone from the route, or
        that its group no longer has, fails at once (:func:`queue_unavailable_error`): the queue
        never changes, so the order of a key's messages holds.  ``retry_if_maybe_stored=False``
        does not retry a failure after which the broker may have stored the request (a timeout,
        a lost connection).
        """
        last_error: BaseException | None = None
        attempts = 0
        while attempts < MAX_QUEUE_ATTEMPTS:
            state = self.routes.queue_state(mq)
            if state in (QueueState.GROUP_LOST, QueueState.QUEUE_GONE):
                raise queue_unavailable_error(mq, state) from last_error
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            attempts += 1
            addr = self.instance.find_broker_addr(mq.broker_name, MASTER_ID, only_this=True)
            start = time.monotonic()
            try:
                result = await attempt(remaining)
            except NoRouteError as exc:  # no master listed: nothing was sent
                last_error = exc
            except (RemotingError, MQBrokerError) as exc:
                self._record_latency(mq, start, isolation=True)
                last_error = exc
                if isinstance(exc, MQBrokerError) and not exc.retriable:
                    raise
                if not retry_if_maybe_stored and _maybe_stored(exc):
                    raise
            else:
                self._record_latency(mq, start, isolation=False)
                return result
            info = await self.routes.get(mq.topic)
            await self.routes.after_failure(
                mq.topic, info, mq, failed_addr=addr, deadline=deadline, same_queue=True
            )
        if isinstance(last_error, RemotingError | MQBrokerError | NoRouteError):
            last_error.add_note(
                f"{attempts} attempt(s) to queue {mq.queue_id} of broker group {mq.broker_name} "
                "within the send timeout"
            )
            raise last_error
        raise MQClientError(
            f"send to queue {mq.queue_id} of broker group {mq.broker_name} timed out", code=-1006
        ) from last_error

    async def _send_default(
        self,
        msg: Message,
        retries: int,
        timeout_ms: int,
        *,
        batch: EncodedBatch | None = None,
        retry_if_maybe_stored: bool = True,
    ) -> SendResult:
        """sendDefaultImpl: up to 1 + retries attempts, another broker each time, one deadline.

        ``retry_if_maybe_stored=False`` (transaction half messages) retries only failures that
        certainly stored nothing (no connection, a refusal by the broker, no route): after a
        timeout or a lost connection, or a stored-but-not-OK status, a second copy could be stored.
        """
        self.check_running()
        if batch is None:
            self.validate(msg)
        begin = time.monotonic()
        deadline = begin + timeout_ms / 1000
        info = await self.routes.get(msg.topic)
        last_broker: str | None = None
        last_error: BaseException | None = None
        brokers_sent: list[str] = []
        attempt = 0
        while attempt <= retries:
            mq = self.fault_strategy.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            start = time.monotonic()
            remaining = timeout_ms - int((start - begin) * 1000)
            if remaining <= 0:
                last_error = last_error or MQClientError("sendDefaultImpl call timeout", code=-1006)
                break
            addr = self.instance.find_broker_addr(mq.broker_name, MASTER_ID, only_this=True)
            try:
                result = await self._send_kernel(msg, mq, remaining, batch=batch)
            except NoRouteError as exc:  # the group has no master now: nothing was sent, wait for one
                last_error = exc
                info = await self.routes.after_failure(msg.topic, info, mq, deadline=deadline)
                continue
            except (RemotingError, MQClientError, MQBrokerError) as exc:
                attempt += 1
                brokers_sent.append(mq.broker_name)  # only brokers a request actually went to
                self._record_latency(mq, start, isolation=True)
                last_error = exc
                if isinstance(exc, MQBrokerError) and not exc.retriable:
                    raise
                if not retry_if_maybe_stored and _maybe_stored(exc):
                    break
                info = await self.routes.after_failure(
                    msg.topic, info, mq, failed_addr=addr, deadline=deadline
                )
                continue
            attempt += 1
            brokers_sent.append(mq.broker_name)
            self._record_latency(mq, start, isolation=False)
            assert result is not None
            if (
                result.send_status is not SendStatus.SEND_OK
                and self.config.retry_another_broker_when_not_store_ok
                and retry_if_maybe_stored
                and attempt <= retries
            ):
                continue
            return result
        cost = int((time.monotonic() - begin) * 1000)
        text = (
            f"Send [{len(brokers_sent)}] times, still failed, cost [{cost}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {brokers_sent}"
        )
        if isinstance(last_error, MQBrokerError):
            last_error.add_note(text)
            raise last_error
        code = last_error.code if isinstance(last_error, MQClientError) else -1
        raise MQClientError(f"{text}: {last_error}", code=code) from last_error

    def _record_latency(self, mq: MessageQueue, start: float, *, isolation: bool) -> None:
        latency = int((time.monotonic() - start) * 1000)
        self.fault_strategy.update_fault_item(mq.broker_name, latency, isolation)

    async def _send_kernel(
        self,
        msg: Message,
        mq: MessageQueue,
        timeout_ms: int,
        *,
        oneway: bool = False,
        batch: EncodedBatch | None = None,
    ) -> SendResult | None:
        """sendKernelImpl: build the header (UNIQ_KEY, compression, retry fields) and send."""
        inst = self.instance
        addr = await inst.find_master_addr_or_refresh(mq.broker_name, mq.topic)
        assert self._uniq is not None
        req = prepare_send(self.group, self.config, self._uniq, msg, mq, batch)
        header, body, props, msg_id = req.header, req.body, req.properties, req.msg_id
        api = inst.api
        tracer = self._tracer
        begin_ms = now_ms() if tracer is not None else 0
        if oneway:
            try:
                await api.send_message_oneway(addr, msg, header, body=body)
            except RemotingError:
                await inst.refresh_route_after_failure(mq.topic)  # the next send finds a new master
                raise
            if tracer is not None:
                tracer.on_send(msg.topic, props, len(msg.body), None, addr, begin_ms)
            return None
        # msg_id (its UNIQ_KEY) is what the result reports: msg itself needs no copy with props
        result = await inst.watch_route_while(
            mq.topic,
            api.send_message(addr, mq.broker_name, msg, header, timeout_ms, body=body, msg_id=msg_id),
        )
        if tracer is not None:
            if batch is None:
                tracer.on_send(msg.topic, props, len(msg.body), result, addr, begin_ms)
            else:
                tracer.on_batch(msg.topic, body, result, addr, begin_ms, prepared=False)
        return result


def trace_sender(
    namesrv_addr: str | Sequence[str], instance: ClientInstance, owner_group: str, kind: str
) -> AsyncProducer:
    """The inner producer that sends the trace messages of ``owner_group``'s ``kind`` side, on the
    traced client's ``instance`` (the sender a trace dispatcher is given)."""
    config = trace_producer_config(owner_group, kind, instance.config)
    return AsyncProducer(namesrv_addr, config, instance=instance)


def _maybe_stored(exc: BaseException) -> bool:
    """Whether a failed send may nevertheless have reached the broker (sent, then no answer)."""
    return isinstance(exc, RemotingError) and not isinstance(exc, RemotingConnectError)


def _dispatch(
    task: asyncio.Task[SendResult],
    on_success: Callable[[SendResult], None] | None,
    on_exception: Callable[[BaseException], None] | None,
) -> None:
    if task.cancelled():
        if on_exception is not None:
            on_exception(asyncio.CancelledError())
        return
    exc = task.exception()
    if exc is not None:
        if on_exception is not None:
            on_exception(exc)
    elif on_success is not None:
        on_success(task.result())
