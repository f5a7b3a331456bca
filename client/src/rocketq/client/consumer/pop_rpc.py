"""The POP requests of a client: POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME.

Each function sends one request through a client instance's
:class:`~rocketq.client.api.MQClientAPI` and turns the answer into a value or a clear error.  A pop
answer is processed as ``MQClientAPIImpl.processPopResponse`` does: the body's records are
decoded, every message gets its receipt handle (``POP_CK``) and ``1ST_POP_TIME`` from the
response header (:func:`rocketq.client.remoting.pop.mark_popped_messages`), and its topic is the
one the pop asked for, also for messages read from the pop retry topic.  "Nothing to pop" is a
:class:`PopStatus`, not an error.  A broker that does not know the request codes (Apache
RocketMQ 4.x answers "request type not supported") raises :class:`PopNotSupportedError`; so does
BATCH_ACK_MESSAGE on a 5.x broker older than batch acks (the caller then acks one by one).
"""

from __future__ import annotations

import dataclasses
import enum

from rocketq.client.api import MQClientAPI
from rocketq.client.errors import MQBrokerError
from rocketq.client.model import MessageExt
from rocketq.client.remoting.codes import V5_POLLING_FULL, V5_POLLING_TIMEOUT, RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CommandHeader
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    mark_popped_messages,
)
from rocketq.client.remoting.properties import MessageConst

__all__ = [
    "PopNotSupportedError",
    "PopResult",
    "PopStatus",
    "ack_message",
    "batch_ack_message",
    "change_invisible_time",
    "pop_message",
    "process_pop_response",
]


class PopStatus(enum.Enum):
    """Outcome of a pop (``PopStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"  # the broker holds too many long-polling pops of the queue
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"  # the long poll ended without a message


@dataclasses.dataclass(frozen=True, slots=True)
class PopResult:
    """What one POP_MESSAGE returned; ``messages`` carry their receipt handles in ``POP_CK``."""

    status: PopStatus
    messages: list[MessageExt]
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


class PopNotSupportedError(MQBrokerError):
    """The broker does not serve POP requests (Apache RocketMQ 4.x, or an old rocketq)."""

    def __init__(self, code: int, remark: str | None, broker_addr: str | None = None) -> None:
        super().__init__(code, remark, broker_addr)
        self.args = (
            f"the broker at {broker_addr} does not serve POP requests (CODE: {code} DESC: {remark}):"
            " SimpleConsumer and POP consumption need a RocketMQ 5 broker (rocketq's mqbroker,"
            " or Apache RocketMQ 5.0 or later)",
        )


def _check(response: RemotingCommand, addr: str) -> RemotingCommand:
    if response.code == ResponseCode.SUCCESS:
        return response
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise PopNotSupportedError(response.code, response.remark, addr)
    raise MQBrokerError.for_code(response.code, response.remark, addr)


async def _invoke(
    api: MQClientAPI, addr: str, code: int, header: CommandHeader, timeout_ms: int | None = None
) -> RemotingCommand:
    request = RemotingCommand.request(code, header.to_ext_fields())
    return await api.invoke(addr, request, timeout_ms)


_NOT_FOUND = {
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
    V5_POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    V5_POLLING_FULL: PopStatus.POLLING_FULL,
}


def process_pop_response(
    addr: str, broker_name: str, response: RemotingCommand, request: PopMessageRequestHeader
) -> PopResult:
    """The :class:`PopResult` of a POP_MESSAGE answer (raises for codes that are failures)."""
    status = _NOT_FOUND.get(response.code)
    if status is not None:
        rest = response.ext_fields.get("restNum")
        return PopResult(status, [], rest_num=int(rest) if rest and rest.isdigit() else 0)
    header = PopMessageResponseHeader.from_ext_fields(_check(response, addr).ext_fields)
    stored = list(iter_stored_messages(response.body))
    marks = mark_popped_messages(stored, header, broker_name, order=request.order)
    messages: list[MessageExt] = []
    for m, mark in zip(stored, marks, strict=True):
        m.properties[MessageConst.POP_CK] = mark.pop_ck
        m.properties[MessageConst.FIRST_POP_TIME] = mark.first_pop_time
        if m.topic != request.topic or m.reconsume_times != mark.reconsume_times:
            m = dataclasses.replace(m, topic=request.topic, reconsume_times=mark.reconsume_times)
        messages.append(m)
    return PopResult(PopStatus.FOUND, messages, header.pop_time, header.invisible_time, header.rest_num)


async def pop_message(
    api: MQClientAPI, addr: str, broker_name: str, header: PopMessageRequestHeader, timeout_ms: int
) -> PopResult:
    """POP_MESSAGE; ``timeout_ms`` must exceed ``header.poll_time`` for a long poll."""
    response = await _invoke(api, addr, RequestCode.POP_MESSAGE, header, timeout_ms)
    return process_pop_response(addr, broker_name, response, header)


async def ack_message(api: MQClientAPI, addr: str, header: AckMessageRequestHeader) -> None:
    """ACK_MESSAGE: the message will not come back."""
    _check(await _invoke(api, addr, RequestCode.ACK_MESSAGE, header), addr)


async def change_invisible_time(
    api: MQClientAPI, addr: str, header: ChangeInvisibleTimeRequestHeader
) -> ChangeInvisibleTimeResponseHeader:
    """CHANGE_MESSAGE_INVISIBLETIME: the new checkpoint's pop time, invisible time and revive queue."""
    response = _check(await _invoke(api, addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header), addr)
    return ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)


async def batch_ack_message(api: MQClientAPI, addr: str, body: BatchAckMessageRequestBody) -> None:
    """BATCH_ACK_MESSAGE: the acks of several checkpoints in one request (no header)."""
    request = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body.encode())
    _check(await api.invoke(addr, request), addr)
