"""The send processor's entry into the timer rules: the route of a message, or the error answer.

SEND_MESSAGE(_V2) calls :func:`route_for_send` before the delay-level rewrite and
:func:`recall_ext` for the response of a message it stored in the timer topic.  An illegal timer
message is answered MESSAGE_ILLEGAL with RocketMQ's remark (its PutMessageStatus
WHEEL_TIMER_MSG_ILLEGAL), a timer message while ``timerWheelEnable=false`` SYSTEM_ERROR.
"""

from __future__ import annotations

import time

from rocketq.broker.config import BrokerConfig
from rocketq.broker.timer.config import timer_config_of
from rocketq.broker.timer.rules import (
    TimerRouteStatus,
    illegal_remark,
    not_enabled_remark,
    recall_handle_of,
    route_timer_message,
)
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import TIMER_TOPIC

__all__ = ["RECALL_HANDLE_FIELD", "recall_ext", "route_for_send"]

RECALL_HANDLE_FIELD = "recallHandle"
_MARK = "TIMER_"


def route_for_send(
    config: BrokerConfig, request: RemotingCommand, topic: str, queue_id: int, properties: str
) -> tuple[str, int, str] | RemotingCommand:
    """``(topic, queue_id, properties)`` to store (the timer topic for a timer message), or the answer."""
    if _MARK not in properties:
        return topic, queue_id, properties
    timer = timer_config_of(config)
    route = route_timer_message(timer, topic, queue_id, properties, int(time.time() * 1000))
    match route.status:
        case TimerRouteStatus.ILLEGAL:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(timer))
        case TimerRouteStatus.NOT_ENABLED:
            return request.make_response(ResponseCode.SYSTEM_ERROR, not_enabled_remark(timer))
        case _:
            return route.topic, route.queue_id, route.properties


def recall_ext(config: BrokerConfig, code: int, topic: str, properties: str) -> dict[str, str] | None:
    """The ``recallHandle`` response field of a single send stored in the timer topic, else None."""
    if topic != TIMER_TOPIC or code in (RequestCode.SEND_BATCH_MESSAGE, RequestCode.CONSUMER_SEND_MSG_BACK):
        return None
    handle = recall_handle_of(properties, config.broker_name)
    return None if handle is None else {RECALL_HANDLE_FIELD: handle}
