"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Checks, in RocketMQ's order: broker write permission, topic name, system topics, topic existence
(auto-creating it from ``defaultTopic`` = ``TBW102`` when allowed, see ``topic_manager``), queue
id, body and properties size, and the store's ``PutMessageStatus`` becomes the response code (B.4,
table in :mod:`rocketq.broker.processor.status_codes`).

Where the put runs.  A request of at most ``INLINE_PUT_MAX_BYTES`` (1 MiB: the Spark sink's
default batch) is appended on the event loop (``MessageStore.put_batch_nowait``: encoding plus one
``pwrite``, tens of microseconds for a small send, about a millisecond at the limit), which saves
two thread hand-offs per send; when the append could wait (another thread holds the append lock,
a new CommitLog segment must be created) or the request is bigger, it runs on the bounded send
executor, whose full queue or stale tasks are answered SYSTEM_BUSY ``[REJECTREQUEST]`` /
``[TIMEOUT_CLEAN_QUEUE]``.  With SYNC_FLUSH neither path blocks on the disk: the response waits,
on the loop, for the group-commit thread's callback (``MessageStore.when_flushed``), at most
``syncFlushTimeout`` (then FLUSH_DISK_TIMEOUT, the message being stored).  Half messages and
send-backs keep the blocking store calls on the executor.  On a SYNC_MASTER the answer then waits,
on the loop too, until a slave acknowledged the bytes (:meth:`Replication.after_put`:
SLAVE_NOT_AVAILABLE with no slave in sync, FLUSH_SLAVE_TIMEOUT after ``syncFlushTimeout``); a
slave answers every send SERVICE_NOT_AVAILABLE (docs/replication.md).

A SEND_BATCH_MESSAGE body is decoded into columns (``decode_batch_columns``: flags, zero-copy body
slices, raw property bytes) and stored with one ``put_batch``: the broker neither parses the inner
properties nor builds per-message objects; it only checks sizes, refuses ``DELAY`` (batches cannot
be delayed, as in RocketMQ) and appends ``CLUSTER`` where it is missing.  Each inner message keeps
the ``UNIQ_KEY`` its client assigned (the store indexes it from the raw properties).

Before the put, a message for ``%RETRY%<group>`` whose ``reconsumeTimes`` reached the group's
maximum goes to ``%DLQ%<group>`` instead (the client's fallback when CONSUMER_SEND_MSG_BACK
failed), and a message with a ``DELAY`` level is rewritten to SCHEDULE_TOPIC_XXXX
(:func:`rocketq.broker.schedule.delay.apply_delay_level`).  The response still names the
requested queue id, with the queue offset of the stored (possibly SCHEDULE_TOPIC_XXXX) record.
A prepared (half) message keeps its ``DELAY`` untouched: as in RocketMQ, the delay applies when
the transaction commits.

Transactional batches (rocketq extension, docs/transactions.md): a SEND_BATCH_MESSAGE whose sysFlag
has TRANSACTION_PREPARED, or whose inner messages carry ``TRAN_MSG=true``, must have
``TRAN_MSG=true`` and one ``PGROUP`` on every inner message (else MESSAGE_ILLEGAL); it is stored as
half messages in one append (``TransactionalMessageService.prepare_half_batch``) and answered with
the comma-joined offset msgIds, the first half-queue offset, the real queue id and ``rqHalfCount``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence, Sized
from itertools import repeat

from rocketq.broker.executor import Busy
from rocketq.broker.ha.replication import Replication
from rocketq.broker.processor.context import BrokerContext, peer_host
from rocketq.broker.processor.send_back import DLQ_QUEUE_NUMS, dlq_topic, max_reconsume_times
from rocketq.broker.processor.status_codes import put_response_code, put_status_remark
from rocketq.broker.schedule.delay import apply_delay_level
from rocketq.broker.store.message_store import PutOutcome
from rocketq.broker.store.record_batch import MessageBatchToStore, MessageToStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.broker.topic_manager import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    is_system_topic,
    validate_topic,
)
from rocketq.broker.transaction.half_message import HALF_QUEUE_ID, HALF_TOPIC
from rocketq.broker.transaction.ranged import check_half_batch, half_properties
from rocketq.client.errors import HeaderError, MessageFormatError
from rocketq.client.remoting.batch import BatchColumns, decode_batch_columns
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    parse_send_message_request,
)
from rocketq.client.remoting.message import TRANSACTION_TYPE_MASK, SysFlag
from rocketq.client.remoting.properties import (
    MAX_PROPERTIES_SIZE,
    MessageConst,
    decode_properties,
    encode_properties,
)
from rocketq.client.remoting.txn_batch import HALF_COUNT_FIELD
from rocketq.server import Channel

