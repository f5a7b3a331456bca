"""Queue statistics and offset resets: GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203) and INVOKE_BROKER_TO_RESET_OFFSET (222).

RocketMQ serialises these tables with fastjson, whose maps keyed by ``MessageQueue`` are written
with *object* keys (``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``).  That is not standard
JSON, but every RocketMQ client (and rocketq's lenient parser) expects exactly that shape, so
:func:`mq_table_json` writes it, with the inner values in standard JSON.

An offset reset computes, per write queue, the offset for the timestamp (``-1`` = the max offset);
with ``isForce=false`` a queue whose committed offset is already below that target keeps it.  The
new offsets are committed on the broker (server-side reset) and pushed to every online consumer of
the group with RESET_CONSUMER_CLIENT_OFFSET (220), so push consumers drop their cached messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable

from rocketq.broker.client_manager import connection_set
from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.pull import readable_max_offset
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    ResetConsumerClientOffsetRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.server import Channel

__all__ = ["StatsProcessor", "mq_table_json"]

log = logging.getLogger(__name__)
RESET_CALL_TIMEOUT_MS = 5_000


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def mq_table_json(table: Iterable[tuple[MessageQueue, object]]) -> str:
    """A ``{MessageQueue: value}`` map in fastjson's object-key form."""
    return "{" + ",".join(f"{_compact(mq.to_obj())}:{_compact(v)}" for mq, v in table) + "}"


class StatsProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def _mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.ctx.config.broker_name, queue_id)

    async def get_topic_stats_info(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, GetTopicStatsInfoRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        tc = self.ctx.topics.select(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        store = self.ctx.store

        def collect() -> list[tuple[MessageQueue, dict[str, int]]]:
            rows = []
            for q in range(tc.write_queue_nums):
                # confirmed only (controller mode), as GET_MAX_OFFSET answers and as Java's
                # ConsumeQueue holds: a reader planning on this max never asks for an unconfirmed tail
                max_off = readable_max_offset(store, header.topic, q)
                min_off = max(int(store.get_min_offset_in_queue(header.topic, q)), 0)
                last = int(store.get_store_time(header.topic, q, max_off - 1)) if max_off > 0 else 0
                rows.append(
                    (
                        self._mq(header.topic, q),
                        {"lastUpdateTimestamp": max(last, 0), "maxOffset": max_off, "minOffset": min_off},
                    )
                )
            return rows

        try:
            rows = await self.ctx.query_executor.run(collect)
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        body = '{"offsetTable":' + mq_table_json(rows) + "}"
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def get_consume_stats(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, GetConsumeStatsRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        ctx = self.ctx
        group = header.consumer_group
        topics = (
            [header.topic]
            if header.topic
            else sorted(ctx.offsets.which_topics_by_consumer(group) | set(self._subscribed_topics(group)))
        )
        store = ctx.store

        def collect() -> list[tuple[MessageQueue, dict[str, int]]]:
            rows = []
            for topic in topics:
                tc = ctx.topics.select(topic)
                if tc is None:
                    continue
                for q in range(tc.write_queue_nums):
                    broker_offset = max(int(store.get_max_offset_in_queue(topic, q)), 0)
                    consumer_offset = max(ctx.offsets.query_offset(group, topic, q), 0)
                    last = 0
                    if consumer_offset > 0:
                        last = max(int(store.get_store_time(topic, q, consumer_offset - 1)), 0)
                    rows.append(
                        (
                            self._mq(topic, q),
                            {
                                "brokerOffset": broker_offset,
                                "consumerOffset": consumer_offset,
                                "lastTimestamp": last,
                            },
                        )
                    )
            return rows

        try:
            rows = await ctx.query_executor.run(collect)
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        body = '{"consumeTps":0.0,"offsetTable":' + mq_table_json(rows) + "}"
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    def _subscribed_topics(self, group: str) -> list[str]:
        info = self.ctx.consumers.get(group)
        return [] if info is None else list(info.subscriptions)

    async def get_consumer_connection_list(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, GetConsumerConnectionListRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        info = self.ctx.consumers.get(header.consumer_group)
        if info is None or not info.channels:
            return request.make_response(
                206,
                f"the consumer group[{header.consumer_group}] not online",  # CONSUMER_NOT_ONLINE
            )
        body = {
            "connectionSet": connection_set(info.channels.values()),
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: s.to_obj() for t, s in info.subscriptions.items()},
        }
        return request.make_response(ResponseCode.SUCCESS, body=_compact(body).encode("utf-8"))

    async def invoke_broker_to_reset_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, ResetOffsetRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        ctx = self.ctx
        tc = ctx.topics.select(header.topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"[reset offset] topic[{header.topic}] not exist"
            )
        store = ctx.store

        def targets() -> dict[int, int]:
            out: dict[int, int] = {}
            for q in range(tc.write_queue_nums):
                if header.timestamp == -1:
                    target = int(store.get_max_offset_in_queue(header.topic, q))
                else:
                    target = int(store.get_offset_in_queue_by_time(header.topic, q, header.timestamp))
                committed = ctx.offsets.query_offset(header.group, header.topic, q)
                if header.is_force or committed < 0 or committed > target:
                    out[q] = target
                else:
                    out[q] = committed
            return out

        try:
            offsets = await ctx.query_executor.run(targets)
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        ctx.offsets.reset_offsets(header.group, header.topic, offsets)
        body = (
            '{"offsetTable":'
            + mq_table_json((self._mq(header.topic, q), o) for q, o in sorted(offsets.items()))
            + "}"
        ).encode("utf-8")
        await self._push_reset(header, body)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def _push_reset(self, header: ResetOffsetRequestHeader, body: bytes) -> None:
        info = self.ctx.consumers.get(header.group)
        if info is None:
            return
        ext = ResetConsumerClientOffsetRequestHeader(
            topic=header.topic, group=header.group, timestamp=header.timestamp, is_force=header.is_force
        ).to_ext_fields()

        async def call(ch: Channel) -> None:
            cmd = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body)
            try:
                await ch.invoke(cmd, RESET_CALL_TIMEOUT_MS)
            except (RocketQError, OSError) as exc:
                log.warning(
                    "reset offset of %s on client %s failed: %s",
                    header.group,
                    getattr(ch, "remote_address", "?"),
                    exc,
                )

        await asyncio.gather(*(call(ch) for ch in info.all_channels()))
