"""Broker-side queue locks for ordered consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

An orderly consumer locks each of its queues on the master every 20 s; a lock belongs to one
client id of the group and expires ``rebalanceLockMaxLiveTime`` (60 s) after its last renewal, so a
crashed consumer's queues become lockable by the others.  Runs on the event loop thread only.

The lock body's message queues are ``{"brokerName", "queueId", "topic"}`` objects; they are kept
here as the vocabulary's :class:`MessageQueue`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from rocketq.client.remoting.vocabulary import MessageQueue

__all__ = ["LockEntry", "MessageQueue", "RebalanceLockManager"]


@dataclass(slots=True)
class LockEntry:
    client_id: str
    last_update_ms: int


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class RebalanceLockManager:
    """``group -> {mq: LockEntry}`` with expiry."""

    def __init__(self, *, max_live_time_ms: int = 60_000) -> None:
        self._max_live_ms = max_live_time_ms
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _live(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update_ms <= self._max_live_ms

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now_ms: int | None = None
    ) -> set[MessageQueue]:
        """Lock (or renew) every queue that is free, expired or already ours; return the ones we hold."""
        now = _now_ms() if now_ms is None else now_ms
        table = self._table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None or entry.client_id == client_id or not self._live(entry, now):
                table[mq] = LockEntry(client_id=client_id, last_update_ms=now)
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        table = self._table.get(group)
        if table is None:
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry.client_id == client_id:
                del table[mq]
        if not table:
            del self._table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_ms: int | None = None) -> bool:
        now = _now_ms() if now_ms is None else now_ms
        entry = self._table.get(group, {}).get(mq)
        return entry is not None and entry.client_id == client_id and self._live(entry, now)

    def lock_owner(self, group: str, mq: MessageQueue, now_ms: int | None = None) -> str | None:
        now = _now_ms() if now_ms is None else now_ms
        entry = self._table.get(group, {}).get(mq)
        return entry.client_id if entry is not None and self._live(entry, now) else None

    def scan_expired(self, now_ms: int | None = None) -> int:
        """Drop expired entries (memory hygiene); returns how many were removed."""
        now = _now_ms() if now_ms is None else now_ms
        removed = 0
        for group, table in list(self._table.items()):
            for mq in [m for m, e in table.items() if not self._live(e, now)]:
                del table[mq]
                removed += 1
            if not table:
                del self._table[group]
        return removed
