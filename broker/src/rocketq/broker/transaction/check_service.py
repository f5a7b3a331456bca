"""TransactionCheckService: the background driver of the check pass (RocketMQ's
``TransactionalMessageCheckService``).

A daemon thread that calls :meth:`TransactionalMessageService.check` every
``transaction_check_interval_ms`` (and once when woken).  It knows nothing about event loops: the
broker hands it a ``send_check`` callable that must not block (for an asyncio broker, one that
looks up a live producer channel and schedules a oneway CHECK_TRANSACTION_STATE with
``loop.call_soon_threadsafe`` / ``asyncio.run_coroutine_threadsafe``, returning whether a channel
was found).  A broker with its own scheduler can skip this class and call ``service.check`` itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rocketq.broker.transaction.service import CheckStats, SendCheck, TransactionalMessageService

__all__ = ["TransactionCheckService"]

log = logging.getLogger(__name__)


class TransactionCheckService:
    """Runs a check pass every interval on its own thread until :meth:`shutdown`."""

    def __init__(
        self,
        service: TransactionalMessageService,
        send_check: SendCheck,
        *,
        interval_ms: int | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.service = service
        self.send_check = send_check
        self.interval_s = (interval_ms or service.config.transaction_check_interval_ms) / 1000
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="TransactionalMessageCheckService", daemon=True
        )
        self.last_stats: CheckStats | None = None

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        """Run a pass now instead of at the end of the current interval."""
        self._wake.set()

    def run_once(self) -> CheckStats:
        stats = self.service.check(self._clock_ms(), self.send_check)
        self.last_stats = stats
        if stats.checked or stats.no_producer or stats.parked:
            log.info("transaction check pass: %s", stats)
        return stats

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_once()
            except Exception:
                log.exception("transaction check pass failed")

    def shutdown(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
