"""TimerCheckpoint: ``config/timercheck``, one mapped page of big-endian longs (layout in :mod:`.layout`).

It says how far the timer got: the first slot time not yet delivered (``last_read_time_ms``), how
much of the timer log is durable (``last_timer_log_flush_pos``) and the next offset of the timer
topic's ConsumeQueue to enqueue (``last_timer_queue_offset``; ``master_timer_queue_offset`` is the
master's, the same on a master).  The fields change in memory; :meth:`flush` writes and syncs them,
after the timer log and the wheel were synced, so the file never claims more than is on disk.
"""

from __future__ import annotations

import mmap
import os
import time

from rocketq.broker.timer.layout import CHECKPOINT, CHECKPOINT_FILE_SIZE

__all__ = ["TimerCheckpoint"]


class TimerCheckpoint:
    """The checkpoint file (created zeroed when missing) and its fields."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.existed = existed
        (
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.state_version,
            self.data_timestamp,
            self.data_counter,
        ) = CHECKPOINT.unpack_from(self._mm, 0)

    def update_data_version(self, state_version: int = 0) -> None:
        """A new data version (``DataVersion.nextVersion``): the progress changed."""
        self.state_version = state_version
        self.data_timestamp = int(time.time() * 1000)
        self.data_counter += 1

    def encode(self) -> bytes:
        """The 56 bytes of the fields (``TimerCheckpoint.encode``)."""
        return CHECKPOINT.pack(
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.state_version,
            self.data_timestamp,
            self.data_counter,
        )

    def flush(self) -> None:
        self._mm[0 : CHECKPOINT.size] = self.encode()
        self._mm.flush()

    def close(self) -> None:
        self._mm.close()
