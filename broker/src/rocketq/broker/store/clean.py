"""Retention: delete expired CommitLog segments and the derived data below the CommitLog minimum.

Theory of operation (RocketMQ's ``CleanCommitLogService`` / ``CleanConsumeQueueService``).  Every
``clean_resource_interval_ms`` the service measures disk usage of the store's filesystem.  CommitLog
segments older than ``file_reserved_time_hours`` (by last modification) are deleted when the hour
is one of ``delete_when``, when usage exceeds ``disk_max_used_space_ratio_percent`` (75), or on a
manual trigger; above ``disk_space_clean_forcibly_ratio_percent`` (85) the oldest segments are
deleted even if not expired; above ``disk_space_warning_level_ratio_percent`` (90) the store
rejects writes until usage drops.  At most ``delete_file_batch_max`` segments go per round; the
segment being written is never deleted.  Then ConsumeQueue segments and index files entirely below
the new CommitLog minimum are removed and each queue's minimum offset is corrected.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterable

from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.consume_queue import ConsumeQueue
from rocketq.broker.store.index_file import IndexService
from rocketq.broker.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

DiskUsageProbe = Callable[[str], float]


def disk_usage_percent(path: str) -> float:
    """Used space of the filesystem holding ``path``, in percent."""
    usage = shutil.disk_usage(path)
    return 100.0 * (usage.total - usage.free) / usage.total if usage.total else 0.0


class CleanService:
    """Runs retention rounds; also serves manual triggers."""

    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: Callable[[], Iterable[ConsumeQueue]],
        index_service: IndexService | None,
        probe: DiskUsageProbe | None = None,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index_service = index_service
        self.probe = probe or disk_usage_percent
        self.disk_full = False
        self.last_usage_percent = 0.0
        self._manual = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="CleanService", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.config.clean_resource_interval_ms / 1000):
            try:
                self.run_once()
            except Exception:
                log.exception("clean round failed")

    def trigger(self) -> None:
        self._manual = 20  # RocketMQ retries a manual delete for 20 rounds

    def check_disk(self) -> float:
        """Measure usage and update the write-rejection flag."""
        usage = self.probe(self.config.store_path_root_dir)
        self.last_usage_percent = usage
        full = usage > self.config.disk_space_warning_level_ratio_percent
        if full and not self.disk_full:
            log.error(
                "disk usage %.1f%% exceeds %d%%: the store rejects writes",
                usage,
                self.config.disk_space_warning_level_ratio_percent,
            )
        elif not full and self.disk_full:
            log.info(
                "disk usage %.1f%% is back under %d%%: the store accepts writes again",
                usage,
                self.config.disk_space_warning_level_ratio_percent,
            )
        self.disk_full = full
        return usage

    def run_once(self, *, manual: bool = False, force: bool = False) -> int:
        """One retention round; return the number of CommitLog segments deleted."""
        with self._lock:
            cfg = self.config
            usage = self.check_disk()
            is_time = time.localtime().tm_hour in cfg.delete_hours()
            is_space = usage > cfg.disk_max_used_space_ratio_percent
            forcibly = force or usage > cfg.disk_space_clean_forcibly_ratio_percent
            if self._manual > 0:
                self._manual -= 1
                manual = True
            deleted = 0
            if is_time or is_space or manual or forcibly:
                if is_space or forcibly:
                    log.warning(
                        "disk usage %.1f%%: cleaning the commit log%s", usage, " forcibly" if forcibly else ""
                    )
                deleted = self._delete_commit_log(forcibly)
            self._clean_derived()
            return deleted

    def _delete_commit_log(self, forcibly: bool) -> int:
        cfg = self.config
        reserved_ms = cfg.file_reserved_time_hours * 3_600_000

        def expired(mf: MappedFile) -> bool:
            return forcibly or time.time() * 1000 >= mf.last_modified_ms + reserved_ms

        deleted = self.commit_log.mfq.delete_files_if(
            expired, cfg.delete_file_batch_max, cfg.delete_commit_log_files_interval_ms / 1000
        )
        if deleted:
            log.info(
                "deleted %d commit log segment(s); the commit log now starts at %d",
                deleted,
                self.commit_log.min_offset,
            )
        return deleted

    def _clean_derived(self) -> None:
        min_phy = self.commit_log.min_offset
        for cq in list(self.queues()):
            cq.delete_expired_files(min_phy)
        if self.index_service is not None:
            self.index_service.delete_expired(min_phy)
