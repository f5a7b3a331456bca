"""Producer and consumer connections, learnt from HEART_BEAT.

Every client sends HEART_BEAT (a HeartbeatData JSON body) to every broker of the topics it uses,
every 30 s.  The broker keeps, per group, which connection (channel) belongs to which client id,
and per consumer group the latest subscriptions.  A channel silent for ``channelExpiredTimeout``
(120 s), closed, or unregistered (UNREGISTER_CLIENT) leaves its groups.

Theory of operation: whenever a consumer group's membership changes (a new client id, a client
leaving or expiring) the manager calls ``on_ids_changed(group, channels)``; the server answers by
sending NOTIFY_CONSUMER_IDS_CHANGED oneway to each remaining channel so that the clients rebalance
at once instead of at their next 20 s rebalance tick.  The manager itself does no I/O and runs on the
event loop thread only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketq.broker.errors import RequestBodyError
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.vocabulary import SubscriptionData, validate_group
from rocketq.server import Channel

__all__ = [
    "ClientChannelInfo",
    "ConsumerData",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "HeartbeatData",
    "ProducerManager",
    "SubscriptionData",
    "connection_set",
    "parse_heartbeat",
]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class HeartbeatData:
    client_id: str
    producer_groups: tuple[str, ...] = ()
    consumers: tuple[ConsumerData, ...] = ()


def parse_heartbeat(body: bytes) -> HeartbeatData:
    """Decode a HEART_BEAT body; raises :class:`RequestBodyError` when it is not HeartbeatData JSON."""
    try:
        obj = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        obj = _lenient(body, exc)
    if not isinstance(obj, dict) or not isinstance(obj.get("clientID"), str):
        raise RequestBodyError("HEART_BEAT body is not HeartbeatData JSON with a clientID")
    consumers: list[ConsumerData] = []
    for cd in obj.get("consumerDataSet") or ():
        if not isinstance(cd, dict) or not cd.get("groupName"):
            continue
        try:
            subs = tuple(
                SubscriptionData.from_obj(s)
                for s in cd.get("subscriptionDataSet") or ()
                if isinstance(s, dict)
            )
        except (ProtocolError, ValueError, TypeError) as exc:
            raise RequestBodyError(
                f"HEART_BEAT of group {cd['groupName']!r} has a bad subscription: {exc}"
            ) from exc
        consumers.append(
            ConsumerData(
                group_name=str(cd["groupName"]),
                consume_type=str(cd.get("consumeType") or "CONSUME_PASSIVELY"),
                message_model=str(cd.get("messageModel") or "CLUSTERING"),
                consume_from_where=str(cd.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
                subscriptions=subs,
                unit_mode=bool(cd.get("unitMode", False)),
            )
        )
    producers = tuple(
        str(p["groupName"])
        for p in obj.get("producerDataSet") or ()
        if isinstance(p, dict) and p.get("groupName")
    )
    for group in (*producers, *(c.group_name for c in consumers)):
        problem = validate_group(group)  # a group becomes %RETRY%group / %DLQ%group topics
        if problem is not None:
            raise RequestBodyError(f"HEART_BEAT refused: {problem}")
    return HeartbeatData(client_id=obj["clientID"], producer_groups=producers, consumers=tuple(consumers))


def _lenient(body: bytes, exc: Exception) -> Any:
    try:
        from rocketq.client.remoting.lenient_json import loads
    except ImportError:
        raise RequestBodyError(f"HEART_BEAT body is not JSON: {exc}") from exc
    try:
        return loads(body.decode("utf-8", "replace"))
    except Exception as exc2:
        raise RequestBodyError(f"HEART_BEAT body is not JSON: {exc2}") from exc2


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Channel
    client_id: str
    language: str = "JAVA"
    version: int = 0
    last_update_ms: int = field(default_factory=_now_ms)


def connection_set(infos: Iterable[ClientChannelInfo]) -> list[dict[str, object]]:
    """The ``connectionSet`` of a ConsumerConnection / ProducerConnection body (Java's ``Connection``)."""
    return [
        {
            "clientAddr": str(getattr(ci.channel, "remote_address", "")),
            "clientId": ci.client_id,
            "language": ci.language,
            "version": ci.version,
        }
        for ci in infos
    ]


@dataclass(slots=True)
class ConsumerGroupInfo:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = field(default_factory=_now_ms)

    def client_ids(self) -> list[str]:
        return sorted({info.client_id for info in self.channels.values()})

    def all_channels(self) -> list[Channel]:
        return [info.channel for info in self.channels.values()]

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None


IdsChangedCallback = Callable[[str, list[Channel]], None]


class ConsumerManager:
    """Consumer groups: channels, subscriptions and the membership-change notification."""

    def __init__(
        self, *, channel_expired_timeout_ms: int = 120_000, on_ids_changed: IdsChangedCallback | None = None
    ) -> None:
        self._timeout_ms = channel_expired_timeout_ms
        self._on_ids_changed = on_ids_changed
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, data: ConsumerData, info: ClientChannelInfo, *, notify: bool = True) -> bool:
        """Register a consumer from a heartbeat; True if the membership or the subscriptions changed."""
        group = self._groups.get(data.group_name)
        if group is None:
            group = ConsumerGroupInfo(group_name=data.group_name)
            self._groups[data.group_name] = group
        group.consume_type, group.message_model = data.consume_type, data.message_model
        group.consume_from_where = data.consume_from_where
        group.last_update_ms = info.last_update_ms
        old = group.channels.get(info.channel)
        members_changed = old is None or old.client_id != info.client_id
        group.channels[info.channel] = info
        subs_changed = self._update_subscriptions(group, data.subscriptions)
        if members_changed and notify:
            self._notify(group)
        return members_changed or subs_changed

    @staticmethod
    def _update_subscriptions(group: ConsumerGroupInfo, subs: tuple[SubscriptionData, ...]) -> bool:
        changed = False
        new = {s.topic: s for s in subs}
        for topic, sub in new.items():
            old = group.subscriptions.get(topic)
            # Keep the newest version: heartbeats of group members may arrive out of order.
            if old is None or (sub.sub_version > old.sub_version and old != sub):
                group.subscriptions[topic] = sub
                changed = True
        for topic in [t for t in group.subscriptions if t not in new]:
            del group.subscriptions[topic]
            changed = True
        return changed

    def unregister(self, group_name: str, channel: Channel) -> bool:
        group = self._groups.get(group_name)
        if group is None or group.channels.pop(channel, None) is None:
            return False
        self._after_removal(group)
        return True

    def channel_closed(self, channel: Channel) -> list[str]:
        """Remove a closed connection from every group; returns the groups it left."""
        left = [g for g in list(self._groups.values()) if g.channels.pop(channel, None) is not None]
        for group in left:
            self._after_removal(group)
        return [g.group_name for g in left]

    def scan_not_active(self, now_ms: int | None = None) -> list[tuple[str, str]]:
        """Expire channels silent for longer than the timeout; returns (group, client_id) pairs."""
        now = _now_ms() if now_ms is None else now_ms
        expired: list[tuple[str, str]] = []
        for group in list(self._groups.values()):
            stale = [
                ch for ch, info in group.channels.items() if now - info.last_update_ms > self._timeout_ms
            ]
            for ch in stale:
                expired.append((group.group_name, group.channels.pop(ch).client_id))
            if stale:
                self._after_removal(group)
        return expired

    def _after_removal(self, group: ConsumerGroupInfo) -> None:
        if group.channels:
            self._notify(group)
        else:
            del self._groups[group.group_name]

    def _notify(self, group: ConsumerGroupInfo) -> None:
        if self._on_ids_changed is not None and group.channels:
            self._on_ids_changed(group.group_name, group.all_channels())

    def get(self, group_name: str) -> ConsumerGroupInfo | None:
        return self._groups.get(group_name)

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def find_subscription(self, group_name: str, topic: str) -> SubscriptionData | None:
        group = self._groups.get(group_name)
        return None if group is None else group.subscriptions.get(topic)

    def groups_by_topic(self, topic: str) -> set[str]:
        return {g.group_name for g in self._groups.values() if topic in g.subscriptions}


