"""Wire bodies of the brokers' answers to admin requests, read into plain values.

* ``ResetOffsetBody`` comes back from INVOKE_BROKER_TO_RESET_OFFSET (the admin's offset reset)
  and arrives in RESET_CONSUMER_CLIENT_OFFSET (the broker telling a live consumer to move):
  ``{"offsetTable": {<MessageQueue object>: offset}}`` (:func:`parse_offset_table`).
* ``ConsumeStats`` (GET_CONSUME_STATS): per queue the broker's and the group's offsets
  (:func:`parse_consume_stats`, one :class:`QueueProgress` per queue).
* ``ConsumerConnection`` (GET_CONSUMER_CONNECTION_LIST): the connected clients of a group, its
  subscriptions and consume settings (:func:`parse_consumer_connection`).
* ``SubscriptionGroupWrapper`` (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and
  ``ConsumerOffsetSerializeWrapper`` (GET_ALL_CONSUMER_OFFSET): the group names they hold
  (:func:`subscription_group_names`, :func:`consumer_offset_groups`).

fastjson writes a map key that is an object as a JSON object; :mod:`.lenient_json` reads such a
key frozen as a tuple, thawed back into a dict here (a key may also come as the object's JSON text).
An empty body reads as an empty answer.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.client.remoting.lenient_json import loads, thaw
from rocketq.client.remoting.vocabulary import SUB_ALL, MessageQueue

__all__ = [
    "ConsumerConnection",
    "ConsumerConnectionBody",
    "QueueProgress",
    "consumer_offset_groups",
    "parse_consume_stats",
    "parse_consumer_connection",
    "parse_offset_table",
    "subscription_group_names",
]


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a group's progress: ``lag = broker_offset - consumer_offset``."""

    message_queue: MessageQueue
    broker_offset: int
    consumer_offset: int  # -1: the group has no committed offset here
    last_timestamp_ms: int = 0  # store time of the last consumed message (0: unknown)

    @property
    def lag(self) -> int:
        return self.broker_offset - max(self.consumer_offset, 0)


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """One connected consumer client of a group."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumerConnectionBody:
    """One broker's GET_CONSUMER_CONNECTION_LIST answer."""

    connections: tuple[ConsumerConnection, ...]
    subscriptions: Mapping[str, str]  # topic -> expression
    consume_type: str
    message_model: str
    consume_from_where: str


def _doc(body: bytes) -> dict[str, Any]:
    return loads(body) if body else {}


def _object_key(key: object) -> object:
    """A fastjson object key as a dict (it may come frozen, or as its JSON text)."""
    obj = thaw(key) if isinstance(key, tuple) else key
    if isinstance(obj, str):
        with contextlib.suppress(ValueError):
            obj = json.loads(obj)
    return obj


def parse_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """ResetOffsetBody ``{"offsetTable":{<MessageQueue object>: offset}}`` (fastjson object keys)."""
    table: dict[MessageQueue, int] = {}
    for key, value in (_doc(body).get("offsetTable") or {}).items():
        obj = thaw(key) if isinstance(key, tuple) else key
        if isinstance(obj, dict):
            table[MessageQueue.from_obj(obj)] = int(value)
    return table


def parse_consume_stats(body: bytes) -> list[QueueProgress]:
    """ConsumeStats ``{"offsetTable": {<MessageQueue>: {"brokerOffset", "consumerOffset",
    "lastTimestamp"}}}``: one :class:`QueueProgress` per queue, in the body's order."""
    rows: list[QueueProgress] = []
    for key, value in (_doc(body).get("offsetTable") or {}).items():
        obj = _object_key(key)
        if not isinstance(obj, dict) or not isinstance(value, Mapping):
            continue
        rows.append(
            QueueProgress(
                MessageQueue.from_obj(obj),
                int(value.get("brokerOffset", 0)),
                int(value.get("consumerOffset", -1)),
                int(value.get("lastTimestamp", 0)),
            )
        )
    return rows


def parse_consumer_connection(body: bytes) -> ConsumerConnectionBody:
    """ConsumerConnection ``{"connectionSet": [...], "subscriptionTable": {topic: {"subString"}},
    "consumeType", "messageModel", "consumeFromWhere"}``."""
    doc = _doc(body)
    connections = tuple(
        ConsumerConnection(
            client_id=str(c.get("clientId", "")),
            client_addr=str(c.get("clientAddr", "")),
            language=str(c.get("language", "")),
            version=int(c.get("version") or 0),
        )
        for c in doc.get("connectionSet") or ()
    )
    subscriptions = {
        str(topic): str(sub.get("subString") or SUB_ALL)
        for topic, sub in (doc.get("subscriptionTable") or {}).items()
        if isinstance(sub, Mapping)
    }
    return ConsumerConnectionBody(
        connections,
        subscriptions,
        str(doc.get("consumeType", "")),
        str(doc.get("messageModel", "")),
        str(doc.get("consumeFromWhere", "")),
    )


def subscription_group_names(body: bytes) -> list[str]:
    """The groups of a SubscriptionGroupWrapper (``subscriptionGroupTable``'s keys)."""
    return [str(g) for g in (_doc(body).get("subscriptionGroupTable") or {})]


def consumer_offset_groups(body: bytes) -> list[str]:
    """The groups of a ConsumerOffsetSerializeWrapper (``offsetTable`` keys ``topic@group``)."""
    groups = []
    for key in _doc(body).get("offsetTable") or {}:
        _, _, group = str(key).partition("@")
        if group:
            groups.append(group)
    return groups
