"""The dashboard's history: put/get TPS per broker and lag per consumer group, sampled periodically.

A :class:`Sampler` task asks every broker for GET_BROKER_RUNTIME_INFO and every group for
GET_CONSUME_STATS each ``interval_s`` and appends one :class:`Sample` to a bounded ring buffer
(``collections.deque(maxlen=...)``), so memory stays fixed however long the dashboard runs.
TPS is the change of the broker's put/get message counters between two samples divided by the
time between them (the broker's own ``putTps`` is an average since boot); the first sample of a
broker has none.  A broker or group that does not answer is left out of that sample, and the
sampler goes on; it never raises out of its loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import RocketQError

__all__ = ["Sample", "Sampler"]

log = logging.getLogger(__name__)
_MAX_GROUPS = 50


@dataclass(frozen=True, slots=True)
class Sample:
    """One point in time: per broker address (put TPS, get TPS), per group its total lag."""

    timestamp_ms: int
    tps: dict[str, tuple[float, float]] = field(default_factory=dict)
    lag: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "t": self.timestamp_ms,
            "tps": {a: {"put": p, "get": g} for a, (p, g) in self.tps.items()},
            "lag": self.lag,
        }


class Sampler:
    def __init__(self, admin: AsyncAdmin, *, interval_s: float = 5.0, capacity: int = 360) -> None:
        if interval_s <= 0 or capacity <= 0:
            raise ValueError("the sample interval and the history capacity must be positive")
        self.admin = admin
        self.interval_s = interval_s
        self.samples: deque[Sample] = deque(maxlen=capacity)
        self._counters: dict[str, tuple[float, int, int]] = {}  # addr -> (monotonic s, put, get)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dashboard-sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def latest_tps(self, addr: str) -> tuple[float, float] | None:
        for sample in reversed(self.samples):
            if addr in sample.tps:
                return sample.tps[addr]
        return None

    async def _run(self) -> None:
        while True:
            try:
                self.samples.append(await self.sample_once())
            except asyncio.CancelledError:
                raise
            except Exception:  # the history must survive anything one round runs into
                log.exception("dashboard sample failed")
            await asyncio.sleep(self.interval_s)

    async def sample_once(self) -> Sample:
        now_ms = int(time.time() * 1000)
        tps: dict[str, tuple[float, float]] = {}
        lag: dict[str, int] = {}
        with contextlib.suppress(RocketQError):
            info = await self.admin.cluster_list()
            for bd in info.broker_addr_table.values():
                for addr in bd.broker_addrs.values():
                    rate = await self._broker_tps(addr)
                    if rate is not None:
                        tps[addr] = rate
        with contextlib.suppress(RocketQError):
            for group in (await self.admin.group_list())[:_MAX_GROUPS]:
                with contextlib.suppress(RocketQError):
                    lag[group] = sum(q.lag for q in await self.admin.consume_stats(group))
        return Sample(now_ms, tps, lag)

    async def _broker_tps(self, addr: str) -> tuple[float, float] | None:
        try:
            table = await self.admin.broker_runtime_info(addr, 3000)
            put, get = int(table.get("msgPutTotalTodayNow", 0)), int(table.get("msgGetTotalTodayNow", 0))
        except (RocketQError, ValueError):
            return None
        now = time.monotonic()
        before = self._counters.get(addr)
        self._counters[addr] = (now, put, get)
        if before is None or now <= before[0]:
            return None
        dt = now - before[0]
        return round(max(put - before[1], 0) / dt, 2), round(max(get - before[2], 0) / dt, 2)
