"""Topic and subscription-group configs created or updated in bulk from a JSON list (Java's
``updateTopicList`` / ``updateSubGroupList``).

A topic entry is Java's ``TopicConfig`` JSON (``topicName``, ``readQueueNums``,
``writeQueueNums``, ``perm``, ``order``, ``attributes``), a group entry its
``SubscriptionGroupConfig`` JSON (``groupName``, ``retryMaxTimes``, ...; what rocketq keeps of it
is :class:`~rocketq.client.admin_subgroup.SubscriptionGroupSettings`).  Every entry is checked
before anything is sent; then each is written to the one broker or to every master of the
cluster, as ``updateTopic`` / ``updateSubGroup`` write one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_subgroup import SubscriptionGroupSettings, target_brokers, update_sub_group
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.vocabulary import PERM_RW

__all__ = ["read_config_list", "update_sub_group_list", "update_topic_list"]


def read_config_list(path: str | Path, name_key: str) -> list[dict[str, Any]]:
    """The JSON list in ``path``; each entry an object naming itself under ``name_key``."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MQClientError(f"the file path {path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MQClientError(f"{path} is not a JSON file: {exc}") from exc
    if not isinstance(doc, list) or not all(isinstance(e, dict) and e.get(name_key) for e in doc):
        raise MQClientError(f"{path} must hold a JSON list of objects, each with {name_key!r}")
    return doc


def _attributes(raw: object) -> str | None:
    if not raw:
        return None
    if not isinstance(raw, Mapping):
        raise MQClientError(f"topic attributes must be a JSON object, got {raw!r}")
    return ",".join(f"+{k}={v}" for k, v in sorted(raw.items()))


@dataclass(frozen=True, slots=True)
class _TopicEntry:
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool
    attributes: str | None

    @classmethod
    def from_json(cls, c: Mapping[str, Any]) -> _TopicEntry:
        return cls(
            topic=str(c["topicName"]),
            read_queue_nums=int(c.get("readQueueNums", 16)),
            write_queue_nums=int(c.get("writeQueueNums", 16)),
            perm=int(c.get("perm", PERM_RW)),
            order=bool(c.get("order", False)),
            attributes=_attributes(c.get("attributes")),
        )


async def update_topic_list(
    admin: AsyncAdmin, configs: list[dict[str, Any]], *, broker_addr: str | None, cluster: str | None
) -> list[str]:
    """Create or update every topic of ``configs``; the broker addresses written."""
    addrs = await target_brokers(admin, broker_addr=broker_addr, cluster=cluster)
    try:
        topics = [_TopicEntry.from_json(c) for c in configs]
    except (TypeError, ValueError) as exc:
        raise MQClientError(f"bad TopicConfig entry: {exc}") from exc
    for addr in addrs:
        for t in topics:
            await admin.create_topic(
                t.topic,
                broker_addr=addr,
                read_queue_nums=t.read_queue_nums,
                write_queue_nums=t.write_queue_nums,
                perm=t.perm,
                order=t.order,
                attributes=t.attributes,
            )
    return addrs


async def update_sub_group_list(
    admin: AsyncAdmin, configs: list[dict[str, Any]], *, broker_addr: str | None, cluster: str | None
) -> list[str]:
    """Create or update every subscription group of ``configs``; the broker addresses written."""
    addrs = await target_brokers(admin, broker_addr=broker_addr, cluster=cluster)
    try:
        groups = [SubscriptionGroupSettings.from_json(c) for c in configs]
    except (TypeError, ValueError) as exc:
        raise MQClientError(f"bad SubscriptionGroupConfig entry: {exc}") from exc
    for addr in addrs:
        for g in groups:
            await update_sub_group(admin, g, broker_addr=addr)
    return addrs
