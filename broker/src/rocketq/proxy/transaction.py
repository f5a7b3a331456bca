"""Transactional messages of 5.x SDKs: half sends, EndTransaction, and the broker's check-backs.

Theory of operation.  As RocketMQ's proxy, the producer group of a transaction is its *topic*:
the proxy keeps one :class:`~rocketq.client.producer.AsyncTransactionProducer` per topic on its
client instance, so the half messages carry that group (``PGROUP``) and the brokers' check-backs
for them come to the proxy's connection.  The transaction id handed to the SDK is
:class:`ProxyTransactionId`: the half message's offset msgId (broker address and CommitLog
offset), its offset in the half topic's queue and the message id, everything END_TRANSACTION needs,
so EndTransaction works on any proxy and after a restart.  A check-back is forwarded to one
Telemetry stream of a producer that publishes to the topic (a RecoverOrphanedTransactionCommand);
that SDK's checker decides and sends EndTransaction with the source SERVER_CHECK, which becomes
an END_TRANSACTION marked as coming from a check.  The producer answers the broker "unknown" at
once, which leaves the decision to that EndTransaction (or to the next check-back, when no
producer of the topic is connected).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Sequence

from rocketq.client.errors import ClientError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import LocalTransactionState, Message, MessageExt
from rocketq.client.producer import AsyncTransactionProducer
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst
from rocketq.proxy.convert import Refusal, to_grpc_message
from rocketq.proxy.naming import unwrap
from rocketq.proxy.status import code_of_error
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

__all__ = ["ProxyTransactionId", "ProxyTransactions", "TelemetryHub"]

log = logging.getLogger("rocketq.proxy")

_TID_PREFIX = "rqtx1"


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyTransactionId:
    """What END_TRANSACTION needs about a half message, as the one string the SDK keeps."""

    offset_msg_id: str
    tran_state_table_offset: int
    message_id: str

    def __str__(self) -> str:
        return f"{_TID_PREFIX}-{self.offset_msg_id}-{self.tran_state_table_offset}-{self.message_id}"

    @classmethod
    def parse(cls, text: str) -> ProxyTransactionId | None:
        parts = text.split("-")
        if len(parts) != 4 or parts[0] != _TID_PREFIX or not parts[2].isdigit():
            return None
        try:
            decode_offset_msg_id(parts[1])
        except RocketQError:
            return None
        return cls(parts[1], int(parts[2]), parts[3])

    def broker_addr(self) -> str:
        host, port, _ = decode_offset_msg_id(self.offset_msg_id)
        return f"{host}:{port}"

    def commit_log_offset(self) -> int:
        return decode_offset_msg_id(self.offset_msg_id)[2]


class TelemetryHub:
    """The open Telemetry streams of producers, by the topics they publish to."""

    def __init__(self) -> None:
        self._by_topic: dict[str, set[asyncio.Queue[spb.TelemetryCommand]]] = {}
        self._namespaces: dict[asyncio.Queue[spb.TelemetryCommand], str] = {}

    def publish(
        self, stream: asyncio.Queue[spb.TelemetryCommand], topics: Sequence[str], namespace: str
    ) -> None:
        """``topics`` as the brokers name them; ``namespace`` is the client's."""
        self.forget(stream)
        self._namespaces[stream] = namespace
        for topic in topics:
            self._by_topic.setdefault(topic, set()).add(stream)

    def forget(self, stream: asyncio.Queue[spb.TelemetryCommand]) -> None:
        self._namespaces.pop(stream, None)
        for streams in self._by_topic.values():
            streams.discard(stream)

    def send_check_to_producer_of(self, topic: str, message: pb.Message, transaction_id: str) -> bool:
        """Queue a RecoverOrphanedTransactionCommand on one stream of a producer of ``topic`` (the
        message's topic in that client's namespace); False when there is none."""
        streams = list(self._by_topic.get(topic, ()))
        if not streams:
            return False
        stream = random.choice(streams)
        copy = pb.Message()
        copy.CopyFrom(message)
        copy.topic.CopyFrom(unwrap(topic, self._namespaces.get(stream, "")))
        command = spb.RecoverOrphanedTransactionCommand(message=copy, transaction_id=transaction_id)
        stream.put_nowait(spb.TelemetryCommand(recover_orphaned_transaction_command=command))
        return True


