"""A push consumer's answer to CONSUME_MESSAGE_DIRECTLY: its listener consumes one given message.

mqadmin ``queryMsgById -i id -g G -d clientId`` has the broker send a stored message to one client
of the group; as Java's ``ConsumeMessageConcurrentlyService``/``ConsumeMessageOrderlyService
.consumeMessageDirectly``, the registered listener is called with that one message (its retry
topic restored) and a context for its queue, outside the normal flow: no offset moves, nothing is
sent back, whatever the listener returns.  The outcome becomes a ConsumeMessageDirectlyResult:
CONSUME_SUCCESS/SUCCESS -> CR_SUCCESS, RECONSUME_LATER/SUSPEND_CURRENT_QUEUE_A_MOMENT -> CR_LATER,
anything else returned -> CR_RETURN_NULL, an exception -> CR_THROW_EXCEPTION with the exception as
remark; ``order`` tells an orderly listener, ``spentTimeMills`` the listener's time.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerConcurrently,
    MessageListenerOrderly,
)
from rocketq.client.model import MessageExt
from rocketq.client.remoting.consume_directly import CMResult, ConsumeMessageDirectlyResult
from rocketq.client.remoting.route import MessageQueue

__all__ = ["consume_directly"]

_RESULTS: dict[object, CMResult] = {
    ConsumeConcurrentlyStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
    ConsumeConcurrentlyStatus.RECONSUME_LATER: CMResult.CR_LATER,
    ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
}


async def consume_directly(
    call: Callable[..., Awaitable[Any]],
    listener: MessageListenerConcurrently | MessageListenerOrderly,
    orderly: bool,
    msg: MessageExt,
    broker_name: str,
) -> ConsumeMessageDirectlyResult:
    """Run ``listener`` (through the consumer's ``call``, which knows its thread pool) on ``msg``."""
    mq = MessageQueue(msg.topic, broker_name, msg.queue_id)
    ctx: ConsumeConcurrentlyContext | ConsumeOrderlyContext
    ctx = ConsumeOrderlyContext(mq) if orderly else ConsumeConcurrentlyContext(mq)
    started = time.monotonic()
    remark: str | None = None
    try:
        status = await call(listener, [msg], ctx)
        result = _RESULTS.get(status, CMResult.CR_RETURN_NULL)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        result = CMResult.CR_THROW_EXCEPTION
        remark = "".join(traceback.format_exception_only(exc)).strip()
    return ConsumeMessageDirectlyResult(
        consume_result=result,
        order=orderly,
        auto_commit=ctx.auto_commit if isinstance(ctx, ConsumeOrderlyContext) else True,
        remark=remark,
        spent_time_mills=int((time.monotonic() - started) * 1000),
    )
