"""VIEW_BROKER_STATS_DATA (315) and QUERY_TOPIC_CONSUME_BY_WHO (300), the broker side of mqadmin
``statsAll`` and ``exportMetrics`` (:mod:`rocketq.client.remoting.broker_stats` has the wire forms).

VIEW_BROKER_STATS_DATA answers one item of the broker's statistics
(:mod:`rocketq.broker.stats_items`) as ``BrokerStatsData`` JSON, or SYSTEM_ERROR ``The stats
<name> <key> not exist`` for an item never counted, as Java's ``AdminBrokerProcessor`` answers.
QUERY_TOPIC_CONSUME_BY_WHO answers the groups consuming a topic: those online with a subscription
to it and those holding offsets on it (Java's ``queryTopicConsumeByWho``).
"""

from __future__ import annotations

from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.broker_stats import (
    QueryTopicConsumeByWhoRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    encode_group_list,
    stats_not_exist_remark,
)
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel

__all__ = ["BrokerStatsProcessor"]


class BrokerStatsProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def view_broker_stats_data(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = parse_header(request, ViewBrokerStatsDataRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        data = self.ctx.stats_items.view(header.stats_name, header.stats_key)
        if data is None:
            remark = stats_not_exist_remark(header.stats_name, header.stats_key)
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        return request.make_response(ResponseCode.SUCCESS, body=data.encode())

    async def query_topic_consume_by_who(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = parse_header(request, QueryTopicConsumeByWhoRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        groups = self.ctx.consumers.groups_by_topic(header.topic)
        groups |= self.ctx.offsets.which_groups_by_topic(header.topic)
        return request.make_response(ResponseCode.SUCCESS, body=encode_group_list(groups))
