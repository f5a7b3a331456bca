"""QUERY_MESSAGE (12, by key or by unique key) and VIEW_MESSAGE_BY_ID (33).

Both read the CommitLog (through the IndexFile for keys), so they run on the bounded query
executor.  Bodies are the stored records, joined once.  A query by unique key
(``_UNIQUE_KEY_QUERY=true``) is capped at the store's ``defaultQueryMaxNum`` like RocketMQ.
"""

from __future__ import annotations

from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rocketq.server import Channel

__all__ = ["QueryMessageProcessor"]

DEFAULT_QUERY_MAX_NUM = 32


class QueryMessageProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def query_message(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, QueryMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        max_num = header.max_num
        if header.unique_key_query:
            max_num = int(
                getattr(
                    getattr(self.ctx.store, "config", None), "default_query_max_num", DEFAULT_QUERY_MAX_NUM
                )
            )
        max_num = max(1, min(max_num, 64 * DEFAULT_QUERY_MAX_NUM))
        store = self.ctx.store

        def run() -> tuple[bytes, int, int]:
            result = store.query_message(
                header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
            )
            try:
                body = b"".join(result.buffers) if result.buffers else b""
            finally:
                result.release()
            return body, result.index_last_update_timestamp, result.index_last_update_phy_offset

        try:
            body, last_ts, last_phy = await self.ctx.query_executor.run(run)
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=last_ts, index_last_update_phyoffset=last_phy
        ).to_ext_fields()
        if not body:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext
            )
        return request.make_response(ResponseCode.SUCCESS, None, ext, body)

    async def view_message_by_id(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, ViewMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        store = self.ctx.store
        offset = header.offset
        if offset < 0:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        try:
            record = await self.ctx.query_executor.run(lambda: store.look_message_by_offset(offset))
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if not record:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return request.make_response(ResponseCode.SUCCESS, body=bytes(record))
