"""VIEW_BROKER_STATS_DATA (315) and QUERY_TOPIC_CONSUME_BY_WHO (300): the wire side of a broker's
statistics items, shared by the broker that answers and the admin tools that ask.

A broker keeps counters named as RocketMQ's ``Stats`` class names them (:class:`StatsName`), each
keyed by a topic, ``topic@group`` (:func:`topic_group_key`) or the cluster name, with a minute,
hour and day window (``rocketq.broker.stats_items``).  VIEW_BROKER_STATS_DATA asks for one item
(header ``statsName``, ``statsKey``); the answer body is Java's ``BrokerStatsData`` JSON::

    {"statsMinute": {"sum": 12, "tps": 1.2, "avgpt": 6.0},
     "statsHour":   {"sum": 12, "tps": 0.02, "avgpt": 6.0},
     "statsDay":    {"sum": 12, "tps": 0.0033, "avgpt": 6.0}}

``sum`` is the counter's growth over the window, ``tps`` that growth per second of the window and
``avgpt`` the growth per recorded call.  An item the broker never counted is answered SYSTEM_ERROR
``The stats <name> <key> not exist`` (:func:`stats_not_exist_remark`), as Java answers.
QUERY_TOPIC_CONSUME_BY_WHO (header ``topic``) answers Java's ``GroupList`` JSON
``{"groupList": ["g1", ...]}``: the groups consuming the topic online or holding offsets on it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Self

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.headers import CommandHeader, command_header, jstr

__all__ = [
    "BrokerStatsData",
    "BrokerStatsItem",
    "QueryTopicConsumeByWhoRequestHeader",
    "StatsName",
    "ViewBrokerStatsDataRequestHeader",
    "decode_group_list",
    "encode_group_list",
    "stats_not_exist_remark",
    "topic_group_key",
]


class StatsName(enum.StrEnum):
    """The stats names of RocketMQ's ``Stats`` that rocketq's broker keeps."""

    #: messages stored per topic (key: the stored topic); one call per put request
    TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
    #: bytes stored per topic
    TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
    #: messages read per ``topic@group`` (pulls and POPs that found messages)
    GROUP_GET_NUMS = "GROUP_GET_NUMS"
    #: bytes read per ``topic@group``
    GROUP_GET_SIZE = "GROUP_GET_SIZE"
    #: messages a consumer sent back per ``topic@group`` (CONSUMER_SEND_MSG_BACK)
    SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
    #: messages stored by the broker (key: the cluster name)
    BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
    #: messages read from the broker (key: the cluster name)
    BROKER_GET_NUMS = "BROKER_GET_NUMS"


def topic_group_key(topic: str, group: str) -> str:
    """``BrokerStatsManager.buildStatsKey(topic, group)``: ``topic@group``."""
    return f"{topic}@{group}"


def stats_not_exist_remark(name: str, key: str) -> str:
    """Java's remark for an item the broker does not hold."""
    return f"The stats <{name}> <{key}> not exist"


@command_header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    """VIEW_BROKER_STATS_DATA (315) request header."""

    stats_name: str = jstr("statsName")
    stats_key: str = jstr("statsKey")


@command_header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    """QUERY_TOPIC_CONSUME_BY_WHO (300) request header."""

    topic: str = jstr("topic")


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of an item: growth, growth per second, growth per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"sum": self.sum, "tps": self.tps, "avgpt": self.avgpt}

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        if not isinstance(doc, dict):
            return cls()
        return cls(int(doc.get("sum", 0)), float(doc.get("tps", 0.0)), float(doc.get("avgpt", 0.0)))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """Java's ``BrokerStatsData``: an item's minute, hour and day windows."""

    stats_minute: BrokerStatsItem
    stats_hour: BrokerStatsItem
    stats_day: BrokerStatsItem

    def encode(self) -> bytes:
        doc = {
            "statsMinute": self.stats_minute.to_json(),
            "statsHour": self.stats_hour.to_json(),
            "statsDay": self.stats_day.to_json(),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes) -> Self:
        try:
            doc = json.loads(body.decode("utf-8"))
            return cls(
                BrokerStatsItem.from_json(doc.get("statsMinute")),
                BrokerStatsItem.from_json(doc.get("statsHour")),
                BrokerStatsItem.from_json(doc.get("statsDay")),
            )
        except (UnicodeDecodeError, ValueError, TypeError, AttributeError) as exc:
            raise ProtocolError(f"bad BrokerStatsData body: {exc}") from exc

    def sum_24_hours(self) -> int:
        """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's
        (a young item has no day or hour snapshot yet)."""
        for window in (self.stats_day, self.stats_hour, self.stats_minute):
            if window.sum != 0:
                return window.sum
        return 0


def encode_group_list(groups: set[str] | list[str]) -> bytes:
    return json.dumps({"groupList": sorted(groups)}).encode()


def decode_group_list(body: bytes) -> list[str]:
    try:
        doc = json.loads(body.decode("utf-8")) if body else {}
        return sorted(str(g) for g in doc.get("groupList") or ())
    except (UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"bad GroupList body: {exc}") from exc
