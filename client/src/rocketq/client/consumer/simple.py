"""SimpleConsumer: RocketMQ 5's receive / ack / change-invisible-duration consumer, over POP.

Theory of operation.  A SimpleConsumer owns no queues.  :meth:`AsyncSimpleConsumer.receive` pops
(POP_MESSAGE with queueId -1, every queue of a broker at once) from the master of one broker
group that serves a subscribed topic; the messages it returns are *invisible* to the whole
consumer group for ``invisible_duration_s``.  Each carries its receipt handle in the ``POP_CK``
property (see :mod:`rocketq.client.remoting.pop`).  :meth:`~AsyncSimpleConsumer.ack` ends a
message for good; :meth:`~AsyncSimpleConsumer.change_invisible_duration` moves the moment it
becomes visible again to ``now + seconds`` and gives it a new handle (the old one stops working);
a message neither acked nor changed in time is delivered again, to any consumer of the group,
with ``reconsume_times`` raised.

Which broker: the (topic, broker group) pairs of the subscriptions are served in turn.  One call
first asks each pair once without waiting, starting after the pair that answered last time, and
returns the first messages found; when none has any, it long-polls the next pair for
``await_duration_s`` (the broker answers as soon as a message arrives).  So every broker group
is read from, and an idle consumer costs one request per ``await_duration_s``.

Acks and changes name the *real* topic of the handle (the pop retry topic ``%RETRY%group_topic``
for a redelivered message), the queue and offset of the message, and go to the master of the
broker group named in the handle.  An expired handle (its invisible time is over: the message
is, or will be, delivered again) is refused before sending, as RocketMQ's proxy does.
:class:`SimpleConsumer` is the blocking twin; its methods run the asyncio ones on the process's
background loop.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Self

from rocketq.client.blocking_facade import BlockingConsumerFacade, blocking_method
from rocketq.client.config import ClientConfig
from rocketq.client.consumer.pop_rpc import (
    PopNotSupportedError,
    PopResult,
    PopStatus,
    ack_message,
    batch_ack_message,
    change_invisible_time,
    pop_message,
)
from rocketq.client.consumer.subscription import (
    SUB_ALL,
    MessageSelector,
    Subscribable,
    SubscriptionData,
    subscription_refused,
)
from rocketq.client.errors import HeaderError, MQBrokerError, MQClientError, NoRouteError, RemotingError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import MessageExt
from rocketq.client.remoting.consume_directly import ConsumeMessageDirectlyResult
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ConsumeInitMode,
    ExtraInfo,
    PopMessageRequestHeader,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import validate_group

__all__ = ["AsyncSimpleConsumer", "InvalidReceiptHandleError", "SimpleConsumer"]

log = logging.getLogger("rocketq.client")

#: ``PopMessageProcessor``: a broker pops at most 32 messages per request.
MAX_MESSAGES_PER_RECEIVE = 32
DEFAULT_AWAIT_DURATION_S = 30.0
DEFAULT_INVISIBLE_DURATION_S = 60.0


class InvalidReceiptHandleError(MQClientError):
    """A message's receipt handle is missing, malformed or expired (its invisible time is over)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _duration_ms(seconds: float, what: str) -> int:
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise MQClientError(f"{what} must be a positive number of seconds, got {seconds!r}")
    return max(1, round(seconds * 1000))


#: consumes one message handed over by a broker (CONSUME_MESSAGE_DIRECTLY) and says how it went
DirectConsume = Callable[[MessageExt, str], Awaitable[ConsumeMessageDirectlyResult]]


