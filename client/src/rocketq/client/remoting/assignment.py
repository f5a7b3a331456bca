"""Server-side rebalance on the wire: the bodies of QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401).

RocketMQ 5 lets the broker compute a consumer's share of a topic (``clientRebalance=false``):
the client sends a ``QueryAssignmentRequestBody`` and receives a ``QueryAssignmentResponseBody``,
a set of ``MessageQueueAssignment`` entries, each a queue and the ``MessageRequestMode`` (PULL or
POP) the client should use on it.  SET_MESSAGE_REQUEST_MODE stores a mode per topic and group
(``SetMessageRequestModeRequestBody``), which the broker keeps in ``config/messageRequestMode.json``
as ``{"messageRequestModeMap": {topic: {group: <SetMessageRequestModeRequestBody>}}}``.

All bodies are fastjson JSON as Java writes them: fields in alphabetical order, ``null`` fields
left out, enums as their names.  ``popShareQueueNum`` is how many following consumers' queues a
POP consumer also reads; ``<= 0`` (or at least the group size less one) means every queue, which
the broker hands out with queue id -1 ("any queue of this broker").
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.vocabulary import MessageQueue

__all__ = [
    "MESSAGE_MODELS",
    "MessageQueueAssignment",
    "MessageRequestMode",
    "QueryAssignmentRequestBody",
    "QueryAssignmentResponseBody",
    "SetMessageRequestModeRequestBody",
    "decode_json_object",
]

#: ``MessageModel`` names (the enum lives in the client's config; the wire carries the name)
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")


class MessageRequestMode(enum.Enum):
    """How a consumer reads an assigned queue: by offset (PULL) or by lease (POP)."""

    PULL = "PULL"
    POP = "POP"


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_json_object(body: bytes, what: str) -> dict[str, Any]:
    """The JSON object of a body, or a ProtocolError naming the body and the problem."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    return obj


def _str(obj: Mapping[str, Any], key: str, what: str, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ProtocolError(f"{what} needs a non-empty string {key!r}, got {value!r}")
    return value


def _mode(raw: Any, what: str) -> MessageRequestMode:
    if raw is None:
        return MessageRequestMode.PULL  # Java's field default
    try:
        return MessageRequestMode[str(raw)]
    except KeyError:
        raise ProtocolError(f"{what}: mode must be PULL or POP, got {raw!r}") from None


@dataclass(frozen=True, slots=True)
class QueryAssignmentRequestBody:
    """Which queues of ``topic`` should ``client_id`` of ``consumer_group`` read?"""

    topic: str
    consumer_group: str
    client_id: str
    strategy_name: str = "AVG"
    message_model: str = "CLUSTERING"

    def __post_init__(self) -> None:
        if self.message_model not in MESSAGE_MODELS:
            raise ProtocolError(f"messageModel must be one of {MESSAGE_MODELS}, got {self.message_model!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "messageModel": self.message_model,
            "strategyName": self.strategy_name,
            "topic": self.topic,
        }

    def encode(self) -> bytes:
        return _dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> Self:
        what = "QueryAssignmentRequestBody"
        obj = decode_json_object(body, what)
        return cls(
            topic=_str(obj, "topic", what),
            consumer_group=_str(obj, "consumerGroup", what),
            client_id=_str(obj, "clientId", what),
            strategy_name=_str(obj, "strategyName", what, required=False),
            message_model=str(obj.get("messageModel") or "CLUSTERING"),
        )


@dataclass(frozen=True, slots=True)
class MessageQueueAssignment:
    """One assigned queue and the mode to read it with (queue id -1: any queue of the broker)."""

    message_queue: MessageQueue
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"messageQueue": self.message_queue.to_obj(), "mode": self.mode.name}
        if self.attachments is not None:
            obj["attachments"] = dict(self.attachments)
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        what = "MessageQueueAssignment"
        if not isinstance(obj, dict) or not isinstance(obj.get("messageQueue"), dict):
            raise ProtocolError(f"{what} needs a messageQueue object, got {obj!r}")
        try:
            mq = MessageQueue.from_obj(obj["messageQueue"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"{what}: bad messageQueue {obj['messageQueue']!r}: {exc}") from exc
        attachments = obj.get("attachments")
        return cls(
            mq,
            _mode(obj.get("mode"), what),
            {str(k): str(v) for k, v in attachments.items()} if isinstance(attachments, dict) else None,
        )


@dataclass(frozen=True, slots=True)
class QueryAssignmentResponseBody:
    """The assignment; ``None`` (the field absent) tells the client to keep what it has."""

    message_queue_assignments: tuple[MessageQueueAssignment, ...] | None

    def to_json(self) -> dict[str, Any]:
        if self.message_queue_assignments is None:
            return {}
        rows = sorted(self.message_queue_assignments, key=lambda a: a.message_queue)
        return {"messageQueueAssignments": [a.to_json() for a in rows]}

    def encode(self) -> bytes:
        return _dumps(self.to_json())

    @classmethod
    def decode(cls, body: bytes) -> Self:
        obj = decode_json_object(body, "QueryAssignmentResponseBody") if body else {}
        rows = obj.get("messageQueueAssignments")
        if rows is None:
            return cls(None)
        if not isinstance(rows, list):
            raise ProtocolError(f"messageQueueAssignments is not a list: {rows!r}")
        return cls(tuple(MessageQueueAssignment.from_json(r) for r in rows))

    @classmethod
    def of(cls, queues: Iterable[MessageQueue] | None, mode: MessageRequestMode) -> Self:
        if queues is None:
            return cls(None)
        return cls(tuple(MessageQueueAssignment(mq, mode) for mq in sorted(set(queues))))


@dataclass(frozen=True, slots=True)
class SetMessageRequestModeRequestBody:
    """The mode of a group on a topic; POP consumers also read ``pop_share_queue_num`` neighbours' queues."""

    topic: str
    consumer_group: str
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumerGroup": self.consumer_group,
            "mode": self.mode.name,
            "popShareQueueNum": self.pop_share_queue_num,
            "topic": self.topic,
        }

    def encode(self) -> bytes:
        return _dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        what = "SetMessageRequestModeRequestBody"
        if not isinstance(obj, dict):
            raise ProtocolError(f"{what} is not a JSON object: {obj!r}")
        share = obj.get("popShareQueueNum", 0)
        if isinstance(share, bool) or not isinstance(share, int):
            raise ProtocolError(f"{what}: popShareQueueNum must be an integer, got {share!r}")
        return cls(
            _str(obj, "topic", what), _str(obj, "consumerGroup", what), _mode(obj.get("mode"), what), share
        )

    @classmethod
    def decode(cls, body: bytes) -> Self:
        return cls.from_json(decode_json_object(body, "SetMessageRequestModeRequestBody"))
