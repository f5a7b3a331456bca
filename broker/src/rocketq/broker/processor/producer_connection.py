"""GET_PRODUCER_CONNECTION_LIST (204): the producers of a group connected to this broker.

The request carries ``producerGroup`` in its ext fields; the answer is RocketMQ's
``ProducerConnection`` body, ``{"connectionSet": [{"clientId", "clientAddr", "language",
"version"}]}``, built from the producers' heartbeats.  A group with no producer connected is
answered SYSTEM_ERROR "the producer group[<group>] not exist", as Java's broker does.
"""

from __future__ import annotations

import json

from rocketq.broker.client_manager import connection_set
from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel

__all__ = ["ProducerConnectionProcessor"]


class ProducerConnectionProcessor:
    """Registered for GET_PRODUCER_CONNECTION_LIST."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def get_producer_connection_list(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        group = request.ext_fields.get("producerGroup")
        if not group:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "the custom field <producerGroup> is null"
            )
        channels = self.ctx.producers.get(group)
        if not channels:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": connection_set(channels.values())}
        text = json.dumps(body, separators=(",", ":"), sort_keys=True)
        return request.make_response(ResponseCode.SUCCESS, body=text.encode("utf-8"))
