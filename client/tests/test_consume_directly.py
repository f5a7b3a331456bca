"""A push consumer's listener run on one message for CONSUME_MESSAGE_DIRECTLY, and the
ConsumeMessageDirectlyResult body it answers with."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from rocketq.client.consumer.direct import consume_directly
from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from rocketq.client.errors import ProtocolError
from rocketq.client.model import MessageExt
from rocketq.client.remoting.consume_directly import CMResult, ConsumeMessageDirectlyResult
from rocketq.client.remoting.message import encode_stored_message, iter_stored_messages


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def _run(
    listener: Callable[..., Any], orderly: bool = False
) -> tuple[ConsumeMessageDirectlyResult, list[Any]]:
    seen: list[Any] = []

    def recording(msgs: list[MessageExt], ctx: Any) -> Any:
        seen.append((msgs, ctx))
        return listener(msgs, ctx)

    call: Callable[..., Awaitable[Any]] = _call
    stored = encode_stored_message(
        topic="t", queue_id=3, born_timestamp=1, born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2), body=b"x", properties={},
    )  # fmt: skip
    msg = next(iter_stored_messages(stored))
    return asyncio.run(consume_directly(call, recording, orderly, msg, "broker-b")), seen


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, CMResult.CR_SUCCESS),
        (ConsumeConcurrentlyStatus.RECONSUME_LATER, CMResult.CR_LATER),
        (None, CMResult.CR_RETURN_NULL),
    ],
)
def test_concurrent_listener_outcomes(returned: object, expected: CMResult) -> None:
    result, seen = _run(lambda msgs, ctx: returned)
    assert (result.consume_result, result.order, result.auto_commit, result.remark) == (
        expected,
        False,
        True,
        None,
    )
    ((msgs, ctx),) = seen
    assert [m.body for m in msgs] == [b"x"] and isinstance(ctx, ConsumeConcurrentlyContext)
    assert (ctx.message_queue.broker_name, ctx.message_queue.queue_id) == ("broker-b", 3)


def test_a_raising_listener_is_reported_with_its_exception() -> None:
    def boom(msgs: list[MessageExt], ctx: Any) -> None:
        raise ValueError("no thanks")

    result, _ = _run(boom)
    assert result.consume_result is CMResult.CR_THROW_EXCEPTION and result.remark == "ValueError: no thanks"


def test_orderly_listener() -> None:
    def orderly(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        ctx.auto_commit = False
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    result, _ = _run(orderly, orderly=True)
    assert (result.consume_result, result.order, result.auto_commit) == (CMResult.CR_LATER, True, False)


def test_body_round_trip_and_java_text() -> None:
    result = ConsumeMessageDirectlyResult(CMResult.CR_SUCCESS, spent_time_mills=7)
    assert result.encode() == (
        b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":null,"spentTimeMills":7}'
    )
    assert ConsumeMessageDirectlyResult.decode(result.encode()) == result
    assert str(result) == (
        "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
        "remark=None, spentTimeMills=7]"
    )
    with pytest.raises(ProtocolError, match="bad ConsumeMessageDirectlyResult body"):
        ConsumeMessageDirectlyResult.decode(b'{"consumeResult":"CR_MAYBE"}')
