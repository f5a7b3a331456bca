"""Delay levels (A.3.4): parsing ``messageDelayLevel`` and the two message rewrites.

A message whose ``DELAY`` property is a level ``n > 0`` is not stored in its topic: it is
rewritten (:func:`apply_delay_level`) to ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1`` with its real
topic and queue kept in ``REAL_TOPIC`` / ``REAL_QID`` (a level above the maximum is clamped to the
maximum, and ``DELAY`` is stored clamped).  The store's dispatch then writes the delivery time
(store timestamp + the level's delay) as the ConsumeQueue tagsCode of the SCHEDULE_TOPIC_XXXX unit
(RocketMQ's ``CommitLog.checkMessageAndReturnSize``), which is what the
:class:`~rocketq.broker.schedule.service.ScheduleMessageService` polls.  When the time comes,
:func:`restore_real_topic` gives the properties and destination of the message to deliver:
``DELAY`` removed, everything else (``UNIQ_KEY``, ``REAL_TOPIC``/``REAL_QID`` as RocketMQ keeps
them) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketq.broker.store.dispatch import parse_delay_levels as _store_parse_delay_levels
from rocketq.client.remoting.properties import MessageConst, decode_properties, encode_properties
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC

__all__ = [
    "DEFAULT_DELAY_LEVELS",
    "SCHEDULE_TOPIC",
    "apply_delay_level",
    "delay_level_of",
    "parse_delay_levels",
    "restore_real_topic",
]

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_DELAY_MARK = MessageConst.DELAY_TIME_LEVEL + "\x01"


def parse_delay_levels(text: str) -> list[int]:
    """``"1s 5s 10s ..."`` -> delays in ms, level 1 first (units s, m, h, d, as RocketMQ).

    The same parser the store's dispatch uses for the tagsCode, plus: at least one level, each > 0.
    """
    levels = _store_parse_delay_levels(text)
    if not levels:
        raise ValueError("messageDelayLevel has no level")
    if any(ms <= 0 for ms in levels):
        raise ValueError(f"delay levels must be > 0: {text!r}")
    return levels


def delay_level_of(properties: Mapping[str, str]) -> int:
    """The ``DELAY`` level of a message, 0 if absent or not an integer."""
    raw = properties.get(MessageConst.DELAY_TIME_LEVEL, "").strip()
    try:
        return int(raw)
    except ValueError:
        return 0


def apply_delay_level(topic: str, queue_id: int, properties: str, max_level: int) -> tuple[str, int, str]:
    """``(topic, queue_id, properties)`` to store: rewritten to SCHEDULE_TOPIC_XXXX if delayed.

    ``properties`` is the encoded properties string; it is decoded only when it carries ``DELAY``.
    """
    if _DELAY_MARK not in properties or max_level <= 0:
        return topic, queue_id, properties
    props = decode_properties(properties)
    level = delay_level_of(props)
    if level <= 0:
        return topic, queue_id, properties
    level = min(level, max_level)
    props[MessageConst.DELAY_TIME_LEVEL] = str(level)
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    return SCHEDULE_TOPIC, level - 1, encode_properties(props)


def restore_real_topic(properties: Mapping[str, str]) -> tuple[str, int, dict[str, str]] | None:
    """``(real topic, real queue id, properties without DELAY)`` of a due message; None if unusable."""
    topic = properties.get(MessageConst.REAL_TOPIC)
    qid = properties.get(MessageConst.REAL_QUEUE_ID, "")
    if not topic or not qid.strip().lstrip("-").isdigit():
        return None
    props = {k: v for k, v in properties.items() if k != MessageConst.DELAY_TIME_LEVEL}
    return topic, int(qid), props
