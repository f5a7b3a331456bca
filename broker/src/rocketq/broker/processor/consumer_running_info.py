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

__all__ = ["ConsumerRunningInfoProcessor"]

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
        info = self.ctx.consumers.get(group)
        found = info.find_channel(client_id) if info is not None else None
        if found is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        forward = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields))
        try:
            answer = await found.channel.invoke(forward, CALL_CLIENT_TIMEOUT_MS)
        except RemotingError as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            )
        return request.make_response(answer.code, answer.remark, body=answer.body)