_RESOLUTIONS = {
    pb.TransactionResolution.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
    pb.TransactionResolution.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE,
}


class ProxyTransactions:
    """The transactional producers of the proxy (one per topic) and the EndTransaction path."""

    def __init__(
        self, namesrv_addr: str, instance: ClientInstance, hub: TelemetryHub, max_message_size: int
    ) -> None:
        self._namesrv_addr = namesrv_addr
        self._instance = instance
        self._hub = hub
        self._max_message_size = max_message_size
        self._producers: dict[str, AsyncTransactionProducer] = {}
        self._lock = asyncio.Lock()

    async def _producer(self, topic: str) -> AsyncTransactionProducer:
        async with self._lock:
            producer = self._producers.get(topic)
            if producer is None:

                async def check(msg: MessageExt) -> LocalTransactionState:
                    return self._forward_check(topic, msg)

                producer = AsyncTransactionProducer(
                    self._namesrv_addr,
                    instance=self._instance,
                    check_listener=check,
                    producer_group=topic,
                    max_message_size=self._max_message_size,
                )
                await producer.start()
                self._producers[topic] = producer
            return producer

    async def send_half(self, msg: Message) -> spb.SendResultEntry:
        try:
            producer = await self._producer(msg.topic)
            half, result = await producer.send_half_message(msg)
        except RocketQError as exc:
            return spb.SendResultEntry(
                status=pb.Status(
                    code=code_of_error(exc), message=f"half message to {msg.topic} failed: {exc}"
                )
            )
        message_id = half.properties.get(MessageConst.UNIQ_KEY) or result.msg_id
        tid = ProxyTransactionId(result.offset_msg_id, result.queue_offset, message_id)
        return spb.SendResultEntry(
            status=pb.Status(code=pb.Code.OK, message="OK"),
            message_id=message_id,
            transaction_id=str(tid),
            offset=result.queue_offset,
        )

    async def end(self, request: spb.EndTransactionRequest) -> Refusal | None:
        """END_TRANSACTION for an SDK's EndTransaction; None once the broker took it."""
        tid = ProxyTransactionId.parse(request.transaction_id)
        if tid is None:
            return Refusal(
                pb.Code.INVALID_TRANSACTION_ID,
                f"{request.transaction_id!r} is not a transaction id this proxy handed out",
            )
        state = _RESOLUTIONS.get(request.resolution)
        if state is None:
            return Refusal(pb.Code.BAD_REQUEST, "the resolution must be COMMIT or ROLLBACK")
        topic = request.topic.name
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=tid.tran_state_table_offset,
            commit_log_offset=tid.commit_log_offset(),
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=tid.offset_msg_id,
            transaction_id=tid.message_id,
            topic=topic,
        )
        try:
            await self._instance.api.end_transaction(tid.broker_addr(), header, oneway=False)
        except ClientError as exc:
            return Refusal(pb.Code.BAD_REQUEST, f"end of transaction {request.transaction_id} refused: {exc}")
        except RocketQError as exc:
            return Refusal(code_of_error(exc), f"end of transaction {request.transaction_id} failed: {exc}")
        return None

    def _forward_check(self, topic: str, msg: MessageExt) -> LocalTransactionState:
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC, topic)
        tid = ProxyTransactionId(msg.offset_msg_id, msg.queue_offset, msg.msg_id)
        message = to_grpc_message(dataclasses.replace(msg, topic=real_topic), None)
        if not self._hub.send_check_to_producer_of(real_topic, message, str(tid)):
            log.info(
                "check of transaction %s: no producer of %s is connected; the broker asks again", tid, topic
            )
        return LocalTransactionState.UNKNOW

    async def close(self) -> None:
        for producer in list(self._producers.values()):
            await producer.shutdown()
        self._producers.clear()
