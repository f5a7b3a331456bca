"""RocketMQ 5 topic attributes: ``message.type`` and the ``+key=value,-key`` syntax that changes them.

A topic's attributes are a string map stored with its config (``topics.json``, GET_TOPIC_CONFIG).
``mqadmin updateTopic -a +message.type=FIFO`` sends the change as UPDATE_AND_CREATE_TOPIC's
``attributes`` header: comma-separated ``+key=value`` (set) and ``-key`` (remove) entries, as
Java's ``AttributeParser``.  rocketq knows one attribute, ``message.type`` (Java's
``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``): which messages the RocketMQ 5 proxy accepts for
the topic (NORMAL, FIFO, DELAY, TRANSACTION or MIXED: any); other keys are refused by name.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["MESSAGE_TYPE", "TopicMessageType", "merge_topic_attributes", "topic_message_type"]

MESSAGE_TYPE = "message.type"


class TopicMessageType(enum.Enum):
    """Java's ``TopicMessageType`` (without UNSPECIFIED: a topic without the attribute has none)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


def merge_topic_attributes(existing: Mapping[str, str], changes: str | None) -> dict[str, str] | str:
    """``existing`` with ``changes`` (``+k=v,-k``) applied; a string saying what is wrong instead
    when an entry is malformed or names an attribute or value rocketq does not know."""
    merged = dict(existing)
    for entry in (changes or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        sign, body = entry[0], entry[1:]
        key, sep, value = body.partition("=")
        if sign == "-" and key and not sep:
            merged.pop(key, None)
            continue
        if sign != "+" or not key or not sep:
            return f"attribute {entry!r}: expected +key=value (set) or -key (remove)"
        if key != MESSAGE_TYPE:
            return f"unsupported attribute {key!r}: rocketq's topics know {MESSAGE_TYPE} only"
        if value not in TopicMessageType.__members__:
            return f"{MESSAGE_TYPE}={value!r} is not one of {', '.join(TopicMessageType.__members__)}"
        merged[key] = value
    return merged


def topic_message_type(attributes: Mapping[str, str]) -> TopicMessageType | None:
    """The topic's ``message.type``; None when it has none (or one rocketq does not know)."""
    value = attributes.get(MESSAGE_TYPE)
    return TopicMessageType.__members__.get(value) if value is not None else None
