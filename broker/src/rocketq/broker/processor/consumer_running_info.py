"""GET_CONSUMER_RUNNING_INFO (307): the broker asks one connected consumer client for its running
information on behalf of an admin tool (Java's ``AdminBrokerProcessor.getConsumerRunningInfo``).

The admin's request names ``consumerGroup`` and ``clientId`` (and ``jstackEnable``); the broker
finds that client's connection among the group's heartbeating clients, sends it the same request
and hands back the client's answer (code, remark and ConsumerRunningInfo body) unchanged.  A
client that is not connected is answered SYSTEM_ERROR "The Consumer <group> <clientId> not
online"; a client that does not answer in time, or whose connection drops, SYSTEM_ERROR naming
the failure.  rocketq's own clients do not answer this request (they reply
REQUEST_CODE_NOT_SUPPORTED, which is passed on); Java clients do.
"""

from __future__ import annotations

from rocketq.broker.processor.context import BrokerContext
from rocketq.client.errors import RemotingError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel

__all__ = [
    "CALL_CLIENT_TIMEOUT_MS",
    "ConsumerRunningInfoProcessor",
    "call_consumer",
    "find_consumer",
    "not_online",
]

#: how long the client has to answer (Java's broker waits 5 s as well)
CALL_CLIENT_TIMEOUT_MS = 5000


class ConsumerRunningInfoProcessor:
    """Registered for GET_CONSUMER_RUNNING_INFO."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def get_consumer_running_info(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        group = request.ext_fields.get("consumerGroup", "")
        client_id = request.ext_fields.get("clientId", "")
        if not group or not client_id:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "give consumerGroup and clientId")
        consumer = find_consumer(self.ctx, group, client_id)
        if consumer is None:
            return not_online(request, group, client_id)
        forward = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields))
        return await call_consumer(request, consumer, forward, group, client_id)


def find_consumer(ctx: BrokerContext, group: str, client_id: str) -> Channel | None:
    """The connection of a client heartbeating in ``group`` (None: not connected)."""
    info = ctx.consumers.get(group)
    found = info.find_channel(client_id) if info is not None else None
    return found.channel if found is not None else None


def not_online(request: RemotingCommand, group: str, client_id: str) -> RemotingCommand:
    return request.make_response(
        ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
    )


async def call_consumer(
    request: RemotingCommand, consumer: Channel, forward: RemotingCommand, group: str, client_id: str
) -> RemotingCommand:
    """Sends ``forward`` to the client and answers ``request`` with its answer, unchanged."""
    try:
        answer = await consumer.invoke(forward, CALL_CLIENT_TIMEOUT_MS)
    except RemotingError as exc:
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
        )
    return request.make_response(answer.code, answer.remark, body=answer.body)
