"""StoreConfig: every knob of the storage engine, with RocketMQ's defaults.

A frozen keyword-only dataclass with the unit in each name.  :meth:`StoreConfig.from_broker_conf`
accepts RocketMQ's ``MessageStoreConfig`` camelCase keys (as found in ``broker.conf``) so a
RocketMQ user's file works unchanged; unknown keys are ignored by that loader.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from rocketq.broker.store.errors import StoreConfigError
from rocketq.client.remoting.record_layout import END_FILE_MIN_BLANK_LENGTH as END_FILE_MIN_BLANK_LENGTH

CQ_UNIT_SIZE = 20


class FlushDiskType(Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreConfig:
    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    mapped_file_size_commit_log_bytes: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue_units: int = 300_000
    max_message_size_bytes: int = 4 * 1024 * 1024
    max_properties_size_bytes: int = 32767
    max_topic_length: int = 127
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    sync_flush_timeout_ms: int = 5000
    os_page_cache_busy_timeout_ms: int = 1000
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    default_query_max_num: int = 32
    file_reserved_time_hours: float = 72
    delete_when: str = "04"
    clean_resource_interval_ms: int = 10_000
    disk_max_used_space_ratio_percent: int = 75
    disk_space_clean_forcibly_ratio_percent: int = 85
    disk_space_warning_level_ratio_percent: int = 90
    delete_file_batch_max: int = 10
    delete_commit_log_files_interval_ms: int = 100
    destroy_mapped_file_interval_forcibly_ms: int = 120_000
    check_crc_on_recover: bool = True
    reput_idle_wait_ms: int = 10
    #: after a dispatch round of replicated bytes (a slave), wait this long before the next: a
    #: slave's appends do not wake dispatch, and fuller rounds cost less CPU per record
    replica_dispatch_interval_ms: int = 50
    #: CommitLog bytes behind the flushed position kept in the page cache; older pages are dropped
    #: from it after each flush (0: never, the kernel decides, as RocketMQ; docs/storage.md)
    commit_log_page_cache_window_bytes: int = 0
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    preallocate_files: bool = True

    def __post_init__(self) -> None:
        if self.mapped_file_size_commit_log_bytes < 4096:
            raise StoreConfigError("mapped_file_size_commit_log_bytes must be >= 4096")
        if self.mapped_file_size_consume_queue_units < 1:
            raise StoreConfigError("mapped_file_size_consume_queue_units must be >= 1")
        if (
            not 0
            < self.max_message_size_bytes
            <= self.mapped_file_size_commit_log_bytes - END_FILE_MIN_BLANK_LENGTH
        ):
            raise StoreConfigError("max_message_size_bytes must be positive and fit in one CommitLog file")
        if not 0 <= self.max_properties_size_bytes <= 32767:
            raise StoreConfigError("max_properties_size_bytes must be within 0..32767")
        if not 0 < self.max_topic_length <= 32767:
            raise StoreConfigError("max_topic_length must be within 1..32767")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise StoreConfigError("max_hash_slot_num must be >= 1 and max_index_num >= 2")
        ratios = (
            self.disk_max_used_space_ratio_percent,
            self.disk_space_clean_forcibly_ratio_percent,
            self.disk_space_warning_level_ratio_percent,
        )
        if not all(0 < r <= 100 for r in ratios):
            raise StoreConfigError("disk ratios must be percentages within 1..100")
        if not 1 <= self.replica_dispatch_interval_ms <= 10_000:
            raise StoreConfigError(
                "replica_dispatch_interval_ms (replicaDispatchIntervalMs) must be within 1..10000 ms"
            )
        if self.commit_log_page_cache_window_bytes < 0:
            raise StoreConfigError(
                "commit_log_page_cache_window_bytes (commitLogPageCacheWindow) must be >= 0 bytes "
                f"(0: keep everything), not {self.commit_log_page_cache_window_bytes}"
            )
        self.delete_hours()  # validates the format

    # -- derived values --------------------------------------------------------------------
    @property
    def mapped_file_size_consume_queue_bytes(self) -> int:
        return self.mapped_file_size_consume_queue_units * CQ_UNIT_SIZE

    @property
    def commit_log_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    def delete_hours(self) -> frozenset[int]:
        """The hours of the day listed in ``delete_when`` ("04" or "04;16")."""
        try:
            hours = frozenset(int(h) for h in self.delete_when.split(";") if h.strip())
        except ValueError as exc:
            raise StoreConfigError(
                f"delete_when must be hours separated by ';': {self.delete_when!r}"
            ) from exc
        if any(not 0 <= h <= 23 for h in hours):
            raise StoreConfigError(f"delete_when hours must be within 0..23: {self.delete_when!r}")
        return hours

    # -- RocketMQ broker.conf keys ----------------------------------------------------------
    @classmethod
    def from_broker_conf(cls, conf: Mapping[str, str], **overrides: Any) -> StoreConfig:
        """Build a config from RocketMQ ``MessageStoreConfig`` keys (camelCase, string values)."""
        kwargs: dict[str, Any] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for java_key, (name, convert) in _JAVA_KEYS.items():
            if java_key in conf:
                value = str(conf[java_key]).strip()
                try:
                    kwargs[name] = convert(value)
                except ValueError as exc:
                    raise StoreConfigError(f"bad value for {java_key}: {value!r}") from exc
        for key, value in overrides.items():
            if key not in types:
                raise StoreConfigError(f"unknown store config key {key!r}")
            kwargs[key] = value
        return cls(**kwargs)


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(value)


_JAVA_KEYS: dict[str, tuple[str, Any]] = {
    "storePathRootDir": ("store_path_root_dir", str),
    "mappedFileSizeCommitLog": ("mapped_file_size_commit_log_bytes", int),
    "mappedFileSizeConsumeQueue": ("mapped_file_size_consume_queue_units", lambda v: int(v) // CQ_UNIT_SIZE),
    "maxMessageSize": ("max_message_size_bytes", int),
    "flushDiskType": ("flush_disk_type", FlushDiskType),
    "flushIntervalCommitLog": ("flush_interval_commit_log_ms", int),
    "flushCommitLogLeastPages": ("flush_commit_log_least_pages", int),
    "flushCommitLogThoroughInterval": ("flush_commit_log_thorough_interval_ms", int),
    "flushIntervalConsumeQueue": ("flush_interval_consume_queue_ms", int),
    "flushConsumeQueueLeastPages": ("flush_consume_queue_least_pages", int),
    "flushConsumeQueueThoroughInterval": ("flush_consume_queue_thorough_interval_ms", int),
    "syncFlushTimeout": ("sync_flush_timeout_ms", int),
    "osPageCacheBusyTimeOutMills": ("os_page_cache_busy_timeout_ms", int),
    "messageIndexEnable": ("message_index_enable", _bool),
    "maxHashSlotNum": ("max_hash_slot_num", int),
    "maxIndexNum": ("max_index_num", int),
    "defaultQueryMaxNum": ("default_query_max_num", int),
    "fileReservedTime": ("file_reserved_time_hours", float),
    "deleteWhen": ("delete_when", str),
    "cleanResourceInterval": ("clean_resource_interval_ms", int),
    "diskMaxUsedSpaceRatio": ("disk_max_used_space_ratio_percent", int),
    "diskSpaceCleanForciblyRatio": ("disk_space_clean_forcibly_ratio_percent", int),
    "diskSpaceWarningLevelRatio": ("disk_space_warning_level_ratio_percent", int),
    "deleteFileBatchMax": ("delete_file_batch_max", int),
    "deleteCommitLogFilesInterval": ("delete_commit_log_files_interval_ms", int),
    "destroyMapedFileIntervalForcibly": ("destroy_mapped_file_interval_forcibly_ms", int),
    "checkCRCOnRecover": ("check_crc_on_recover", _bool),
    "messageDelayLevel": ("message_delay_level", str),
    "replicaDispatchIntervalMs": ("replica_dispatch_interval_ms", int),  # rocketq's own
    "commitLogPageCacheWindow": ("commit_log_page_cache_window_bytes", int),  # rocketq's own
}


def store_conf_defaults() -> dict[str, str]:
    """Each ``broker.conf`` key :meth:`StoreConfig.from_broker_conf` reads, with its default as text
    in the key's own unit (``mappedFileSizeConsumeQueue`` in bytes, as RocketMQ writes it)."""
    defaults = StoreConfig()
    out: dict[str, str] = {}
    for java_key, (name, _) in _JAVA_KEYS.items():
        value = getattr(defaults, name)
        if java_key == "mappedFileSizeConsumeQueue":
            value = defaults.mapped_file_size_consume_queue_bytes
        if isinstance(value, bool):
            out[java_key] = "true" if value else "false"
        elif isinstance(value, Enum):
            out[java_key] = str(value.value)
        elif isinstance(value, float) and value.is_integer():
            out[java_key] = str(int(value))
        else:
            out[java_key] = str(value)
    return out
