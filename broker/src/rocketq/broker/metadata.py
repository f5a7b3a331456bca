"""The broker's metadata files in RocketMQ's ``config/`` layout, typed, written atomically.

These are broker state (topics, subscription groups, consumer and delay offsets, the transaction
check progress), not part of the storage engine: ``store/`` holds only the CommitLog,
ConsumeQueue, IndexFile and checkpoint files.

Files and JSON shapes (as written by RocketMQ 4.x's fastjson; integer map keys may be unquoted)::

    topics.json             {"dataVersion": {"counter": n, "timestamp": ms},
                             "topicConfigTable": {name: {"topicName", "readQueueNums", "writeQueueNums",
                                                         "perm", "topicFilterType", "topicSysFlag", "order"}}}
    consumerOffset.json     {"offsetTable": {"topic@group": {"0": 123, ...}}}
    subscriptionGroup.json  {"subscriptionGroupTable": {group: {"groupName", "consumeEnable", ...}},
                             "dataVersion": {...}}
    delayOffset.json        {"offsetTable": {"1": 0, ...}}

Theory of operation.  A write goes to ``<file>.tmp`` and is fsynced; the current file is hard-linked
to ``<file>.bak`` and the temp file renamed over it (atomic), then the directory is fsynced, so the
file always exists and is either the old or the new version.  Loading reads the file, falls back
to the ``.bak`` if it is missing or does not parse, and parses leniently (fastjson's unquoted keys)
with :mod:`rocketq.client.remoting.lenient_json` when that module is available.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketq.broker.store.errors import MetadataError
from rocketq.client.remoting import lenient_json
from rocketq.client.remoting.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper

log = logging.getLogger(__name__)

TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"
DELAY_OFFSET_JSON = "delayOffset.json"


# -- generic file handling -------------------------------------------------------------------------
def _parse(text: str) -> Any:
    return lenient_json.loads(text)


def load_json_file(path: str) -> Any | None:
    """Parse ``path`` (or its ``.bak``); None if neither exists.  MetadataError if both are unreadable."""
    errors = []
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        if not text.strip():
            errors.append(f"{candidate}: empty")
            continue
        try:
            data = _parse(text)
        except ValueError as exc:
            errors.append(f"{candidate}: {exc}")
            log.error("metadata file %s does not parse: %s", candidate, exc)
            continue
        if candidate != path:
            log.warning("loaded metadata from the backup %s", candidate)
        return data
    if errors:
        raise MetadataError("cannot load metadata: " + "; ".join(errors))
    return None


def persist_json_file(path: str, data: Any) -> None:
    """Write ``data`` as JSON atomically, keeping the previous version as ``.bak``."""
    persist_text_file(path, json.dumps(data, indent=4, sort_keys=False, ensure_ascii=False))


def persist_text_file(path: str, text: str) -> None:
    """Write ``text`` atomically, keeping the previous version as ``.bak`` (fastjson-shaped files)."""
    directory = os.path.dirname(path) or "."
    tmp = path + ".tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            bak = path + ".bak"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(bak)
            try:
                os.link(path, bak)
            except OSError:
                import shutil

                shutil.copyfile(path, bak)
        os.replace(tmp, path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise MetadataError(f"cannot persist {path}: {exc}") from exc


# -- typed records ---------------------------------------------------------------------------------
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass(frozen=True, kw_only=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: the group consumes FIFO: 5.x proxies pop it orderly and tell its SDKs ``fifo=true``
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {_camel(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SubscriptionGroupConfig:
        name = d.get("groupName")
        if not isinstance(name, str) or not name:
            raise ValueError("subscription group config has no groupName")
        return cls(**_from_camel(cls, d))


def _from_camel(cls: Any, d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        key = _camel(f.name)
        if key in d:
            value = d[key]
            if f.type in ("int", int):
                value = int(value)
            elif f.type in ("bool", bool):
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            out[f.name] = value
    return out


def _data_version(d: Any) -> DataVersion:
    dv = d.get("dataVersion") if isinstance(d, dict) else None
    return DataVersion.from_obj(dv) if isinstance(dv, dict) else DataVersion()


def _fill_names(d: Any, table_key: str, name_key: str) -> dict[str, Any]:
    """Entries keyed by name may omit the name field; put it back."""
    if not isinstance(d, dict):
        return {}
    table = d.get(table_key) or {}
    return {**d, table_key: {k: {name_key: k, **v} for k, v in table.items()}}


# -- tables ----------------------------------------------------------------------------------------
#: topics.json is RocketMQ's TopicConfigSerializeWrapper (the client's route codec owns the type).
TopicConfigTable = TopicConfigSerializeWrapper


@dataclass(kw_only=True, slots=True)
class SubscriptionGroupTable:
    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {k: v.to_json() for k, v in self.subscription_group_table.items()},
            "dataVersion": self.data_version.to_obj(),
        }

    def next_version(self) -> None:
        self.data_version = self.data_version.next_version(int(time.time() * 1000))

    @classmethod
    def from_json(cls, d: Any) -> SubscriptionGroupTable:
        table = d.get("subscriptionGroupTable") or {} if isinstance(d, dict) else {}
        return cls(
            subscription_group_table={
                k: SubscriptionGroupConfig.from_json({"groupName": k, **v}) for k, v in table.items()
            },
            data_version=_data_version(d),
        )


@dataclass(kw_only=True, slots=True)
class ConsumerOffsetTable:
    """``"topic@group" -> {queue_id: offset}``."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.offset_table.items()}}

    @classmethod
    def from_json(cls, d: Any) -> ConsumerOffsetTable:
        table = d.get("offsetTable") or {} if isinstance(d, dict) else {}
        return cls(offset_table={k: {int(q): int(o) for q, o in v.items()} for k, v in table.items()})


