"""The request codes of POP consumption and the processors that answer them."""

from __future__ import annotations

from rocketq.broker.pop.ack import AckMessageProcessor
from rocketq.broker.pop.notification import NotificationProcessor
from rocketq.broker.pop.pop_message import PopMessageProcessor
from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel, Processor

__all__ = ["pop_processors"]


def pop_processors(ctx: BrokerContext) -> dict[int, Processor]:
    """POP_MESSAGE, PEEK_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
    NOTIFICATION, POLLING_INFO (sharing the context's POP long polling) and POP_ROLLBACK."""
    pop = PopMessageProcessor(ctx, ctx.pop_polling)
    ack = AckMessageProcessor(ctx)
    notification = NotificationProcessor(ctx, ctx.pop_polling)
    rc = RequestCode
    return {
        rc.POP_MESSAGE: pop.process,
        rc.PEEK_MESSAGE: pop.peek,
        rc.ACK_MESSAGE: ack.process,
        rc.BATCH_ACK_MESSAGE: ack.process,
        rc.CHANGE_MESSAGE_INVISIBLETIME: ack.change_invisible_time,
        rc.NOTIFICATION: notification.notification,
        rc.POLLING_INFO: notification.polling_info,
        rc.POP_ROLLBACK: _pop_rollback,
    }


async def _pop_rollback(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    """POP_ROLLBACK: Java moves POP records from its RocksDB store back to the revive log
    (``transferToFsStore``); rocketq keeps them in the revive log only, so there is nothing to move."""
    return request.make_response(ResponseCode.SUCCESS)
