"""GET_POP_STATUS (rocketq's code 260001): a POP group's in-flight counts and retry backlog on this broker.

What ``mqadmin popStatus`` prints (the wire format is in :mod:`rocketq.client.remoting.pop_status`).
The in-flight counts are the broker's :class:`~rocketq.broker.metrics.pop.PopMetricsRecorder`
(``BrokerContext.pop_stats``); the retry backlog is read from the store: for each existing POP
retry topic of (group, topic), V1 and V2, the max offset of each queue less the group's POP offset
there (its min offset when the group never popped it).  The topics of a group without a ``topic``
in the request are those it has offsets or in-flight messages for, its retry topics folded in.
"""

from __future__ import annotations

from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop import RetryFlag, pop_retry_topic_of
from rocketq.client.remoting.pop_status import (
    GetPopStatusRequestHeader,
    PopRetryStatus,
    PopStatus,
    PopTopicStatus,
)
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX
from rocketq.server import Channel

__all__ = ["PopStatusProcessor"]


class PopStatusProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def _topics_of(self, group: str) -> list[str]:
        topics = set(self.ctx.offsets.which_topics_by_consumer(group))
        topics.update(t for (g, t) in self.ctx.pop_stats.in_flight if g == group)
        return sorted(t for t in topics if not t.startswith(RETRY_GROUP_TOPIC_PREFIX))

    def _backlog(self, group: str, topic: str) -> int:
        tc = self.ctx.topics.select(topic)
        if tc is None:
            return 0
        store, total = self.ctx.store, 0
        for queue_id in range(tc.read_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            committed = self.ctx.offsets.query_offset(group, topic, queue_id)
            start = committed if committed >= 0 else store.get_min_offset_in_queue(topic, queue_id)
            total += max(max_offset - start, 0)
        return total

    def status(self, group: str, topic: str | None) -> PopStatus:
        stats = self.ctx.pop_stats
        rows = []
        for t in [topic] if topic else self._topics_of(group):
            by_queue = stats.in_flight_of(group, t)
            retries = []
            for flag in (RetryFlag.RETRY, RetryFlag.RETRY_V2):
                retry = pop_retry_topic_of(t, group, flag)
                if self.ctx.topics.select(retry) is not None:
                    in_flight = sum(stats.in_flight_of(group, retry).values())
                    retries.append(PopRetryStatus(retry, self._backlog(group, retry), in_flight))
            rows.append(PopTopicStatus(t, sum(by_queue.values()), by_queue, tuple(retries)))
        return PopStatus(self.ctx.config.broker_name, group, tuple(rows))

    async def get_pop_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = parse_header(request, GetPopStatusRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        body = self.status(header.consumer_group, header.topic or None)
        return request.make_response(ResponseCode.SUCCESS, body=body.encode())
