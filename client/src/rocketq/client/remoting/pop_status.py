"""GET_POP_STATUS: a rocketq request (no RocketMQ equivalent) for a POP group's in-flight and retry figures.

RocketMQ 5 keeps POP in-flight counts on the broker (``PopInflightMessageCounter``) but has no
admin request that returns them; ``mqadmin popStatus`` needs one, so rocketq adds request code
``RequestCode.GET_POP_STATUS`` (260001), far from RocketMQ's codes (a RocketMQ broker answers it
REQUEST_CODE_NOT_SUPPORTED).  Request header: ``consumerGroup`` and optionally ``topic`` (without
one: every topic the group pops on this broker).  Response body, JSON::

    {"brokerName": "broker-a", "consumerGroup": "G",
     "topics": [{"topic": "T", "inFlight": 3, "inFlightByQueue": {"0": 3},
                 "retryTopics": [{"topic": "%RETRY%G_T", "backlog": 2, "inFlight": 1}]}]}

``inFlight``: messages popped and neither acked nor revived yet, counted since the broker started
(pops made before it are not counted, as in Java).  ``backlog`` of a POP retry topic (V1
``%RETRY%group_topic`` and V2 ``%RETRY%group+topic``, those that exist): messages revived into
it and not yet popped again (max offset minus the group's POP offset, summed over its queues).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.headers import CommandHeader, command_header, jstr

__all__ = [
    "GetPopStatusRequestHeader",
    "PopRetryStatus",
    "PopStatus",
    "PopTopicStatus",
]

#: rocketq's request code (RocketMQ has none for this)


@command_header
class GetPopStatusRequestHeader(CommandHeader):
    consumer_group: str = jstr("consumerGroup")
    topic: str | None = jstr("topic", default=None)


@dataclass(frozen=True, slots=True)
class PopRetryStatus:
    topic: str
    backlog: int
    in_flight: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "backlog": self.backlog, "inFlight": self.in_flight}


@dataclass(frozen=True, slots=True)
class PopTopicStatus:
    topic: str
    in_flight: int
    in_flight_by_queue: dict[int, int]
    retry_topics: tuple[PopRetryStatus, ...] = ()

    @property
    def retry_backlog(self) -> int:
        return sum(r.backlog for r in self.retry_topics)

    @property
    def retry_in_flight(self) -> int:
        return sum(r.in_flight for r in self.retry_topics)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "inFlight": self.in_flight,
            "inFlightByQueue": {str(q): n for q, n in sorted(self.in_flight_by_queue.items())},
            "retryTopics": [r.to_json() for r in self.retry_topics],
        }


@dataclass(frozen=True, slots=True)
class PopStatus:
    """One broker's answer."""

    broker_name: str
    consumer_group: str
    topics: tuple[PopTopicStatus, ...]

    def encode(self) -> bytes:
        doc = {
            "brokerName": self.broker_name,
            "consumerGroup": self.consumer_group,
            "topics": [t.to_json() for t in self.topics],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes) -> Self:
        try:
            doc = json.loads(body.decode("utf-8"))
            topics = tuple(
                PopTopicStatus(
                    topic=str(t["topic"]),
                    in_flight=int(t["inFlight"]),
                    in_flight_by_queue={int(q): int(n) for q, n in t.get("inFlightByQueue", {}).items()},
                    retry_topics=tuple(
                        PopRetryStatus(str(r["topic"]), int(r["backlog"]), int(r["inFlight"]))
                        for r in t.get("retryTopics", ())
                    ),
                )
                for t in doc["topics"]
            )
            return cls(str(doc["brokerName"]), str(doc["consumerGroup"]), topics)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProtocolError(f"GET_POP_STATUS body is not a pop status ({exc}): {body[:200]!r}") from exc