class ProducerManager:
    """Producer groups and their channels (used for producer-connection admin queries)."""

    def __init__(self, *, channel_expired_timeout_ms: int = 120_000) -> None:
        self._timeout_ms = channel_expired_timeout_ms
        self._groups: dict[str, dict[Channel, ClientChannelInfo]] = {}

    def register(self, group_name: str, info: ClientChannelInfo) -> None:
        self._groups.setdefault(group_name, {})[info.channel] = info

    def unregister(self, group_name: str, channel: Channel) -> None:
        channels = self._groups.get(group_name)
        if channels is not None:
            channels.pop(channel, None)
            if not channels:
                del self._groups[group_name]

    def channel_closed(self, channel: Channel) -> None:
        for name in list(self._groups):
            self.unregister(name, channel)

    def scan_not_active(self, now_ms: int | None = None) -> int:
        now = _now_ms() if now_ms is None else now_ms
        removed = 0
        for name, channels in list(self._groups.items()):
            for ch in [c for c, i in channels.items() if now - i.last_update_ms > self._timeout_ms]:
                del channels[ch]
                removed += 1
            if not channels:
                del self._groups[name]
        return removed

    def get(self, group_name: str) -> dict[Channel, ClientChannelInfo]:
        return dict(self._groups.get(group_name, {}))

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def channel_count(self) -> int:
        return sum(len(c) for c in self._groups.values())