class AsyncSimpleConsumer:
    """The asyncio SimpleConsumer: ``receive``, ``ack``, ``change_invisible_duration``."""

    consume_type = "CONSUME_POP"

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        consumer_group: str,
        subscriptions: Mapping[str, Subscribable] | None = None,
        *,
        await_duration_s: float = DEFAULT_AWAIT_DURATION_S,
        init_mode: ConsumeInitMode = ConsumeInitMode.MAX,
        fifo: bool = False,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
    ) -> None:
        """``subscriptions``: topic -> tag expression (``"*"``, ``"TagA || TagB"``) or
        ``MessageSelector.by_sql(...)``.  ``init_mode``: where a group that never consumed a queue
        starts (MAX: new messages only, RocketMQ's default; MIN: the oldest kept).  ``fifo``: pop
        orderly (a queue is held until the messages of the previous orderly pop are acked)."""
        problem = validate_group(consumer_group)
        if problem is not None:
            raise MQClientError(f"invalid consumer group {consumer_group!r}: {problem}")
        if await_duration_s < 0:
            raise MQClientError(f"await_duration_s must be >= 0, got {await_duration_s!r}")
        self.consumer_group = consumer_group
        self.await_duration_s = await_duration_s
        self.init_mode = init_mode
        self.fifo = fifo
        self.client_config = config or ClientConfig()
        self._namesrv_addr = namesrv_addr
        self._instance = instance
        self._own_instance = instance is None
        self._subscriptions: dict[str, SubscriptionData] = {}
        #: who consumes a message a broker hands over with CONSUME_MESSAGE_DIRECTLY (the listener
        #: of a POP push consumer built on this one); None: nobody, as a Java SimpleConsumer
        self.direct_consume: DirectConsume | None = None
        self._next_target = 0
        # fifo: the attemptId of a pop whose answer was lost, reused by the next pop of that
        # target so the broker hands out the same orderly batch again (RocketMQ 5 SDKs do this)
        self._attempt_ids: dict[tuple[str, str], str] = {}
        self.running = False
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)

    # ------------------------------------------------------------------ lifecycle

    @property
    def group(self) -> str:
        return self.consumer_group

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            self._instance = ClientInstance(self._namesrv_addr, config=self.client_config)
        return self._instance

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        """Receive from ``topic`` too (a tag expression or a :class:`MessageSelector`)."""
        self._subscriptions[topic] = MessageSelector.of(expression).subscription(topic)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)

    def subscriptions(self) -> dict[str, SubscriptionData]:
        return dict(self._subscriptions)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult | None:
        """CONSUME_MESSAGE_DIRECTLY: handed to :attr:`direct_consume`; None without one."""
        if self.direct_consume is None:
            return None
        return await self.direct_consume(msg, broker_name)

    async def start(self) -> None:
        """Join the client instance and fetch the routes; an unknown topic raises NoRouteError."""
        if self.running:
            return
        inst = self.instance
        inst.register(self)
        try:
            await inst.start()
            for topic in sorted(self._subscriptions):
                await inst.update_topic_route(topic)
            await inst.send_heartbeat_to_all_brokers()
        except BaseException:
            inst.unregister(self)
            raise
        self.running = True

    async def shutdown(self) -> None:
        if not self.running and self._instance is None:
            return
        self.running = False
        inst = self.instance
        inst.unregister(self)
        await inst.unregister_from_brokers(consumer_group=self.group)
        if self._own_instance:
            await inst.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ Member

    def topics_in_use(self) -> set[str]:
        return set(self._subscriptions)

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "consumer", {
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": self.consume_type,
            "groupName": self.group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": [s.to_obj() for s in self._subscriptions.values()],
            "unitMode": False,
        }

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        return None

    def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
        return None

    async def periodic(self, what: str) -> None:
        return None

    # ------------------------------------------------------------------ receive

    async def _targets(self) -> list[tuple[str, str]]:
        targets: list[tuple[str, str]] = []
        for topic in sorted(self._subscriptions):
            route = await self.instance.get_route(topic)
            names = sorted({mq.broker_name for mq in route.readable_queues(topic)})
            if not names:
                raise NoRouteError(topic, "the route has no readable queue")
            targets.extend((topic, name) for name in names)
        return targets

    async def receive(
        self, max_messages: int = 16, invisible_duration_s: float = DEFAULT_INVISIBLE_DURATION_S
    ) -> list[MessageExt]:
        """Up to ``max_messages`` (1..32) messages, invisible to the group for
        ``invisible_duration_s``; waits up to ``await_duration_s`` when none is ready, then
        returns ``[]``.  Ack each message, or change its invisible duration, before that time."""
        if not self.running:
            raise MQClientError("the SimpleConsumer is not started; call start() first")
        if not self._subscriptions:
            raise MQClientError(
                "the SimpleConsumer has no subscription; pass subscriptions= or call subscribe()"
            )
        if not isinstance(max_messages, int) or not 1 <= max_messages <= MAX_MESSAGES_PER_RECEIVE:
            raise MQClientError(f"max_messages must be 1..{MAX_MESSAGES_PER_RECEIVE}, got {max_messages!r}")
        invisible_ms = _duration_ms(invisible_duration_s, "invisible_duration_s")
        targets = await self._targets()
        start = self._next_target % len(targets)
        order = targets[start:] + targets[:start]
        last_error: RemotingError | None = None
        reachable: list[tuple[str, str]] = []
        for i, (topic, broker_name) in enumerate(order):
            try:
                result = await self._pop(topic, broker_name, max_messages, invisible_ms, 0)
            except RemotingError as exc:  # that broker is down: the others may have messages
                log.warning("pop from %s (%s) failed: %s", broker_name, topic, exc)
                last_error = exc
                continue
            if result.messages:
                self._next_target = start + i + 1
                return result.messages
            reachable.append((topic, broker_name))
        self._next_target = start + 1
        if not reachable:
            assert last_error is not None
            raise last_error
        poll_ms = round(self.await_duration_s * 1000)
        if poll_ms <= 0:
            return []
        topic, broker_name = reachable[0]
        result = await self._pop(topic, broker_name, max_messages, invisible_ms, poll_ms)
        return result.messages

    async def _pop(
        self, topic: str, broker_name: str, max_messages: int, invisible_ms: int, poll_ms: int
    ) -> PopResult:
        sub = self._subscriptions[topic]
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=_now_ms(),
            init_mode=int(self.init_mode),
            exp_type=str(sub.expression_type),
            exp=sub.sub_string,
            order=self.fifo,
            attempt_id=self._attempt_ids.setdefault((topic, broker_name), uuid.uuid4().hex)
            if self.fifo
            else None,
            broker_name=broker_name,
        )
        inst = self.instance
        addr = await inst.find_master_addr_or_refresh(broker_name, topic)
        timeout_ms = poll_ms + self.client_config.mq_client_api_timeout_ms
        try:
            result = await pop_message(inst.api, addr, broker_name, header, timeout_ms)
        except MQBrokerError as exc:
            self._attempt_ids.pop((topic, broker_name), None)
            raise (subscription_refused(exc, sub) or exc) from None
        self._attempt_ids.pop((topic, broker_name), None)
        if result.status is PopStatus.POLLING_FULL:
            log.debug("broker %s holds too many long polls of %s; returning no message", broker_name, topic)
        return result

    # ------------------------------------------------------------------ ack and change

    def _handle(self, msg: MessageExt) -> ExtraInfo:
        text = msg.properties.get(MessageConst.POP_CK)
        if not text:
            raise InvalidReceiptHandleError(
                f"message {msg.msg_id} has no receipt handle (POP_CK): only messages that receive()"
                " returned can be acked or have their invisible duration changed"
            )
        try:
            handle = ExtraInfo.parse(text)
        except HeaderError as exc:
            raise InvalidReceiptHandleError(str(exc)) from None
        now = _now_ms()
        if handle.next_visible_time <= now:
            raise InvalidReceiptHandleError(
                f"the receipt handle of message {msg.msg_id} expired {now - handle.next_visible_time} ms ago"
                f" (invisible for {handle.invisible_time} ms from {handle.pop_time}): the message is"
                " delivered again; ack or change it before its invisible duration ends"
            )
        return handle

    async def ack(self, msg: MessageExt) -> None:
        """Acknowledge ``msg``: it will not be delivered again.  Raises InvalidReceiptHandleError for a
        missing, malformed or expired handle."""
        handle = self._handle(msg)
        inst = self.instance
        header = AckMessageRequestHeader(
            consumer_group=self.group,
            topic=handle.real_topic(msg.topic, self.group),
            queue_id=handle.queue_id,
            extra_info=str(handle),
            offset=handle.queue_offset if handle.queue_offset is not None else msg.queue_offset,
            broker_name=handle.broker_name,
        )
        addr = await inst.find_master_addr_or_refresh(handle.broker_name, msg.topic)
        await ack_message(inst.api, addr, header)

    async def ack_many(self, msgs: Sequence[MessageExt]) -> None:
        """Acknowledge several messages with one BATCH_ACK_MESSAGE per broker group (a broker
        without batch acks gets one ACK_MESSAGE each).  Messages with a valid handle are acked
        even when others' handles are missing or expired; those then raise one
        InvalidReceiptHandleError that names them."""
        by_broker: dict[str, dict[tuple[Any, ...], list[tuple[MessageExt, int]]]] = {}
        invalid: list[str] = []
        parsed: dict[str, ExtraInfo] = {}
        for msg in msgs:
            try:
                handle, offset = self._handle_in_batch(msg, parsed)
            except InvalidReceiptHandleError as exc:
                invalid.append(str(exc))
                continue
            key = (msg.topic, handle.retry_flag, handle.queue_id, handle.ck_queue_offset, handle.pop_time,
                   handle.invisible_time, handle.revive_qid)  # fmt: skip
            by_broker.setdefault(handle.broker_name, {}).setdefault(key, []).append((msg, offset))
        for broker_name, checkpoints in by_broker.items():
            await self._batch_ack(broker_name, checkpoints)
        if invalid:
            raise InvalidReceiptHandleError(
                f"{len(invalid)} of {len(msgs)} messages were not acked: " + "; ".join(invalid)
            )

    def _handle_in_batch(self, msg: MessageExt, parsed: dict[str, ExtraInfo]) -> tuple[ExtraInfo, int]:
        """:meth:`_handle` and the message's queue offset, for one of a batch: the messages of one
        checkpoint have handles that differ in the last field (the offset) only, so ``parsed`` (the
        batch's handles by all but that field) spares parsing and checking the rest again."""
        text = msg.properties.get(MessageConst.POP_CK)
        if text:
            prefix, _, last = text.rpartition(" ")
            handle = parsed.get(prefix)
            if handle is not None:
                try:
                    return handle, int(last)
                except ValueError:
                    pass  # _handle says what is wrong with it
        handle = self._handle(msg)
        if handle.queue_offset is None:
            return handle, msg.queue_offset
        if handle.commit_log_offset is None and text:
            parsed[text.rpartition(" ")[0]] = handle
        return handle, handle.queue_offset

    async def _batch_ack(
        self, broker_name: str, checkpoints: dict[tuple[Any, ...], list[tuple[MessageExt, int]]]
    ) -> None:
        acks = []
        for (
            topic,
            flag,
            queue_id,
            start,
            pop_time,
            invisible_time,
            revive_qid,
        ), entries in checkpoints.items():
            acks.append(
                BatchAck(
                    consumer_group=self.group,
                    topic=topic,  # the message's topic: the broker adds the retry flag's prefix
                    retry_flag=flag,
                    start_offset=start,
                    queue_id=queue_id,
                    revive_queue_id=revive_qid,
                    pop_time=pop_time,
                    invisible_time=invisible_time,
                    ack_indexes=tuple(offset - start for _, offset in entries),
                )
            )
        inst = self.instance
        addr = await inst.find_master_addr_or_refresh(broker_name, acks[0].topic)
        try:
            await batch_ack_message(inst.api, addr, BatchAckMessageRequestBody(broker_name, tuple(acks)))
        except PopNotSupportedError:  # a 5.x broker from before batch acks
            for entries in checkpoints.values():
                for msg, _ in entries:
                    await self.ack(msg)

    async def change_invisible_duration(self, msg: MessageExt, invisible_duration_s: float) -> str:
        """Make ``msg`` visible again ``invisible_duration_s`` from now (longer or shorter than
        before).  Returns the new receipt handle and stores it in ``msg`` (the old one no longer
        works): ack ``msg`` afterwards as usual."""
        invisible_ms = _duration_ms(invisible_duration_s, "invisible_duration_s")
        handle = self._handle(msg)
        inst = self.instance
        offset = handle.queue_offset if handle.queue_offset is not None else msg.queue_offset
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group,
            topic=handle.real_topic(msg.topic, self.group),
            queue_id=handle.queue_id,
            extra_info=str(handle),
            offset=offset,
            invisible_time=invisible_ms,
            broker_name=handle.broker_name,
        )
        addr = await inst.find_master_addr_or_refresh(handle.broker_name, msg.topic)
        answer = await change_invisible_time(inst.api, addr, header)
        new = handle.changed(
            offset=offset,
            pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
            revive_qid=answer.revive_qid,
        )
        msg.properties[MessageConst.POP_CK] = str(new)
        return str(new)


