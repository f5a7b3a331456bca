"""The send-path rules of timer messages (RocketMQ's ``HookUtils.handleScheduleMessage``).

A message is a timer message when it carries ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or
``TIMER_DELAY_MS``, has no ``TIMER_OUT_MS`` (a delivered or rolled message is never re-timed) and
is not in the timer topic.  A ``DELAY`` level wins: the timer properties are removed and the
level's path is taken.  The delivery time comes from ``DELAY_SEC``, else ``DELAY_MS``, else
``DELIVER_MS``; a value that is not a number, or a delivery further away than
``timerMaxDelaySec``, is illegal; a delivery time not in the future makes a normal message
(unless it is a recall tombstone, which is then illegal).  A future delivery time is floored to
the precision, an exact multiple one slot earlier (the wheel fires a slot when its time has fully
passed, so the message fires at its delivery time); the message is stored in ``rmq_sys_wheel_timer``
queue 0 with ``TIMER_OUT_MS``, ``REAL_TOPIC`` and ``REAL_QID``.  A timer message without
``UNIQ_KEY`` gets one, so that it can be recalled.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketq.broker.timer.config import TimerConfig
from rocketq.client.remoting.msgid import new_uniq_key
from rocketq.client.remoting.properties import MessageConst, decode_properties, encode_properties
from rocketq.client.remoting.recall_handle import build_recall_handle
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC

__all__ = [
    "TimerRoute",
    "TimerRouteStatus",
    "illegal_remark",
    "not_enabled_remark",
    "recall_handle_of",
    "route_timer_message",
]

_TIMER_KEYS = (MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS, MessageConst.TIMER_DELIVER_MS)
_MARKS = tuple(f"{key}\x01" for key in _TIMER_KEYS)


class TimerRouteStatus(enum.Enum):
    NOT_TIMER = "NOT_TIMER"  # store as it is (properties may have lost their timer keys)
    TIMER = "TIMER"  # store in the timer topic
    ILLEGAL = "ILLEGAL"  # WHEEL_TIMER_MSG_ILLEGAL
    NOT_ENABLED = "NOT_ENABLED"  # WHEEL_TIMER_NOT_ENABLE


@dataclass(frozen=True, slots=True)
class TimerRoute:
    status: TimerRouteStatus
    topic: str
    queue_id: int
    properties: str
    deliver_ms: int = 0


def illegal_remark(config: TimerConfig) -> str:
    """Java's remark for WHEEL_TIMER_MSG_ILLEGAL (answered MESSAGE_ILLEGAL)."""
    return (
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{config.max_delay_sec * 1000}ms (timerMaxDelaySec={config.max_delay_sec}); or if set del msg, "
        "the delay time should be bigger than the current time; TIMER_DELAY_SEC, TIMER_DELAY_MS and "
        "TIMER_DELIVER_MS must be integers"
    )


def not_enabled_remark(config: TimerConfig) -> str:
    return f"accurate timer message is not enabled, timerWheelEnable is {str(config.wheel_enable).lower()}"


def route_timer_message(
    config: TimerConfig, topic: str, queue_id: int, properties: str, now_ms: int
) -> TimerRoute:
    """Where a message with encoded ``properties`` is stored (see the module docstring)."""
    keep = TimerRoute(TimerRouteStatus.NOT_TIMER, topic, queue_id, properties)
    if not any(mark in properties for mark in _MARKS) or topic == TIMER_TOPIC:
        return keep
    props = decode_properties(properties)
    present = [key for key in _TIMER_KEYS if key in props]
    if not present or MessageConst.TIMER_OUT_MS in props:
        return keep
    if _level(props) > 0:
        for key in present:
            del props[key]
        return TimerRoute(TimerRouteStatus.NOT_TIMER, topic, queue_id, encode_properties(props))
    if not config.wheel_enable:
        return TimerRoute(TimerRouteStatus.NOT_ENABLED, topic, queue_id, properties)
    try:
        deliver_ms = _deliver_ms(props, now_ms)
    except ValueError:
        return TimerRoute(TimerRouteStatus.ILLEGAL, topic, queue_id, properties)
    if deliver_ms <= now_ms:
        if MessageConst.TIMER_DEL_UNIQKEY in props:
            return TimerRoute(TimerRouteStatus.ILLEGAL, topic, queue_id, properties)
        return keep
    if deliver_ms - now_ms > config.max_delay_sec * 1000:
        return TimerRoute(TimerRouteStatus.ILLEGAL, topic, queue_id, properties)
    precision = config.precision_ms
    deliver_ms = (
        deliver_ms - precision if deliver_ms % precision == 0 else deliver_ms // precision * precision
    )
    props[MessageConst.TIMER_OUT_MS] = str(deliver_ms)
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    if not props.get(MessageConst.UNIQ_KEY):
        props[MessageConst.UNIQ_KEY] = new_uniq_key()
    return TimerRoute(TimerRouteStatus.TIMER, TIMER_TOPIC, 0, encode_properties(props), deliver_ms)


def _level(props: dict[str, str]) -> int:
    try:
        return int(props.get(MessageConst.DELAY_TIME_LEVEL, "0").strip())
    except ValueError:
        return 0


def _deliver_ms(props: dict[str, str], now_ms: int) -> int:
    """Java's precedence: DELAY_SEC, then DELAY_MS, then DELIVER_MS (``Long.parseLong``)."""
    if MessageConst.TIMER_DELAY_SEC in props:
        return now_ms + _java_long(props[MessageConst.TIMER_DELAY_SEC]) * 1000
    if MessageConst.TIMER_DELAY_MS in props:
        return now_ms + _java_long(props[MessageConst.TIMER_DELAY_MS])
    return _java_long(props[MessageConst.TIMER_DELIVER_MS])


def _java_long(text: str) -> int:
    if not text or not (text.isdigit() or (text[0] in "+-" and text[1:].isdigit())):
        raise ValueError(text)
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(text)
    return value


def recall_handle_of(properties: str, broker_name: str) -> str | None:
    """The recall handle a single send answers for a message stored in the timer topic with these
    ``properties`` (``attachRecallHandle``): not for a retry topic, nor without ``UNIQ_KEY``."""
    props = decode_properties(properties)
    real_topic = props.get(MessageConst.REAL_TOPIC, "")
    uniq = props.get(MessageConst.UNIQ_KEY)
    try:
        timer_out = int(props.get(MessageConst.TIMER_OUT_MS, ""))
    except ValueError:
        return None
    if not uniq or not real_topic or real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    return build_recall_handle(real_topic, broker_name, timer_out + 1, uniq)
