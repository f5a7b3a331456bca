"""TimerMessageService: the thread that drives a :class:`~.store.TimerMessageStore` on a master.

One round enqueues what arrived in the timer topic, delivers every slot whose time has passed and,
every ``timerFlushIntervalMs``, flushes the timer files and the checkpoint.  The thread then sleeps
until the next slot boundary, woken early when a message arrives in the timer topic.  Only a
master runs it: a slave keeps its timer files as they were, and a slave promoted by the
controller starts from its own checkpoint (MasterServices starts it with the other master services).
"""

from __future__ import annotations

import logging
import threading

from rocketq.broker.timer.store import TimerMessageStore
from rocketq.client.remoting.vocabulary import TIMER_TOPIC

__all__ = ["TimerMessageService"]

log = logging.getLogger(__name__)

ERROR_WAIT_S = 1.0
#: how often timer-log segments whose messages left the CommitLog are deleted (Java: 30 s)
CLEAN_INTERVAL_MS = 30_000
ENQUEUE_READS_PER_ROUND = 16


class TimerMessageService:
    """``start()`` loads the timer store and runs the thread; ``shutdown()`` stops it and flushes."""

    def __init__(self, timer: TimerMessageStore) -> None:
        self.timer = timer
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.timer.load()
        self.timer.store.add_arrival_listener(self._on_arrival)
        self._thread = threading.Thread(target=self._run, name="TimerMessageService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=10)
        self.timer.close()

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic == TIMER_TOPIC and not self._stop.is_set():
            self._wake.set()

    def _run(self) -> None:
        timer = self.timer
        precision = timer.precision_ms
        flush_interval = timer.config.flush_interval_ms
        last_flush = last_clean = timer.clock()
        while not self._stop.is_set():
            self._wake.clear()
            try:
                more = True  # after this many reads, deliver: arrivals never starve due slots
                for _ in range(ENQUEUE_READS_PER_ROUND):
                    if not timer.enqueue() or self._stop.is_set():
                        more = False
                        break
                timer.dequeue()
                now = timer.clock()
                if now - last_flush >= flush_interval:
                    timer.flush()
                    last_flush = now
                if now - last_clean >= CLEAN_INTERVAL_MS:
                    timer.timer_log.delete_expired(timer.store.min_phy_offset)
                    last_clean = now
            except Exception:
                log.exception("timer round failed")
                self._stop.wait(ERROR_WAIT_S)
                continue
            if more:
                continue  # more arrived than one round enqueues
            now = timer.clock()
            wait_ms = min(precision - now % precision, flush_interval) + 1
            self._wake.wait(wait_ms / 1000)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
