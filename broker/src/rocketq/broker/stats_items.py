"""The broker's statistics items (RocketMQ's ``BrokerStatsManager``, ``StatsItemSet``, ``StatsItem``):
what mqadmin ``statsAll`` and ``exportMetrics`` read through VIEW_BROKER_STATS_DATA.

Each item is a pair of counters, ``value`` (messages or bytes) and ``times`` (recorded calls),
under a stats name (:class:`~rocketq.client.remoting.broker_stats.StatsName`) and a key: the
topic, ``topic@group`` or the cluster name, as Java keys them.  The processors record one call per
request (a send's put, a pull or POP that found messages, a send-back), never per message.

Theory of operation.  Counters only grow; the windows are built by sampling them.  A background
task (:meth:`BrokerStatsManager.run`, on the broker's loop, where the counters are written too, so
no lock) takes a snapshot ``(time, times, value)`` of every item every 10 s into its minute list
(7 kept: one minute), every 10 min into its hour list (7 kept) and every hour into its day list
(25 kept), each schedule starting when the broker starts, as Java's scheduled executor does.  The
first snapshot of an item in a list is preceded by a zero snapshot one period earlier, so a young
item reports everything it counted.  A window's ``sum`` is the last snapshot's value minus the
first's, ``tps`` that sum per second between them and ``avgpt`` the sum per call.  Hence, as in
Java, a message counts in the minute window only after the next 10 s sample and leaves it a
minute later, and ``statsAll`` falls back from the day to the hour to the minute sum.  The periods
are :class:`SamplingPeriods`; tests shorten them with ``ROCKETQ_STATS_SAMPLING_MS``.

Puts made on other threads (the delay-level scheduler, the timer wheel, transaction commits in the
executor) go through :meth:`BrokerStatsManager.put_from_thread`: the amounts add up, under a lock,
in a pending table keyed by (name, key) that the loop folds into the items before each sample,
read or delete.  The loop's own hot paths (send, pull, POP) keep writing the items lock-free.
Deleting a topic or a group removes its items as Java's ``onTopicDeleted``/``onGroupDeleted`` do.
"""

from __future__ import annotations

import asyncio
import enum
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rocketq.client.remoting.broker_stats import BrokerStatsData, BrokerStatsItem, StatsName, topic_group_key
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC

#: the group Java's scheduler reads SCHEDULE_TOPIC_XXXX as (``MixAll.SCHEDULE_CONSUMER_GROUP``)
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"

__all__ = [
    "SAMPLING_ENV",
    "SCHEDULE_CONSUMER_GROUP",
    "BrokerStatsManager",
    "SamplingPeriods",
    "StatsItem",
    "Window",
]

#: ``minute,hour,day`` sampling periods in ms (tests only; the defaults are Java's 10 s, 10 min, 1 h)
SAMPLING_ENV = "ROCKETQ_STATS_SAMPLING_MS"


class Window(enum.Enum):
    """A window of a stats item."""

    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"

    @property
    def kept(self) -> int:
        """How many snapshots the window keeps (Java: 7, 7 and 25)."""
        return 25 if self is Window.DAY else 7


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingPeriods:
    """How often each window is sampled."""

    minute_ms: int = 10_000
    hour_ms: int = 600_000
    day_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for name in ("minute_ms", "hour_ms", "day_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    def of(self, window: Window) -> int:
        return {Window.MINUTE: self.minute_ms, Window.HOUR: self.hour_ms, Window.DAY: self.day_ms}[window]

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> SamplingPeriods:
        """Java's periods, or those of ``ROCKETQ_STATS_SAMPLING_MS=minute,hour,day`` (ms)."""
        text = env.get(SAMPLING_ENV, "").strip()
        if not text:
            return cls()
        parts = text.split(",")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"{SAMPLING_ENV} must be three periods in ms, minute,hour,day; got {text!r}")
        minute, hour, day = (int(p) for p in parts)
        return cls(minute_ms=minute, hour_ms=hour, day_ms=day)


_Snapshot = tuple[int, int, int]  # (time ms, times, value)