class SimpleConsumer(BlockingConsumerFacade[AsyncSimpleConsumer]):
    """The blocking SimpleConsumer (the methods of :class:`AsyncSimpleConsumer`, run on the
    process's background loop)."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        consumer_group: str,
        subscriptions: Mapping[str, Subscribable] | None = None,
        **settings: Any,
    ) -> None:
        """Arguments as :class:`AsyncSimpleConsumer` (``await_duration_s``, ``init_mode``, ``fifo``,
        ``config``)."""
        super().__init__(lambda: AsyncSimpleConsumer(namesrv_addr, consumer_group, subscriptions, **settings))

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        """Receive from ``topic`` too (a tag expression or a :class:`MessageSelector`)."""

        async def run() -> None:  # on the loop, which reads the subscriptions
            self._consumer.subscribe(topic, expression)

        self._loop.run(run())

    start = blocking_method(AsyncSimpleConsumer.start, "_consumer")
    receive = blocking_method(AsyncSimpleConsumer.receive, "_consumer")
    ack = blocking_method(AsyncSimpleConsumer.ack, "_consumer")
    ack_many = blocking_method(AsyncSimpleConsumer.ack_many, "_consumer")
    change_invisible_duration = blocking_method(AsyncSimpleConsumer.change_invisible_duration, "_consumer")
