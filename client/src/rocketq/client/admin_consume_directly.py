"""Have one consumer client consume one stored message (Java's ``consumeMessageDirectly``).

The message is looked up as ``queryMsgById`` does (an offset msgId, or a UNIQ_KEY with its
topic); CONSUME_MESSAGE_DIRECTLY then goes to the broker that stores it, with the offset msgId,
and that broker hands the message to client ``client_id`` of ``group`` over the client's
connection.  rocketq's push consumers run their listener on it, as Java's do; a 5.x SDK client
behind the gRPC proxy gets it as a VerifyMessageCommand.  The answer is the client's
ConsumeMessageDirectlyResult.
"""

from __future__ import annotations

from rocketq.client.admin import AsyncAdmin
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.consume_directly import ConsumeMessageDirectlyResult

__all__ = ["consume_message_directly"]

#: the broker waits 5 s for the client's listener; the admin allows for the hop on top
CONSUME_DIRECTLY_TIMEOUT_MS = 10_000


async def consume_message_directly(
    admin: AsyncAdmin, group: str, client_id: str, msg_id: str, topic: str | None = None
) -> ConsumeMessageDirectlyResult:
    """Client ``client_id`` of ``group`` consumes message ``msg_id``; its listener's outcome."""
    msg = await admin.query_msg_by_id(msg_id, topic)
    addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
    fields = {
        "consumerGroup": group,
        "clientId": client_id,
        "msgId": msg.offset_msg_id,
        "topic": msg.topic,
    }
    cmd = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
    response = admin.api.check(await admin.api.invoke(addr, cmd, CONSUME_DIRECTLY_TIMEOUT_MS), addr)
    return ConsumeMessageDirectlyResult.decode(response.body)