class StatsItem:
    """One name/key's counters and its three snapshot lists."""

    __slots__ = ("_lists", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._lists: dict[Window, deque[_Snapshot]] = {w: deque(maxlen=w.kept) for w in Window}

    def add(self, value: int, times: int) -> None:
        self.value += value
        self.times += times

    def sample(self, window: Window, now_ms: int, period_ms: int) -> None:
        snapshots = self._lists[window]
        if not snapshots:
            snapshots.append((now_ms - period_ms, 0, 0))
        snapshots.append((now_ms, self.times, self.value))

    def snapshot(self, window: Window) -> BrokerStatsItem:
        snapshots = self._lists[window]
        if not snapshots:
            return BrokerStatsItem()
        (t0, times0, v0), (t1, times1, v1) = snapshots[0], snapshots[-1]
        total = v1 - v0
        tps = total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0
        calls = times1 - times0
        return BrokerStatsItem(total, tps, total / calls if calls > 0 else 0.0)

    def data(self) -> BrokerStatsData:
        return BrokerStatsData(
            self.snapshot(Window.MINUTE), self.snapshot(Window.HOUR), self.snapshot(Window.DAY)
        )


class BrokerStatsManager:
    """Every item of one broker, by stats name and key, and their sampling."""

    def __init__(
        self,
        cluster_name: str = "DefaultCluster",
        periods: SamplingPeriods | None = None,
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.cluster_name = cluster_name
        self.periods = periods or SamplingPeriods()
        self._clock_ms = clock_ms
        self._sets: dict[str, dict[str, StatsItem]] = {name.value: {} for name in StatsName}
        self._due: dict[Window, int] | None = None
        #: amounts recorded on other threads, (name, key) -> [value, times]; folded in by the loop
        self._pending: dict[tuple[StatsName, str], list[int]] = {}
        self._pending_lock = threading.Lock()

    def add(self, name: StatsName, key: str, value: int, times: int = 1) -> None:
        items = self._sets[name]
        item = items.get(key)
        if item is None:
            item = items[key] = StatsItem()
        item.add(value, times)

    def record_put(self, topic: str, count: int, size: int) -> None:
        """One put request stored ``count`` messages (``size`` bytes) in ``topic``."""
        self.add(StatsName.TOPIC_PUT_NUMS, topic, count)
        self.add(StatsName.TOPIC_PUT_SIZE, topic, size)
        self.add(StatsName.BROKER_PUT_NUMS, self.cluster_name, count, 0)  # Java adds no call here

    def record_get(self, group: str, topic: str, count: int, size: int) -> None:
        """One read (pull or POP) returned ``count`` messages (``size`` bytes) of ``topic`` to ``group``."""
        key = topic_group_key(topic, group)
        self.add(StatsName.GROUP_GET_NUMS, key, count)
        self.add(StatsName.GROUP_GET_SIZE, key, size)
        self.add(StatsName.BROKER_GET_NUMS, self.cluster_name, count, 0)

    def record_send_back(self, group: str, topic: str) -> None:
        """A consumer of ``group`` sent a message of ``topic`` back (CONSUMER_SEND_MSG_BACK)."""
        self.add(StatsName.SNDBCK_PUT_NUMS, topic_group_key(topic, group), 1)

    def add_from_thread(self, name: StatsName, key: str, value: int, times: int = 1) -> None:
        """:meth:`add` from any thread: held until the loop's next :meth:`drain`."""
        with self._pending_lock:
            amounts = self._pending.get((name, key))
            if amounts is None:
                self._pending[(name, key)] = [value, times]
            else:
                amounts[0] += value
                amounts[1] += times

    def put_from_thread(self, topic: str, count: int, size: int) -> None:
        """:meth:`record_put` from any thread (one call: the scheduler's, the timer's or a commit's put)."""
        self.add_from_thread(StatsName.TOPIC_PUT_NUMS, topic, count)
        self.add_from_thread(StatsName.TOPIC_PUT_SIZE, topic, size)
        self.add_from_thread(StatsName.BROKER_PUT_NUMS, self.cluster_name, count, 0)

    def schedule_put_from_thread(self, topic: str, count: int, size: int) -> None:
        """A delayed message delivered to ``topic``: its put, and (as Java, with
        ``enableScheduleMessageStats``) a read of ``SCHEDULE_TOPIC_XXXX`` by ``SCHEDULE_CONSUMER``."""
        self.put_from_thread(topic, count, size)
        key = topic_group_key(SCHEDULE_TOPIC, SCHEDULE_CONSUMER_GROUP)
        self.add_from_thread(StatsName.GROUP_GET_NUMS, key, count)
        self.add_from_thread(StatsName.GROUP_GET_SIZE, key, size)

    def drain(self) -> None:
        """Fold what other threads recorded into the items (on the loop)."""
        if not self._pending:
            return
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        for (name, key), (value, times) in pending.items():
            self.add(name, key, value, times)

    def on_topic_deleted(self, topic: str) -> None:
        """Drop the items of ``topic``: its puts and every ``topic@group`` read or send-back."""
        self.drain()
        self._sets[StatsName.TOPIC_PUT_NUMS].pop(topic, None)
        self._sets[StatsName.TOPIC_PUT_SIZE].pop(topic, None)
        prefix = topic_group_key(topic, "")
        for name in (StatsName.GROUP_GET_NUMS, StatsName.GROUP_GET_SIZE, StatsName.SNDBCK_PUT_NUMS):
            items = self._sets[name]
            for key in [k for k in items if k.startswith(prefix)]:
                del items[key]

    def on_group_deleted(self, group: str) -> None:
        """Drop the ``topic@group`` items of ``group`` (reads and send-backs)."""
        self.drain()
        suffix = "@" + group
        for name in (StatsName.GROUP_GET_NUMS, StatsName.GROUP_GET_SIZE, StatsName.SNDBCK_PUT_NUMS):
            items = self._sets[name]
            for key in [k for k in items if k.endswith(suffix)]:
                del items[key]

    def item(self, name: str, key: str) -> StatsItem | None:
        items = self._sets.get(name)
        return None if items is None else items.get(key)

    def view(self, name: str, key: str) -> BrokerStatsData | None:
        """The windows of one item (VIEW_BROKER_STATS_DATA), None when it was never counted."""
        self.drain()
        item = self.item(name, key)
        return None if item is None else item.data()

    def tick(self, now_ms: int | None = None) -> int:
        """Sample the windows that are due; return when the next one is (ms)."""
        now = self._clock_ms() if now_ms is None else now_ms
        self.drain()
        if self._due is None:  # the first tick samples every window, as Java's initial delay 0
            self._due = dict.fromkeys(Window, now)
        for window, due in self._due.items():
            if now < due:
                continue
            period = self.periods.of(window)
            for items in self._sets.values():
                for item in items.values():
                    item.sample(window, now, period)
            self._due[window] = max(due + period, now + 1)
        return min(self._due.values())

    async def run(self) -> None:
        """Sample forever on the running loop (the broker cancels it at shutdown)."""
        while True:
            next_due = self.tick()
            await asyncio.sleep(max(next_due - self._clock_ms(), 1) / 1000)
