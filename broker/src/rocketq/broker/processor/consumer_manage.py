"""Consumer offsets and group membership: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15)
and GET_CONSUMER_LIST_BY_GROUP (38).

QUERY_CONSUMER_OFFSET follows RocketMQ: a committed offset is returned as is; without one, a queue
whose first message was never deleted (min offset 0) answers offset 0 so a new group starts from
the beginning of a young queue, unless the client sends ``setZeroIfNotFound=false``; otherwise
QUERY_NOT_FOUND lets the client apply its ``consumeFromWhere``.
"""

from __future__ import annotations

import json

from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.client.remoting.vocabulary import validate_group
from rocketq.server import Channel

__all__ = ["ConsumerManageProcessor"]


class ConsumerManageProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def query_consumer_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, QueryConsumerOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        problem = validate_group(header.consumer_group)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        offset = self.ctx.offsets.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset < 0:
            min_offset = int(self.ctx.store.get_min_offset_in_queue(header.topic, header.queue_id))
            if min_offset <= 0 and header.set_zero_if_not_found is not False:
                offset = 0
        if offset < 0:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            )
        ext = QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, ext_fields=ext)

    async def update_consumer_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, UpdateConsumerOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        problem = validate_group(header.consumer_group)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        self.ctx.offsets.commit_offset(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def get_consumer_list_by_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, GetConsumerListByGroupRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        group = self.ctx.consumers.get(header.consumer_group)
        if group is None or not group.channels:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        body = json.dumps({"consumerIdList": group.client_ids()}, separators=(",", ":")).encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)
