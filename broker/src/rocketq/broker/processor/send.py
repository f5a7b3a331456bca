"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

The checks before anything is stored are in :mod:`.send_checks` (RocketMQ's order: role and
write permission, topic, queue id, sizes); where the put runs, the SYNC_FLUSH and SYNC_MASTER waits
and the response are in :mod:`.send_put`.  This module decides what is stored where.

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

import random
from itertools import repeat

from rocketq.broker.ha.replication import Replication
from rocketq.broker.processor.context import BrokerContext, peer_host
from rocketq.broker.processor.send_back import DLQ_QUEUE_NUMS, dlq_topic, max_reconsume_times
from rocketq.broker.processor.send_checks import FAQ, check_send, check_sizes
from rocketq.broker.processor.send_put import SendPutter
from rocketq.broker.schedule.delay import apply_delay_level
from rocketq.broker.store.record_batch import MessageBatchToStore, MessageToStore
from rocketq.broker.timer.send_hook import recall_ext, route_for_send
from rocketq.broker.topic_manager import RETRY_GROUP_TOPIC_PREFIX
from rocketq.broker.transaction.half_message import HALF_QUEUE_ID, HALF_TOPIC
from rocketq.broker.transaction.ranged import check_half_batch, half_properties
from rocketq.client.errors import HeaderError, MessageFormatError
from rocketq.client.remoting.batch import BatchColumns
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeader, parse_send_message_request
from rocketq.client.remoting.message import TRANSACTION_TYPE_MASK, SysFlag
from rocketq.client.remoting.properties import MessageConst, decode_properties, encode_properties
from rocketq.client.remoting.txn_batch import HALF_COUNT_FIELD
from rocketq.server import Channel
from rocketq.server.batch_columns import decode_batch_columns

__all__ = ["SendMessageProcessor"]

_PROPERTY_CLUSTER = f"{MessageConst.CLUSTER}\x01"
_PREPARED_FLAG = int(SysFlag.TRANSACTION_PREPARED)
_HOST_V6_FLAGS = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
# Property keys searched in the \x02-joined raw properties of a batch: a key starts after a \x02.
_KEY_CLUSTER = f"\x02{MessageConst.CLUSTER}\x01".encode()
_KEY_DELAY = f"\x02{MessageConst.DELAY_TIME_LEVEL}\x01".encode()
_KEY_TRAN = f"\x02{MessageConst.TRANSACTION_PREPARED}\x01".encode()


class SendMessageProcessor:
    """Stores produced messages; one instance per broker, registered for codes 10, 310, 320."""

    def __init__(self, ctx: BrokerContext, replication: Replication | None = None) -> None:
        self.ctx = ctx
        self.replication = replication
        putter = SendPutter(ctx, replication)
        self._put_batch = putter.put_batch
        self._put = putter.put_blocking

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            header = parse_send_message_request(request.code, request.ext_fields)
        except HeaderError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        error, tc = check_send(self.ctx, self.replication, request, header)
        if error is not None:
            return error
        assert tc is not None
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(tc.write_queue_nums)
        properties = header.properties or ""
        if request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            return await self._send_batch(request, channel, header, queue_id)
        error = check_sizes(self.ctx, request, len(request.body), len(properties.encode("utf-8")))
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
        ext = recall_ext(self.ctx.config, request.code, topic, properties)  # timer messages
        return await self._put_batch(request, batch, queue_id=queue_id, ext=ext, topic=header.topic)

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
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {FAQ}"
                )
            if (header.reconsume_times or 0) >= max_reconsume_times(sgc, header.max_reconsume_times):
                topic = self.ctx.topics.create_retry_topic(dlq_topic(group), DLQ_QUEUE_NUMS).topic_name
                queue_id = random.randrange(DLQ_QUEUE_NUMS)
                props = decode_properties(properties)
                props.pop(MessageConst.DELAY_TIME_LEVEL, None)
                return topic, queue_id, encode_properties(props)
        if not delay:
            return topic, queue_id, properties
        timed = route_for_send(self.ctx.config, request, topic, queue_id, properties)  # timer messages
        if isinstance(timed, RemotingCommand) or timed[0] != topic:
            return timed
        topic, queue_id, properties = timed
        return apply_delay_level(topic, queue_id, properties, len(self.ctx.delay_levels_ms))

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
        error = check_sizes(self.ctx, request, max(map(len, cols.bodies)), max(map(len, raw_props)))
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
        error = check_sizes(self.ctx, request, max(map(len, cols.bodies)), max(map(len, raw_props)))
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
        msgs = self._half_messages(request, channel, header, queue_id, cols)
        if isinstance(msgs, RemotingCommand):
            return msgs
        return await self._put(
            request,
            msgs,
            queue_id=queue_id,
            put=lambda: txn.prepare_half_batch(msgs),
            ext={HALF_COUNT_FIELD: str(len(msgs))},
            topic=header.topic,
        )

    def _half_messages(
        self,
        request: RemotingCommand,
        channel: Channel,
        header: SendMessageRequestHeader,
        queue_id: int,
        cols: BatchColumns,
    ) -> list[MessageToStore] | RemotingCommand:
        """The inner messages of a transactional batch whose properties need decoding, each checked
        (one PGROUP, TRAN_MSG, sizes) and given this broker's CLUSTER; or the error response."""
        raw_props = cols.properties
        try:
            texts = [p.decode("utf-8") for p in raw_props]
        except UnicodeDecodeError as exc:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"the batch properties are not UTF-8: {exc}"
            )
        remark = check_half_batch([decode_properties(props) for props in texts])
        if remark is not None:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, remark)
        cluster = f"{_PROPERTY_CLUSTER}{self.ctx.config.broker_cluster_name}\x02"
        msgs = []
        for flag, body, props in zip(cols.flags, cols.bodies, texts, strict=True):
            error = check_sizes(self.ctx, request, len(body), len(props.encode("utf-8")))
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
        return msgs


def _with_cluster(props: bytes, cluster: bytes) -> bytes:
    """``props`` with the CLUSTER property appended unless present (repairing a missing last \\x02)."""
    if props.startswith(cluster[:8]) or _KEY_CLUSTER in props:
        return props
    if props and not props.endswith(b"\x02"):
        return props + b"\x02" + cluster
    return props + cluster
