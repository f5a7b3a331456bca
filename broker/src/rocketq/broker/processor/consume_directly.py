"""CONSUME_MESSAGE_DIRECTLY (309): the broker hands one stored message to one connected consumer
client, whose listener consumes it, on behalf of an admin tool (Java's
``AdminBrokerProcessor.consumeMessageDirectly``, mqadmin ``queryMsgById -i id -g G -d clientId``).

The admin's request names ``consumerGroup``, ``clientId`` and ``msgId`` (an offset msgId of this
broker).  The broker reads the message at the offset the id encodes, puts it in the body, sets
``brokerName`` to its own name and sends the request to the client over that client's connection;
the client's answer (a ConsumeMessageDirectlyResult JSON body) is handed back unchanged.  A client
that is not connected is answered SYSTEM_ERROR "The Consumer <group> <clientId> not online", an id
that names no stored message SYSTEM_ERROR naming the offset, a client that does not answer in time
SYSTEM_ERROR naming the failure.
"""

from __future__ import annotations

from rocketq.broker.executor import Busy
from rocketq.broker.processor.consumer_running_info import call_consumer, find_consumer, not_online
from rocketq.broker.processor.context import BrokerContext
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.server import Channel

__all__ = ["ConsumeDirectlyProcessor"]


class ConsumeDirectlyProcessor:
    """Registered for CONSUME_MESSAGE_DIRECTLY."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def consume_message_directly(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        fields = request.ext_fields
        group, client_id, msg_id = (fields.get(k, "") for k in ("consumerGroup", "clientId", "msgId"))
        if not group or not client_id or not msg_id:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "give consumerGroup, clientId and msgId")
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
        except ProtocolError as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"msgId {msg_id} is not an offset msgId: {exc}"
            )
        consumer = find_consumer(self.ctx, group, client_id)
        if consumer is None:
            return not_online(request, group, client_id)
        store = self.ctx.store
        try:
            record = await self.ctx.query_executor.run(lambda: store.look_message_by_offset(offset))
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if not record:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset} (msgId {msg_id})"
            )
        forward_fields = dict(fields)
        forward_fields["brokerName"] = self.ctx.config.broker_name
        forward = RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, forward_fields, body=bytes(record)
        )
        return await call_consumer(request, consumer, forward, group, client_id)
