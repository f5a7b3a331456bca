"""Client registration: HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46).

A heartbeat registers the client's producer groups and consumer groups on its channel; for each
consumer group it makes sure the subscription group and its ``%RETRY%group`` topic exist (RocketMQ
creates them here so that failed messages can be sent back).  Membership changes trigger
NOTIFY_CONSUMER_IDS_CHANGED through the consumer manager.
"""

from __future__ import annotations

import json
import time

from rocketq.broker.client_manager import ClientChannelInfo, parse_heartbeat
from rocketq.broker.errors import RequestBodyError
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.pull import compile_sql92_subscription
from rocketq.broker.topic_manager import RETRY_GROUP_TOPIC_PREFIX
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import UnregisterClientRequestHeader
from rocketq.client.remoting.vocabulary import ExpressionType, SubscriptionData
from rocketq.server import Channel

__all__ = ["ClientManageProcessor"]


class ClientManageProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def heart_beat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            data = parse_heartbeat(request.body)
        except RequestBodyError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        ctx = self.ctx
        now = int(time.time() * 1000)

        def info() -> ClientChannelInfo:
            return ClientChannelInfo(
                channel=channel,
                client_id=data.client_id,
                language=request.language.name,
                version=request.version,
                last_update_ms=now,
            )

        for consumer in data.consumers:
            sgc = ctx.groups.find(consumer.group_name)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                if ctx.config.is_master:
                    ctx.topics.create_retry_topic(
                        RETRY_GROUP_TOPIC_PREFIX + consumer.group_name, max(1, sgc.retry_queue_nums)
                    )
            ctx.consumers.register(consumer, info(), notify=notify)
        for group in data.producer_groups:
            ctx.producers.register(group, info())
        return request.make_response(ResponseCode.SUCCESS)

    async def unregister_client(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, UnregisterClientRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        if header.producer_group:
            self.ctx.producers.unregister(header.producer_group, channel)
        if header.consumer_group:
            self.ctx.consumers.unregister(header.consumer_group, channel)
        return request.make_response(ResponseCode.SUCCESS)

    async def check_client_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """``checkClientConfig``: TAG subscriptions always pass; SQL92 needs enablePropertyFilter and
        an expression that compiles, else SUBSCRIPTION_PARSE_FAILED says why (as a pull would)."""
        try:
            body = json.loads(request.body.decode("utf-8")) if request.body else {}
            sub_obj = body.get("subscriptionData") if isinstance(body, dict) else None
            sub = SubscriptionData.from_obj(sub_obj) if isinstance(sub_obj, dict) else None
        except (UnicodeDecodeError, ValueError, TypeError, ProtocolError) as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"CHECK_CLIENT_CONFIG body is not CheckClientRequestBody JSON: {exc}",
            )
        if sub is None or sub.expression_type is ExpressionType.TAG:
            return request.make_response(ResponseCode.SUCCESS)
        compiled = compile_sql92_subscription(self.ctx.config.enable_property_filter, sub.sub_string)
        if isinstance(compiled, str):
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, compiled)
        return request.make_response(ResponseCode.SUCCESS)
