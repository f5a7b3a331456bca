"""NOTIFICATION (200054) and POLLING_INFO (200055): whether a POP would find something, who waits.

NOTIFICATION (RocketMQ 5's ``NotificationProcessor``) answers ``hasMsg`` = some queue of the
topic (or the named queue), or of the group's POP retry topics, has messages past the group's POP
offset; with ``pollTime`` > 0 and nothing there it waits in the same long polling as POP until
an arrival or ``bornTime + pollTime``.  A full polling table answers ``pollingFull``.  An
orderly notification also wakes when the first held queue (or message group) of the topic frees,
then looks again and waits on while there is still nothing.
POLLING_INFO answers ``pollingNum``: the pops and notifications of the group waiting on the topic.
Orderly notifications (``order=true``) look at the topic only, and a queue the order table blocks
(Java's ``checkBlock`` with the request's attemptId; under ``popOrderBlockScope=group`` a queue
whose messages all wait for held message groups) has no message for them.
"""

from __future__ import annotations

import asyncio
import time

from rocketq.broker.pop.orderly import orderly_may_deliver
from rocketq.broker.pop.polling import PopLongPolling
from rocketq.broker.pop.reading import all_retry_topics, has_message
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
)
from rocketq.server import Channel

__all__ = ["NotificationProcessor"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class NotificationProcessor:
    """Registered for NOTIFICATION and POLLING_INFO."""

    def __init__(self, ctx: BrokerContext, polling: PopLongPolling) -> None:
        self.ctx = ctx
        self.polling = polling

    def _check(
        self, request: RemotingCommand, topic: str, group: str, queue_id: int
    ) -> RemotingCommand | None:
        ctx = self.ctx
        if not ctx.readable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] pop is forbidden"
            )
        tc = ctx.topics.select(topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if queue_id >= tc.read_queue_nums:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        if ctx.groups.find(group) is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        return None

    def _has_msg(self, header: NotificationRequestHeader) -> bool:
        ctx = self.ctx
        group = header.consumer_group
        retry = [] if header.order else all_retry_topics(ctx.config, header.topic, group)
        for topic in [*retry, header.topic]:
            tc = ctx.topics.select(topic)
            if tc is None:
                continue
            queue_ids = [
                q
                for q in (
                    range(tc.read_queue_nums)
                    if header.queue_id < 0 or topic != header.topic
                    else [header.queue_id]
                )
                if not header.order or orderly_may_deliver(ctx, group, topic, q, header.attempt_id)
            ]
            if has_message(ctx.store, ctx.offsets, ctx.config, group, topic, queue_ids, 0):
                return True
        return False

    def _first_lock_free(self, header: NotificationRequestHeader) -> int | None:
        """When the first held queue (or message group) of an orderly notification frees."""
        tc = self.ctx.topics.select(header.topic)
        if tc is None:
            return None
        queue_ids = range(tc.read_queue_nums) if header.queue_id < 0 else [header.queue_id]
        order = self.ctx.pop_order
        times = [
            t
            for q in queue_ids
            if (t := order.lock_free_timestamp(header.topic, header.consumer_group, q)) is not None
        ]
        return min(times) if times else None

    async def notification(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, NotificationRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        refused = self._check(request, header.topic, header.consumer_group, header.queue_id)
        if refused is not None:
            return refused
        has_msg = self._has_msg(header)
        full = False
        now = _now_ms()
        deadline = min(header.born_time + header.poll_time, now + header.poll_time)
        topics = [header.topic, *all_retry_topics(self.ctx.config, header.topic, header.consumer_group)]
        while not has_msg and (remaining := deadline - _now_ms()) > 0:
            free_at = self._first_lock_free(header) if header.order else None
            if free_at is not None:  # a held queue or message group may free before the deadline
                remaining = max(min(remaining, free_at - _now_ms()), 1)
            future = self.polling.wait(
                topics, header.consumer_group, remaining, lambda: self._has_msg(header)
            )
            if future is None:
                full = True
                break
            arrived = await asyncio.shield(future)
            if arrived or header.order:
                has_msg = self._has_msg(header)
            if not arrived and not header.order:
                break
        response_header = NotificationResponseHeader(has_msg=has_msg, polling_full=full)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields())

    async def polling_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, PollingInfoRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        refused = self._check(request, header.topic, header.consumer_group, header.queue_id)
        if refused is not None:
            return refused
        response_header = PollingInfoResponseHeader(
            polling_num=self.polling.polling_num(header.topic, header.consumer_group)
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields())
