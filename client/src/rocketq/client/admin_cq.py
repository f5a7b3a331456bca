"""A broker's consume queue units and producers for the admin tools (Java's ``queryConsumeQueue``
and ``getAllProducerInfo``, behind ``mqadmin queryCq`` and ``mqadmin producer``).

``query_consume_queue`` asks one broker (``broker_addr``, or as Java's tool the master of the
first broker of the topic's route) for up to ``count`` units of ``topic``/``queue_id`` from
``index``; a broker that has no such queue raises MQBrokerError with its remark ("0@T is not
exist!"), an index outside the queue raises MQBrokerError with the remark "Index i of q@T is not
exist!" (the broker answers it SUCCESS without a body).  ``get_all_producer_info`` returns the
producer groups a broker knows from heartbeats.  Wire shapes:
:mod:`rocketq.client.remoting.cq_producer_bodies`.
"""

from __future__ import annotations

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQBrokerError, MQClientError
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.cq_producer_bodies import (
    GetAllProducerInfoRequestHeader,
    ProducerInfo,
    QueryConsumeQueueBody,
    QueryConsumeQueueRequestHeader,
    decode_producer_table,
)

__all__ = ["get_all_producer_info", "query_consume_queue", "route_broker_addr"]


async def route_broker_addr(admin: AsyncAdmin, topic: str) -> str:
    """The master address of the first broker in ``topic``'s route (Java's ``queryCq`` default)."""
    route = await admin.topic_route(topic)
    for bd in route.broker_datas:
        if bd.master_addr:
            return bd.master_addr
    raise MQClientError(f"No topic route data! (topic {topic!r} has no master broker; give one with -b)")


async def query_consume_queue(
    admin: AsyncAdmin,
    topic: str,
    queue_id: int,
    index: int,
    count: int = 10,
    *,
    broker_addr: str | None = None,
    consumer_group: str | None = None,
) -> QueryConsumeQueueBody:
    """QUERY_CONSUME_QUEUE: the units of ``topic``/``queue_id`` from ``index`` (at most ``count``)."""
    addr = broker_addr or await route_broker_addr(admin, topic)
    header = QueryConsumeQueueRequestHeader(
        topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=consumer_group
    )
    cmd = RemotingCommand.request(RequestCode.QUERY_CONSUME_QUEUE, header.to_ext_fields())
    response = admin.api.check(await admin.api.invoke(addr, cmd), addr)
    if not response.body:
        raise MQBrokerError(
            response.code, response.remark or "the broker answered no consume queue data", addr
        )
    return QueryConsumeQueueBody.decode(response.body)


async def get_all_producer_info(admin: AsyncAdmin, broker_addr: str) -> dict[str, list[ProducerInfo]]:
    """GET_ALL_PRODUCER_INFO: producer group -> its producers connected to ``broker_addr``."""
    cmd = RemotingCommand.request(
        RequestCode.GET_ALL_PRODUCER_INFO, GetAllProducerInfoRequestHeader().to_ext_fields()
    )
    response = admin.api.check(await admin.api.invoke(broker_addr, cmd), broker_addr)
    return decode_producer_table(response.body)
