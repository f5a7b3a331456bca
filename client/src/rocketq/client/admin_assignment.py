"""Admin requests of server-side rebalance: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401).

Both go to one broker (the bodies are :mod:`rocketq.client.remoting.assignment`); :class:`AsyncAdmin`
and :class:`Admin` expose them as ``query_assignment`` and ``set_message_request_mode``.
"""

from __future__ import annotations

from rocketq.client.api import MQClientAPI
from rocketq.client.remoting.assignment import (
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand

__all__ = ["query_assignment", "set_message_request_mode"]


async def query_assignment(
    api: MQClientAPI,
    broker_addr: str,
    topic: str,
    group: str,
    client_id: str,
    *,
    strategy_name: str = "AVG",
    message_model: str = "CLUSTERING",
    timeout_ms: int | None = None,
) -> QueryAssignmentResponseBody:
    """The queues the broker assigns to ``client_id`` (``None`` assignments: no answer, keep yours)."""
    body = QueryAssignmentRequestBody(topic, group, client_id, strategy_name, message_model)
    cmd = RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, body=body.encode())
    response = api.check(await api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
    return QueryAssignmentResponseBody.decode(response.body)


async def set_message_request_mode(
    api: MQClientAPI,
    broker_addr: str,
    topic: str,
    group: str,
    mode: MessageRequestMode,
    *,
    pop_share_queue_num: int = 0,
    timeout_ms: int | None = None,
) -> None:
    """Store the request mode of ``group`` on ``topic`` at one broker (MQBrokerError when refused)."""
    body = SetMessageRequestModeRequestBody(topic, group, mode, pop_share_queue_num)
    cmd = RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body.encode())
    api.check(await api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
