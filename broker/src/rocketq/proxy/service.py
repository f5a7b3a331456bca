"""``apache.rocketmq.v2.MessagingService`` served over the remoting client library (cluster mode).

One :class:`~rocketq.client.instance.ClientInstance` holds the routes and broker connections of
the whole proxy; sends go through one :class:`~rocketq.client.producer.AsyncProducer` on it, POP
requests through :mod:`rocketq.proxy.consumer`.  Every answer carries an
``apache.rocketmq.v2.Status``: expected failures (unknown topic, oversized body, expired receipt
handle, a broker's refusal) are status codes, never gRPC errors, as RocketMQ's proxy answers them.
RPCs this slice does not serve yet answer NOT_IMPLEMENTED with a sentence saying so
(docs/grpc.md lists them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from rocketq.client.errors import ClientError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.producer import AsyncProducer
from rocketq.proxy.client_registry import GrpcClients, metadata_of
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.consumer import (
    Popped,
    change_handle,
    change_invisible,
    check_group,
    forward_to_dead_letter_queue,
    plan_receive,
    pop,
    settle_ack,
)
from rocketq.proxy.convert import Refusal, to_grpc_message, to_remoting_message
from rocketq.proxy.groups import GroupPolicy, SubscriptionGroups
from rocketq.proxy.naming import wrap_resources
from rocketq.proxy.offsets import get_offset, pull, query_offset, update_offset
from rocketq.proxy.renew import HandleRenewer, client_id_of, renew_settings
from rocketq.proxy.route import ACCEPTED_TYPES, accepted_types, grpc_assignments, grpc_queues
from rocketq.proxy.send_coalescer import SendCoalescer
from rocketq.proxy.settings import server_settings
from rocketq.proxy.status import code_of_error, ok, status
from rocketq.proxy.telemetry_relay import TelemetryRelay
from rocketq.proxy.topics import TopicTypes
from rocketq.proxy.transaction import ProxyTransactions, TelemetryHub
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.proxy.v2.service_pb2_grpc import MessagingServiceServicer

__all__ = ["MessagingService"]

log = logging.getLogger("rocketq.proxy")

Context: TypeAlias = grpc.aio.ServicerContext


def _refused(r: Refusal) -> pb.Status:
    return status(r.code, r.message)


def _not_implemented(rpc: str) -> pb.Status:
    return status(pb.Code.NOT_IMPLEMENTED, f"{rpc} is not served by rocketq's proxy yet (docs/grpc.md)")


class MessagingService(MessagingServiceServicer):
    """The RPC handlers; ``endpoints`` is the proxy's own address, put into every route."""

    def __init__(
        self,
        config: ProxyConfig,
        instance: ClientInstance,
        producer: AsyncProducer,
        transactions: ProxyTransactions,
        hub: TelemetryHub,
        endpoints: pb.Endpoints,
        groups: SubscriptionGroups,
        topic_types: TopicTypes,
        clients: GrpcClients | None = None,
        relay: TelemetryRelay | None = None,
    ) -> None:
        self.config = config
        self.instance = instance
        self.producer = producer
        #: plain messages sent at the same time to one topic leave as one batch (send_coalescer)
        self.sends = SendCoalescer(producer)
        self.transactions = transactions
        self.hub = hub
        self.endpoints = endpoints
        self.groups = groups
        self.topic_types = topic_types
        self.clients = clients  # the 5.x clients announced to the brokers (client_registry)
        self.relay = relay  # brokers' requests relayed over Telemetry (telemetry_relay)
        #: push consumers' handles renewed until acked (renew); None: enableProxyAutoRenew=false
        self.renewer = (
            HandleRenewer(renew_settings(config), self._change_handle)
            if config.enable_proxy_auto_renew
            else None
        )

    async def _change_handle(
        self, group: str, topic: str, handle: str, invisible_ms: int
    ) -> tuple[str, int] | Refusal:
        return await change_handle(self.instance, group, topic, handle, invisible_ms)

    async def _current_handle(self, context: Context, group: str, msg_id: str, handle: str) -> str:
        """The handle the broker knows a message by now (renewed ones change); renewal stops."""
        if self.renewer is None:
            return handle
        return await self.renewer.take(client_id_of(context), group, msg_id, handle)

    # ------------------------------------------------------------------ routes and sessions

    async def QueryRoute(self, request: spb.QueryRouteRequest, context: Context) -> spb.QueryRouteResponse:
        original = request.topic
        request, _ = wrap_resources(request)
        topic = request.topic.name
        if not topic:
            return spb.QueryRouteResponse(status=status(pb.Code.ILLEGAL_TOPIC, "the request names no topic"))
        try:
            route = await self.instance.update_topic_route(topic)
        except RocketQError as exc:
            return spb.QueryRouteResponse(
                status=status(code_of_error(exc), f"no route of topic {topic}: {exc}")
            )
        # the address the client reached us on, when it says (port mappings keep working)
        endpoints = request.endpoints if request.endpoints.addresses else self.endpoints
        queues = grpc_queues(original, route, endpoints, await self._accepted_types(topic))
        if not queues:
            return spb.QueryRouteResponse(
                status=status(
                    pb.Code.TOPIC_NOT_FOUND, f"topic {topic} has no queue on a broker with a master"
                )
            )
        return spb.QueryRouteResponse(status=ok(), message_queues=queues)

    async def _accepted_types(self, topic: str) -> tuple[pb.MessageType, ...]:
        """What QueryRoute says the topic's queues accept: what the send check lets through."""
        if not self.config.enable_topic_message_type_check:
            return ACCEPTED_TYPES
        return accepted_types(await self.topic_types.topic_type(topic))

    async def Heartbeat(self, request: spb.HeartbeatRequest, context: Context) -> spb.HeartbeatResponse:
        request, _ = wrap_resources(request)
        if request.HasField("group") and request.group.name:
            refused = check_group(request.group)
            if refused is not None:
                return spb.HeartbeatResponse(status=_refused(refused))
        if self.clients is not None:
            self.clients.on_heartbeat(metadata_of(context.invocation_metadata()))
        return spb.HeartbeatResponse(status=ok())

    async def Telemetry(
        self, request_iterator: AsyncIterator[spb.TelemetryCommand], context: Context
    ) -> AsyncIterator[spb.TelemetryCommand]:
        """Answers the client's commands and carries the server's (transaction checks) to it."""
        outgoing: asyncio.Queue[spb.TelemetryCommand] = asyncio.Queue()
        if self.renewer is not None:
            self.renewer.stream_opened(client_id_of(context))
        metadata = metadata_of(context.invocation_metadata())
        reader = asyncio.create_task(
            self._read_telemetry(request_iterator, outgoing, context.peer(), metadata)
        )
        try:
            while True:
                getter = asyncio.ensure_future(outgoing.get())
                await asyncio.wait((getter, reader), return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():  # the client closed its side
                    getter.cancel()
                    break
                yield getter.result()
        finally:
            if self.renewer is not None:  # its last stream gone, a client's messages come back
                self.renewer.stream_closed(client_id_of(context))
            self.hub.forget(outgoing)
            if self.clients is not None:
                self.clients.stream_closed(outgoing)
            reader.cancel()
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                log.info("telemetry stream of %s ended: %s", context.peer(), reader.exception())

    async def _read_telemetry(
        self,
        request_iterator: AsyncIterator[spb.TelemetryCommand],
        outgoing: asyncio.Queue[spb.TelemetryCommand],
        peer: str,
        metadata: dict[str, str] | None = None,
    ) -> None:
        async for command in request_iterator:
            kind = command.WhichOneof("command")
            if kind == "settings":
                settings = command.settings
                if settings.WhichOneof("pub_sub") == "publishing":
                    named, namespace = wrap_resources(settings.publishing)
                    self.hub.publish(outgoing, [t.name for t in named.topics], namespace)
                if self.clients is not None:
                    self.clients.on_settings(metadata or {}, settings, outgoing)
                group = await self._group_of(settings)
                outgoing.put_nowait(
                    spb.TelemetryCommand(status=ok(), settings=server_settings(settings, self.config, group))
                )
            elif self.relay is not None and self.relay.on_reply(command):
                continue  # a ThreadStackTrace / VerifyMessageResult a broker waits for
            elif kind is not None:
                log.debug("telemetry command %s from %s ignored", kind, peer)

    async def _group_of(self, settings: pb.Settings) -> GroupPolicy | None:
        """A consumer's group settings (None for producers, or a consumer naming no topic)."""
        if settings.WhichOneof("pub_sub") != "subscription":
            return None
        named, _ = wrap_resources(settings.subscription)
        if not named.group.name or not named.subscriptions or check_group(named.group) is not None:
            return None
        return await self.groups.policy(named.group.name, named.subscriptions[0].topic.name)

    async def NotifyClientTermination(
        self, request: spb.NotifyClientTerminationRequest, context: Context
    ) -> spb.NotifyClientTerminationResponse:
        if self.clients is not None:
            self.clients.terminate(metadata_of(context.invocation_metadata()))
        if self.renewer is not None:
            self.renewer.client_gone(client_id_of(context))
        return spb.NotifyClientTerminationResponse(status=ok())

    # ------------------------------------------------------------------ producing

    async def SendMessage(self, request: spb.SendMessageRequest, context: Context) -> spb.SendMessageResponse:
        request, _ = wrap_resources(request)
        if not request.messages:
            return spb.SendMessageResponse(status=status(pb.Code.BAD_REQUEST, "the request holds no message"))
        entries = [await self._send_one(m) for m in request.messages]
        codes = {e.status.code for e in entries}
        overall = entries[0].status if len(codes) == 1 else status(pb.Code.MULTIPLE_RESULTS, "see each entry")
        return spb.SendMessageResponse(status=overall, entries=entries)

    async def _send_one(self, message: pb.Message) -> spb.SendResultEntry:
        converted = to_remoting_message(message, self.config.max_message_size)
        if isinstance(converted, Refusal):
            return spb.SendResultEntry(status=_refused(converted))
        try:
            await self.instance.get_route(converted.topic)  # unknown topics: no auto-creation here
            mismatch = await self.topic_types.refusal(converted.topic, message)
            if mismatch is not None:
                return spb.SendResultEntry(status=_refused(mismatch))
            if message.system_properties.message_type == pb.MessageType.TRANSACTION:
                return await self.transactions.send_half(converted)
            result = await self.sends.send(converted)
        except RocketQError as exc:
            log.info("send to %s refused: %s", converted.topic, exc)
            return spb.SendResultEntry(
                status=status(code_of_error(exc), f"send to {converted.topic} failed: {exc}")
            )
        return spb.SendResultEntry(
            status=ok(),
            message_id=result.msg_id,
            offset=result.queue_offset,
            recall_handle=result.recall_handle or "",
        )

    async def EndTransaction(
        self, request: spb.EndTransactionRequest, context: Context
    ) -> spb.EndTransactionResponse:
        request, _ = wrap_resources(request)
        refused = await self.transactions.end(request)
        return spb.EndTransactionResponse(status=ok() if refused is None else _refused(refused))

    # ------------------------------------------------------------------ consuming

    async def ReceiveMessage(
        self, request: spb.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        request, namespace = wrap_resources(request)
        order = plan_receive(request, self.config, context.time_remaining())
        if isinstance(order, Refusal):
            result: Popped | Refusal = order
        else:
            group = await self.groups.policy(order.group, order.topic, order.broker_name)
            order = dataclasses.replace(order, fifo=group.fifo, max_attempts=group.max_attempts)
            result = await pop(self.instance, order, self.instance.config.mq_client_api_timeout_ms)
            if request.auto_renew and isinstance(result, Popped):
                self._renew(context, order.group, order.topic, result)
        # the order the SDKs read: the status, the messages, then the delivery timestamp
        if isinstance(result, Refusal):
            yield spb.ReceiveMessageResponse(status=_refused(result))
        elif not result.messages:
            yield spb.ReceiveMessageResponse(status=status(pb.Code.MESSAGE_NOT_FOUND, "no new message"))
        else:
            yield spb.ReceiveMessageResponse(status=ok())
            for msg, handle in result.messages:
                yield spb.ReceiveMessageResponse(message=to_grpc_message(msg, handle, namespace))
        now = Timestamp()
        now.GetCurrentTime()
        yield spb.ReceiveMessageResponse(delivery_timestamp=now)

    def _renew(self, context: Context, group: str, topic: str, popped: Popped) -> None:
        """Renew the handles of a push consumer's receive until it acks them (renew)."""
        if self.renewer is None:
            return
        self.renewer.start()
        client_id = client_id_of(context)
        for msg, handle in popped.messages:
            self.renewer.add(client_id, group, topic, msg.msg_id, handle)

    async def AckMessage(self, request: spb.AckMessageRequest, context: Context) -> spb.AckMessageResponse:
        request, _ = wrap_resources(request)
        refused = check_group(request.group)
        if refused is not None:
            return spb.AckMessageResponse(status=_refused(refused))
        entries = []
        for entry in request.entries:
            handle = await self._current_handle(
                context, request.group.name, entry.message_id, entry.receipt_handle
            )
            failed = await settle_ack(self.instance, request.group.name, request.topic.name, handle)
            entries.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id,
                    receipt_handle=entry.receipt_handle,
                    status=ok() if failed is None else _refused(failed),
                )
            )
        codes = {e.status.code for e in entries}
        if not entries:
            overall = status(pb.Code.BAD_REQUEST, "the request holds no entry")
        elif len(codes) == 1:
            overall = entries[0].status
        else:
            overall = status(pb.Code.MULTIPLE_RESULTS, "see each entry")
        return spb.AckMessageResponse(status=overall, entries=entries)

    async def ChangeInvisibleDuration(
        self, request: spb.ChangeInvisibleDurationRequest, context: Context
    ) -> spb.ChangeInvisibleDurationResponse:
        request, _ = wrap_resources(request)
        request.receipt_handle = await self._current_handle(
            context, request.group.name, request.message_id, request.receipt_handle
        )
        result = await change_invisible(self.instance, request, self.config)
        if isinstance(result, Refusal):
            return spb.ChangeInvisibleDurationResponse(status=_refused(result))
        return spb.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=result)

    # ------------------------------------------------------------------ not served yet

    async def QueryAssignment(
        self, request: spb.QueryAssignmentRequest, context: Context
    ) -> spb.QueryAssignmentResponse:
        original = request.topic
        request, _ = wrap_resources(request)
        refused = check_group(request.group)
        if refused is not None:
            return spb.QueryAssignmentResponse(status=_refused(refused))
        topic = request.topic.name
        try:
            route = await self.instance.get_route(topic)
        except RocketQError as exc:
            return spb.QueryAssignmentResponse(
                status=status(code_of_error(exc), f"no route of topic {topic}: {exc}")
            )
        endpoints = request.endpoints if request.endpoints.addresses else self.endpoints
        assignments = grpc_assignments(original, route, endpoints)
        if not assignments:
            return spb.QueryAssignmentResponse(
                status=status(
                    pb.Code.FORBIDDEN, f"topic {topic} has no readable queue on a broker with a master"
                )
            )
        return spb.QueryAssignmentResponse(status=ok(), assignments=assignments)

    async def ForwardMessageToDeadLetterQueue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        request, _ = wrap_resources(request)
        request.receipt_handle = await self._current_handle(
            context, request.group.name, request.message_id, request.receipt_handle
        )
        refused = await forward_to_dead_letter_queue(self.instance, request)
        return spb.ForwardMessageToDeadLetterQueueResponse(
            status=ok() if refused is None else _refused(refused)
        )

    async def RecallMessage(
        self, request: spb.RecallMessageRequest, context: Context
    ) -> spb.RecallMessageResponse:
        request, _ = wrap_resources(request)
        topic = request.topic.name
        if not topic:
            return spb.RecallMessageResponse(
                status=status(pb.Code.ILLEGAL_TOPIC, "the request names no topic")
            )
        try:
            msg_id = await self.producer.recall(topic, request.recall_handle)
        except ClientError as exc:  # not a recall handle
            return spb.RecallMessageResponse(status=status(pb.Code.BAD_REQUEST, str(exc)))
        except RocketQError as exc:
            return spb.RecallMessageResponse(
                status=status(code_of_error(exc), f"recall in topic {topic} failed: {exc}")
            )
        return spb.RecallMessageResponse(status=ok(), message_id=msg_id)

    # ------------------------------------------------------------------ pull consumers (offsets)

    async def UpdateOffset(
        self, request: spb.UpdateOffsetRequest, context: Context
    ) -> spb.UpdateOffsetResponse:
        request, _ = wrap_resources(request)
        refused = await update_offset(self.instance, request)
        return spb.UpdateOffsetResponse(status=ok() if refused is None else _refused(refused))

    async def GetOffset(self, request: spb.GetOffsetRequest, context: Context) -> spb.GetOffsetResponse:
        request, _ = wrap_resources(request)
        result = await get_offset(self.instance, request)
        if isinstance(result, Refusal):
            return spb.GetOffsetResponse(status=_refused(result))
        return spb.GetOffsetResponse(status=ok(), offset=result)

    async def QueryOffset(self, request: spb.QueryOffsetRequest, context: Context) -> spb.QueryOffsetResponse:
        request, _ = wrap_resources(request)
        result = await query_offset(self.instance, request)
        if isinstance(result, Refusal):
            return spb.QueryOffsetResponse(status=_refused(result))
        return spb.QueryOffsetResponse(status=ok(), offset=result)

    async def SyncLiteSubscription(self, request: Any, context: Context) -> spb.SyncLiteSubscriptionResponse:
        return spb.SyncLiteSubscriptionResponse(status=_not_implemented("SyncLiteSubscription"))

    async def PullMessage(
        self, request: spb.PullMessageRequest, context: Context
    ) -> AsyncIterator[spb.PullMessageResponse]:
        """The status, one response per message, then the offset to pull from next (offsets)."""
        request, namespace = wrap_resources(request)
        api_timeout = self.instance.config.mq_client_api_timeout_ms
        result = await pull(self.instance, request, self.config, context.time_remaining(), api_timeout)
        if isinstance(result, Refusal):
            yield spb.PullMessageResponse(status=_refused(result))
            return
        yield spb.PullMessageResponse(status=status(result.code, result.message))
        for msg in result.messages:
            yield spb.PullMessageResponse(message=to_grpc_message(msg, "", namespace))
        yield spb.PullMessageResponse(next_offset=result.next_offset)
