"""Queue offset queries: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29)
and GET_EARLIEST_MSG_STORETIME (32).

Max and min offsets are in-memory ConsumeQueue bounds and are answered on the event loop; the two
time-based queries read store timestamps from the CommitLog and run on the query executor.
"""

from __future__ import annotations

from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.pull import readable_max_offset
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
)
from rocketq.server import Channel

__all__ = ["OffsetQueryProcessor"]


class OffsetQueryProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def get_max_offset(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, GetMaxOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        offset = readable_max_offset(self.ctx.store, header.topic, header.queue_id)  # confirmed only
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    async def get_min_offset(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, GetMinOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        offset = int(self.ctx.store.get_min_offset_in_queue(header.topic, header.queue_id))
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    async def search_offset_by_timestamp(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, SearchOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        store = self.ctx.store
        try:
            offset = await self.ctx.query_executor.run(
                lambda: int(
                    store.get_offset_in_queue_by_time(header.topic, header.queue_id, header.timestamp)
                )
            )
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    async def get_earliest_msg_storetime(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, GetEarliestMsgStoretimeRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        store = self.ctx.store
        try:
            ts = await self.ctx.query_executor.run(
                lambda: int(store.get_earliest_message_time(header.topic, header.queue_id))
            )
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        ext = GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, ext_fields=ext)