__all__ = ["SendMessageProcessor"]

_FAQ = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
_PROPERTY_CLUSTER = f"{MessageConst.CLUSTER}\x01"
_PREPARED_FLAG = int(SysFlag.TRANSACTION_PREPARED)
_HOST_V6_FLAGS = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
# Property keys searched in the \x02-joined raw properties of a batch: a key starts after a \x02.
_KEY_CLUSTER = f"\x02{MessageConst.CLUSTER}\x01".encode()
_KEY_DELAY = f"\x02{MessageConst.DELAY_TIME_LEVEL}\x01".encode()
_KEY_TRAN = f"\x02{MessageConst.TRANSACTION_PREPARED}\x01".encode()
#: Requests up to this size are appended on the event loop; bigger ones on the send executor.
INLINE_PUT_MAX_BYTES = 1024 * 1024


class SendMessageProcessor:
    """Stores produced messages; one instance per broker, registered for codes 10, 310, 320."""

    def __init__(self, ctx: BrokerContext, replication: Replication | None = None) -> None:
        self.ctx = ctx
        self.replication = replication

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            header = parse_send_message_request(request.code, request.ext_fields)
        except HeaderError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        error, tc = self._check(request, header)
        if error is not None:
            return error
        assert tc is not None
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(tc.write_queue_nums)
        properties = header.properties or ""
        if request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            return await self._send_batch(request, channel, header, queue_id)
        error = self._check_sizes(request, len(request.body), len(properties.encode("utf-8")))
        if error is not None:
            return error
        prepared = (
            f"{MessageConst.TRANSACTION_PREPARED}\x01" in properties
            and decode_properties(properties).get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true"
        )
        txn = self.ctx.txn if prepared else None
        if prepared and (txn is None or self.ctx.config.reject_transaction_message):
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.ctx.broker_addr}] sending transaction message is forbidden",
            )
        if _PROPERTY_CLUSTER not in properties:
            properties += f"{_PROPERTY_CLUSTER}{self.ctx.config.broker_cluster_name}\x02"
        routed = self._route(request, header, queue_id, properties, delay=not prepared)
        if isinstance(routed, RemotingCommand):
            return routed
        topic, store_queue_id, properties = routed
        if txn is not None:
            # A half message: stored in RMQ_SYS_TRANS_HALF_TOPIC until END_TRANSACTION (docs/transactions.md).
            msg = self._to_store(
                header, channel, store_queue_id, request.body, properties, header.flag, topic=topic
            )
            return await self._put(
                request, [msg], queue_id=queue_id, put=lambda: txn.prepare(msg), topic=header.topic
            )
        sys_flag, born = self._hosts(header, channel)
        batch = MessageBatchToStore(
            topic=topic,
            queue_id=store_queue_id,
            born_host=born,
            store_host=self.ctx.store_host,
            bodies=[request.body],
            properties=[properties.encode()],
            flags=header.flag,
            sys_flags=sys_flag,
            born_timestamps=header.born_timestamp,
            reconsume_times=header.reconsume_times or 0,
        )
        return await self._put_batch(request, batch, queue_id=queue_id, topic=header.topic)

    def _route(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
        properties: str,
        *,
        delay: bool = True,
    ) -> tuple[str, int, str] | RemotingCommand:
        """Where the message is stored: its topic, the group's DLQ, or SCHEDULE_TOPIC_XXXX."""
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            sgc = self.ctx.groups.find(group)
            if sgc is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {_FAQ}"
                )
            if (header.reconsume_times or 0) >= max_reconsume_times(sgc, header.max_reconsume_times):
                topic = self.ctx.topics.create_retry_topic(dlq_topic(group), DLQ_QUEUE_NUMS).topic_name
                queue_id = random.randrange(DLQ_QUEUE_NUMS)
                props = decode_properties(properties)
                props.pop(MessageConst.DELAY_TIME_LEVEL, None)
                return topic, queue_id, encode_properties(props)
        if not delay:
            return topic, queue_id, properties
        return apply_delay_level(topic, queue_id, properties, len(self.ctx.delay_levels_ms))

    # ------------------------------------------------------------------ checks
    def _check(
        self, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[RemotingCommand | None, TopicConfig | None]:
        ctx = self.ctx
        if not ctx.config.is_master:
            refusal = _slave_remark(ctx.broker_addr)
            return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, refusal), None
        fenced = self.replication.write_refusal() if self.replication is not None else None
        if fenced is not None:  # controller mode: an unconfirmed master (docs/failover.md)
            return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, fenced), None
        if not ctx.writeable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] sending message is forbidden"
            ), None
        remark = validate_topic(header.topic)
        if remark is not None:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, remark), None
        if is_system_topic(header.topic):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden."
            ), None
        tc = self._find_or_create_topic(header)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please! {_FAQ}",
            ), None
        if not tc.is_writeable:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] sending message is forbidden",
            ), None
        valid_ids = max(tc.write_queue_nums, tc.read_queue_nums)
        if header.queue_id >= valid_ids:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, {tc.topic_name} "
                f"(writeQueueNums={tc.write_queue_nums}) Producer: {_producer_of(request)}",
            ), None
        return None, tc

    def _find_or_create_topic(self, header: SendMessageRequestHeader) -> TopicConfig | None:
        topics = self.ctx.topics
        tc = topics.select(header.topic)
        if tc is not None:
            return tc
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or header.topic.startswith(
            DLQ_GROUP_TOPIC_PREFIX
        ):
            group = header.topic.split("%", 2)[-1]
            sgc = self.ctx.groups.find(group)
            if sgc is not None:
                return topics.create_retry_topic(header.topic, max(1, sgc.retry_queue_nums))
            return None
        return topics.create_in_send_process(
            header.topic, header.default_topic, header.default_topic_queue_nums, 0
        )

    def _check_sizes(self, request: RemotingCommand, body_len: int, props_len: int) -> RemotingCommand | None:
        limit = self.ctx.config.max_message_size
        if body_len > limit:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {body_len} bytes is larger than the limit "
                f"maxMessageSize={limit} bytes",
            )
        if props_len > MAX_PROPERTIES_SIZE:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message properties size {props_len} bytes is larger than the limit "
                f"{MAX_PROPERTIES_SIZE} bytes",
            )
        return None

    # ------------------------------------------------------------------ store
    def _hosts(self, header: SendMessageRequestHeader, channel: Channel) -> tuple[int, tuple[str, int]]:
        """The stored sysFlag (host address families set by the broker) and the born host."""
        sys_flag = header.sys_flag & ~_HOST_V6_FLAGS
        born = peer_host(channel)
        if ":" in born[0]:
            sys_flag |= int(SysFlag.BORNHOST_V6)
        if ":" in self.ctx.store_host[0]:
            sys_flag |= int(SysFlag.STOREHOST_V6)
        return sys_flag, born

    def _to_store(
        self,
        header: SendMessageRequestHeader,
        channel: Channel,
        queue_id: int,
        body: bytes,
        properties: str,
        flag: int,
        *,
        topic: str | None = None,
    ) -> MessageToStore:
        sys_flag, born = self._hosts(header, channel)
        return MessageToStore(
            topic=topic or header.topic,
            queue_id=queue_id,
            flag=flag,
            body=body,
            properties=properties,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born,
            store_host=self.ctx.store_host,
            reconsume_times=header.reconsume_times or 0,
        )

    async def _send_batch(
        self, request: RemotingCommand, channel: Channel, header: SendMessageRequestHeader, queue_id: int
    ) -> RemotingCommand:
        limit = self.ctx.config.max_message_size
        if len(request.body) > limit:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the batch body size {len(request.body)} bytes is larger than the limit "
                f"maxMessageSize={limit} bytes",
            )
        try:
            cols = decode_batch_columns(request.body)
        except MessageFormatError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}")
        if not len(cols):
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message")
        raw_props = cols.properties
        joined = b"\x02" + b"\x02".join(raw_props)
        if header.sys_flag & _PREPARED_FLAG or _KEY_TRAN in joined:
            return await self._send_half_batch(request, channel, header, queue_id, cols)
        error = self._check_sizes(request, max(map(len, cols.bodies)), max(map(len, raw_props)))
        if error is not None:
            return error
        if _KEY_DELAY in joined:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, "batch messages do not support delay levels"
            )
        props = self._with_cluster_all(raw_props, joined)
        sys_flag, born = self._hosts(header, channel)
        batch = MessageBatchToStore(
            topic=header.topic,
            queue_id=queue_id,
            born_host=born,
            store_host=self.ctx.store_host,
            bodies=cols.bodies,
            properties=props,
            flags=cols.flags,
            sys_flags=sys_flag,
            born_timestamps=header.born_timestamp,
            reconsume_times=header.reconsume_times or 0,
        )
        return await self._put_batch(request, batch, queue_id=queue_id, topic=header.topic)

    def _with_cluster_all(self, raw_props: list[bytes], joined: bytes | None = None) -> list[bytes]:
        """Each message's properties with this broker's CLUSTER appended unless present."""
        cluster = f"{_PROPERTY_CLUSTER}{self.ctx.config.broker_cluster_name}\x02".encode()
        if joined is None:
            joined = b"\x02" + b"\x02".join(raw_props)
        if _KEY_CLUSTER not in joined and all(map(bytes.endswith, raw_props, repeat(b"\x02"))):
            return [p + cluster for p in raw_props]  # the common case: well-formed, no CLUSTER yet
        return [_with_cluster(p, cluster) for p in raw_props]

    async def _send_half_batch(
        self,
        request: RemotingCommand,
        channel: Channel,
        header: SendMessageRequestHeader,
        queue_id: int,
        cols: BatchColumns,
    ) -> RemotingCommand:
        """A transactional batch: every inner message stored as a half message, in one append."""
        ctx = self.ctx
        txn = ctx.txn
        if txn is None or ctx.config.reject_transaction_message:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.broker_addr}] sending transaction message is forbidden",
            )
        raw_props = cols.properties
        error = self._check_sizes(request, max(map(len, cols.bodies)), max(map(len, raw_props)))
        if error is not None:
            return error
        cluster_prop = f"{_PROPERTY_CLUSTER}{ctx.config.broker_cluster_name}\x02".encode()
        fast = half_properties(raw_props, header.topic, queue_id, cluster=cluster_prop) or half_properties(
            self._with_cluster_all(raw_props), header.topic, queue_id
        )
        if fast is not None:  # the common case, rewritten as bytes (see ranged.half_properties)
            sys_flag, born = self._hosts(header, channel)
            batch = MessageBatchToStore(
                topic=HALF_TOPIC,
                queue_id=HALF_QUEUE_ID,
                born_host=born,
                store_host=ctx.store_host,
                bodies=cols.bodies,
                properties=fast,
                flags=cols.flags,
                sys_flags=sys_flag & ~TRANSACTION_TYPE_MASK,
                born_timestamps=header.born_timestamp,
                reconsume_times=header.reconsume_times or 0,
            )
            return await self._put_batch(
                request, batch, queue_id=queue_id, ext={HALF_COUNT_FIELD: str(len(fast))}, topic=header.topic
            )
        try:
            texts = [p.decode("utf-8") for p in raw_props]
        except UnicodeDecodeError as exc:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"the batch properties are not UTF-8: {exc}"
            )
        remark = check_half_batch([decode_properties(props) for props in texts])
        if remark is not None:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, remark)
        cluster = f"{_PROPERTY_CLUSTER}{ctx.config.broker_cluster_name}\x02"
        msgs = []
        for flag, body, props in zip(cols.flags, cols.bodies, texts, strict=True):
            error = self._check_sizes(request, len(body), len(props.encode("utf-8")))
            if error is not None:
                return error
            msgs.append(
                self._to_store(
                    header,
                    channel,
                    queue_id,
                    bytes(body),
                    props if _PROPERTY_CLUSTER in props else props + cluster,
                    flag,
                )
            )
        return await self._put(
            request,
            msgs,
            queue_id=queue_id,
            put=lambda: txn.prepare_half_batch(msgs),
            ext={HALF_COUNT_FIELD: str(len(msgs))},
            topic=header.topic,
        )

    async def _put_batch(
        self,
        request: RemotingCommand,
        batch: MessageBatchToStore,
        *,
        queue_id: int,
        ext: dict[str, str] | None = None,
        topic: str,
    ) -> RemotingCommand:
        """Store ``batch`` (on the loop when small and nothing could wait, else on the send executor)."""
        ctx = self.ctx
        store = ctx.store
        try:
            if len(request.body) <= INLINE_PUT_MAX_BYTES:
                # Dispatched on the loop once this step (which writes the response) is over:
                # waking the dispatch thread instead costs two thread switches per send, and
                # woken at once it would take the GIL first and delay the answer.
                outcome = store.put_batch_nowait(batch, wake=False)
                asyncio.get_running_loop().call_soon(store.dispatch_appended)
                if callable(outcome):
                    outcome = await ctx.send_executor.run(outcome)
            else:
                outcome = await ctx.send_executor.run(lambda: _complete(store.put_batch_nowait(batch)))
        except Busy as busy:
            ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        result, durable_at = outcome
        if durable_at:
            result = await self._durable(result, durable_at)
        if self.replication is not None:
            result = await self.replication.after_put(result)
        return self._respond(
            request,
            result,
            len(batch),
            queue_id=queue_id,
            ext=ext,
            detail=lambda: self._illegal_detail(batch.bodies, batch.properties),
            topic=topic,
            stored_topic=batch.topic,
        )

    async def _durable(self, result: PutMessageResult, durable_at: int) -> PutMessageResult:
        """SYNC_FLUSH: wait (on the loop, no thread) for the group commit to pass ``durable_at``."""
        store = self.ctx.store
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()

        def resolve(ok: bool) -> None:
            if not future.done():
                future.set_result(ok)

        def flushed(ok: bool) -> None:  # group-commit thread (or here, at once)
            try:
                loop.call_soon_threadsafe(resolve, ok)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

        store.when_flushed(durable_at, flushed)
        timer = loop.call_later(store.config.sync_flush_timeout_ms / 1000, resolve, False)
        try:
            ok = await future
        finally:
            timer.cancel()
        return result if ok else store.flush_timed_out(result)

    async def _put(
        self,
        request: RemotingCommand,
        msgs: Sequence[MessageToStore],
        *,
        queue_id: int,
        put: Callable[[], PutMessageResult],
        ext: dict[str, str] | None = None,
        topic: str,
    ) -> RemotingCommand:
        """A blocking store call (half messages) on the send executor."""
        try:
            result = await self.ctx.send_executor.run(put)
        except Busy as busy:
            self.ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if self.replication is not None:
            result = await self.replication.after_put(result)
        return self._respond(
            request,
            result,
            len(msgs),
            queue_id=queue_id,
            ext=ext,
            detail=lambda: self._illegal_detail(
                [m.body for m in msgs], [_props_bytes(m.properties) for m in msgs]
            ),
            topic=topic,
            stored_topic=HALF_TOPIC,
        )

    def _respond(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        count: int,
        *,
        queue_id: int,
        detail: Callable[[], str],
        ext: dict[str, str] | None = None,
        topic: str,
        stored_topic: str,
    ) -> RemotingCommand:
        status = result.status
        code = put_response_code(status)
        if not status.is_ok:
            illegal = status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            return request.make_response(code, put_status_remark(status, detail() if illegal else ""))
        append = result.append_result
        if self.ctx.metrics is not None and append is not None:  # docs/observability.md
            self.ctx.metrics.record_send(topic, stored_topic, count, append.wrote_bytes)
        if request.is_oneway or append is None:
            return request.make_response(code)
        self.ctx.stats.put_messages += count
        self.ctx.stats.put_bytes += append.wrote_bytes
        response_header = SendMessageResponseHeader(
            msg_id=append.msg_id,
            queue_id=queue_id,
            queue_offset=append.queue_offset,
            msg_region="DefaultRegion",
            trace_on=True,
        )
        fields = response_header.to_ext_fields()
        if ext:
            fields.update(ext)
        return request.make_response(code, ext_fields=fields)

    def _illegal_detail(self, bodies: Sequence[Sized], properties: Sequence[Sized]) -> str:
        body = max(map(len, bodies))
        props = max(map(len, properties))
        return (
            f"maxMessageSize={self.ctx.config.max_message_size} bytes, body={body} bytes, "
            f"properties={props} bytes (limit {MAX_PROPERTIES_SIZE})"
        )


def _slave_remark(broker_addr: str) -> str:
    return (
        f"the broker[{broker_addr}] is a slave (brokerRole=SLAVE): it does not accept messages; "
        "send to the master of its broker group"
    )


def _producer_of(request: RemotingCommand) -> str:
    return request.ext_fields.get("a") or request.ext_fields.get("producerGroup") or "unknown"


def _complete(outcome: PutOutcome | Callable[[], PutOutcome]) -> PutOutcome:
    """Finish a ``put_batch_nowait`` in a worker thread (run its continuation if it handed one back)."""
    return outcome() if callable(outcome) else outcome


def _with_cluster(props: bytes, cluster: bytes) -> bytes:
    """``props`` with the CLUSTER property appended unless present (repairing a missing last \\x02)."""
    if props.startswith(cluster[:8]) or _KEY_CLUSTER in props:
        return props
    if props and not props.endswith(b"\x02"):
        return props + b"\x02" + cluster
    return props + cluster


def _props_bytes(properties: Mapping[str, str] | str) -> bytes:
    if isinstance(properties, str):
        return properties.encode("utf-8")
    return encode_properties(properties).encode("utf-8")