@dataclass(kw_only=True, slots=True)
class DelayOffsetTable:
    """Delay level -> offset in SCHEDULE_TOPIC_XXXX queue (level - 1)."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {str(k): v for k, v in self.offset_table.items()}}

    @classmethod
    def from_json(cls, d: Any) -> DelayOffsetTable:
        table = d.get("offsetTable") or {} if isinstance(d, dict) else {}
        return cls(offset_table={int(k): int(v) for k, v in table.items()})


class MetadataFiles:
    """Typed load/persist of the four files under ``<store root>/config``."""

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir

    def path(self, name: str) -> str:
        return os.path.join(self.config_dir, name)

    def load_topics(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper.from_obj(
            _fill_names(load_json_file(self.path(TOPICS_JSON)) or {}, "topicConfigTable", "topicName")
        )

    def persist_topics(self, table: TopicConfigSerializeWrapper) -> None:
        persist_json_file(self.path(TOPICS_JSON), table.to_obj())

    def load_consumer_offsets(self) -> ConsumerOffsetTable:
        return ConsumerOffsetTable.from_json(load_json_file(self.path(CONSUMER_OFFSET_JSON)) or {})

    def persist_consumer_offsets(self, table: ConsumerOffsetTable) -> None:
        persist_json_file(self.path(CONSUMER_OFFSET_JSON), table.to_json())

    def load_subscription_groups(self) -> SubscriptionGroupTable:
        return SubscriptionGroupTable.from_json(load_json_file(self.path(SUBSCRIPTION_GROUP_JSON)) or {})

    def persist_subscription_groups(self, table: SubscriptionGroupTable) -> None:
        persist_json_file(self.path(SUBSCRIPTION_GROUP_JSON), table.to_json())

    def load_delay_offsets(self) -> DelayOffsetTable:
        return DelayOffsetTable.from_json(load_json_file(self.path(DELAY_OFFSET_JSON)) or {})

    def persist_delay_offsets(self, table: DelayOffsetTable) -> None:
        persist_json_file(self.path(DELAY_OFFSET_JSON), table.to_json())


__all__ = [
    "ConsumerOffsetTable",
    "DelayOffsetTable",
    "MetadataFiles",
    "SubscriptionGroupConfig",
    "SubscriptionGroupTable",
    "TopicConfig",
    "TopicConfigTable",
    "load_json_file",
    "persist_json_file",
    "persist_text_file",
]
