"""QUERY_CONSUME_QUEUE (321) and GET_ALL_PRODUCER_INFO (328): ``mqadmin queryCq`` and
``mqadmin producer``.  Wire shapes: :mod:`rocketq.client.remoting.cq_producer_bodies`.

QUERY_CONSUME_QUEUE answers as Java's ``AdminBrokerProcessor.queryConsumeQueue``:

- no consume queue ``queueId@topic`` on this broker (unknown topic or queue): SYSTEM_ERROR
  ``"<queueId>@<topic> is not exist!"``;
- ``index`` outside ``[min, max)`` of the queue: SUCCESS with no body and the remark
  ``"Index <index> of <queueId>@<topic> is not exist!"``;
- otherwise the units from ``index`` on, at most ``count`` and, as Java's iterator, within the
  consume queue file holding ``index``, with the queue's min and max index.

With ``consumerGroup`` the body carries the group's subscription of the topic and ``filterData``
(``"<group>@<topic> is not online!"`` when the group has no such subscription here, ``"null"``
for a TAG subscription, the SQL92 expression's ``ConsumerFilterData`` otherwise).  rocketq has no
ConsumeQueueExt, so ``extendDataJson`` and ``bitMap`` stay null; a tags code that is an ext
address (never written by rocketq) gets Java's ``msg`` "Cq extend not exist!addr: <code>".
Where Java evaluates ``eval`` only for units with an ext record, rocketq evaluates the group's
ConsumeQueue-level filter (Java's ``ExpressionMessageFilter.isMatchedByConsumeQueue``) for every
unit with a real tags code: a TAG subscription matches when it is ``*`` or its code set holds the
unit's tags code; an SQL92 subscription cannot be decided from the consume queue and evaluates
true, as in Java without a bloom filter.

GET_ALL_PRODUCER_INFO answers every producer group registered by heartbeats, each producer with
its client id, remote address (Java's ``"/ip:port"``), language, version and last heartbeat time.
"""

from __future__ import annotations

import json

from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.cq_producer_bodies import (
    CQ_EXT_MAX_ADDR,
    ConsumeQueueData,
    ProducerInfo,
    QueryConsumeQueueBody,
    QueryConsumeQueueRequestHeader,
    encode_producer_table,
)
from rocketq.client.remoting.vocabulary import SUB_ALL, ExpressionType, SubscriptionData
from rocketq.server import Channel

__all__ = ["CqProducerAdminProcessor", "matched_by_consume_queue"]


def matched_by_consume_queue(sub: SubscriptionData, tags_code: int) -> bool:
    """Java's ``isMatchedByConsumeQueue`` without a ConsumeQueueExt unit."""
    if sub.expression_type is not ExpressionType.TAG:
        return True  # SQL92: decided on the CommitLog record, not here
    if sub.sub_string == SUB_ALL:
        return True
    as_int = ((tags_code + 2**31) % 2**32) - 2**31  # Java's Long.intValue()
    return as_int in sub.code_set


def _filter_data(group: str, sub: SubscriptionData) -> str:
    """Java's pretty ``ConsumerFilterData`` JSON ("null" for a TAG subscription)."""
    if sub.expression_type is ExpressionType.TAG:
        return "null"
    doc = {
        "bornTime": sub.sub_version,
        "clientVersion": sub.sub_version,
        "consumerGroup": group,
        "deadTime": 0,
        "expression": sub.sub_string,
        "expressionType": sub.expression_type.value,
        "topic": sub.topic,
    }
    return json.dumps(doc, indent="\t", sort_keys=True)


class CqProducerAdminProcessor:
    """Registered for QUERY_CONSUME_QUEUE and GET_ALL_PRODUCER_INFO."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def query_consume_queue(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, QueryConsumeQueueRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        where = f"{header.queue_id}@{header.topic}"
        cq = self.ctx.store.find_consume_queue(header.topic, header.queue_id)
        if cq is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"{where} is not exist!")
        sub: SubscriptionData | None = None
        filter_data: str | None = None
        group = header.consumer_group
        if group is not None:
            sub = self.ctx.consumers.find_subscription(group, header.topic)
            filter_data = (
                f"{group}@{header.topic} is not online!" if sub is None else _filter_data(group, sub)
            )
        index, count = header.index, header.count

        def read() -> tuple[int, int, list[tuple[int, int, int]] | None]:
            max_index, min_index = cq.max_offset_in_queue, cq.min_offset_in_queue
            if index < 0:
                return max_index, min_index, None
            units = cq.units_from(index, max(count, 0)) if count > 0 else cq.units_from(index, 1)
            if units is None:
                return max_index, min_index, None
            rows = [(int(u["offset"]), int(u["size"]), int(u["tags_code"])) for u in units]
            return max_index, min_index, rows[: max(count, 0)]

        try:
            max_index, min_index, rows = await self.ctx.query_executor.run(read)
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if rows is None:
            return request.make_response(ResponseCode.SUCCESS, f"Index {index} of {where} is not exist!")
        entries = []
        for offset, size, tags_code in rows:
            if tags_code <= CQ_EXT_MAX_ADDR:
                entries.append(
                    ConsumeQueueData(offset, size, tags_code, msg=f"Cq extend not exist!addr: {tags_code}")
                )
                continue
            evaluated = matched_by_consume_queue(sub, tags_code) if sub is not None else False
            entries.append(ConsumeQueueData(offset, size, tags_code, eval=evaluated))
        body = QueryConsumeQueueBody(
            queue_data=tuple(entries),
            max_queue_index=max_index,
            min_queue_index=min_index,
            subscription_data=sub,
            filter_data=filter_data,
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.encode())

    async def get_all_producer_info(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        producers = self.ctx.producers
        table = {
            group: [
                ProducerInfo(
                    client_id=info.client_id,
                    remote_ip="/" + str(getattr(info.channel, "remote_address", "") or ""),
                    language=info.language,
                    version=info.version,
                    last_update_timestamp=info.last_update_ms,
                )
                for info in producers.get(group).values()
            ]
            for group in producers.groups()
        }
        return request.make_response(ResponseCode.SUCCESS, body=encode_producer_table(table))
