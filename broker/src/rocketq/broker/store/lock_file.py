"""The store's ``lock`` and ``abort`` files: one broker per store, and whether the last exit was clean.

As RocketMQ's ``DefaultMessageStore`` does, a running store holds an exclusive ``flock`` on
``<storePathRootDir>/lock`` (a second broker on the same directory fails at start) and keeps an
``abort`` file that only a clean shutdown removes: finding it at start means the last process died
and recovery must check the CommitLog's tail (abnormal recovery).
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from rocketq.broker.store.errors import StoreLockedError

__all__ = ["StoreLock", "mark_clean_exit", "mark_running"]


class StoreLock:
    """The exclusive ``flock`` on the store's ``lock`` file."""

    def __init__(self, path: str, store_dir: str) -> None:
        self._path = path
        self._store_dir = store_dir
        self._fd = -1

    def acquire(self) -> None:
        """Take the lock; :class:`StoreLockedError` if another broker holds it."""
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreLockedError(f"the store {self._store_dir} is locked by another broker") from exc
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = -1


def mark_running(abort_path: str) -> bool:
    """Create the ``abort`` file (durably); True if it was absent, i.e. the last exit was clean."""
    last_exit_ok = not os.path.exists(abort_path)
    with open(abort_path, "w") as f:
        f.flush()
        os.fsync(f.fileno())
    return last_exit_ok


def mark_clean_exit(abort_path: str) -> None:
    """Remove the ``abort`` file: the next start recovers normally."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(abort_path)
