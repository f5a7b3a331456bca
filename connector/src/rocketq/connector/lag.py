"""How far a streaming query is behind: Kafka's ``*OffsetsBehindLatest`` computed from its progress.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` as custom source metrics.  A Python data source cannot report custom
metrics (Spark gives it no ``ReportsSourceMetrics``), but the rocketmq source reports the brokers'
max offsets through ``reportLatestOffset()``, which Spark puts in every progress as
``sources[i].latestOffset``.  :func:`lag` reads a progress (or a query's ``lastProgress``) and
computes, per rocketmq source, the same three figures and the offsets behind of every queue:
``latestOffset - endOffset`` per queue present in both, where both are the source's offset JSON
``{"topic": {"brokerName:queueId": nextOffset}}``.

``latestOffset`` is taken when the micro-batch is planned and ``endOffset`` is where that batch
ends, so the figures are what was left behind the batch when it started: zero means the batch
read everything there was.  Sources whose offsets are not the rocketmq JSON (other connectors in
the same query) are skipped.  Nothing here imports pyspark: a progress is a dict (PySpark's
``StreamingQueryProgress`` and ``SourceProgress`` are dict subclasses) or its JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.connector.offsets import OffsetMap, queue_text

__all__ = ["SourceLag", "lag", "source_lag"]


@dataclass(frozen=True, slots=True)
class SourceLag:
    """The offsets behind latest of one rocketmq source of a query progress."""

    #: the source's index in ``progress.sources``
    index: int
    #: ``"topic/brokerName:queueId"`` -> messages between the batch's end and the queue's max offset
    per_queue: dict[str, int]

    @property
    def min_offsets_behind_latest(self) -> int:
        return min(self.per_queue.values(), default=0)

    @property
    def max_offsets_behind_latest(self) -> int:
        return max(self.per_queue.values(), default=0)

    @property
    def avg_offsets_behind_latest(self) -> float:
        return sum(self.per_queue.values()) / len(self.per_queue) if self.per_queue else 0.0

    @property
    def total_offsets_behind_latest(self) -> int:
        return sum(self.per_queue.values())

    def metrics(self) -> dict[str, float | int]:
        """The figures under the names of Spark's Kafka source metrics."""
        return {
            "minOffsetsBehindLatest": self.min_offsets_behind_latest,
            "maxOffsetsBehindLatest": self.max_offsets_behind_latest,
            "avgOffsetsBehindLatest": self.avg_offsets_behind_latest,
        }


def _offsets(value: Any) -> OffsetMap | None:
    """A rocketmq source offset from a progress field (JSON text or its dict); None otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    try:
        return OffsetMap.from_json_dict(value)
    except ValueError:
        return None


def source_lag(index: int, source: Mapping[str, Any]) -> SourceLag | None:
    """The lag of one ``progress.sources[index]``; None unless it is a rocketmq source with both
    an ``endOffset`` and a ``latestOffset``."""
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    if end is None or latest is None:
        return None
    behind = {queue_text(q): max(0, newest - end[q]) for q, newest in latest.items() if q in end}
    return SourceLag(index, behind)


def _progress(of: Any) -> Mapping[str, Any] | None:
    if isinstance(of, str):
        loaded = json.loads(of)
        return loaded if isinstance(loaded, dict) else None
    if isinstance(of, Mapping):
        return of
    last = getattr(of, "lastProgress", None)  # a StreamingQuery
    return _progress(last) if last is not None else None


def lag(query_or_progress: Any) -> list[SourceLag]:
    """Offsets behind latest of every rocketmq source of a query.

    ``query_or_progress``: a ``StreamingQuery`` (its ``lastProgress`` is used), a
    ``StreamingQueryProgress`` (e.g. ``event.progress`` in a ``StreamingQueryListener``), a
    progress dict or its JSON text.  An empty list before the first progress.
    """
    progress = _progress(query_or_progress)
    if progress is None:
        return []
    sources = progress.get("sources") or []
    found = (source_lag(i, s) for i, s in enumerate(sources) if isinstance(s, Mapping))
    return [s for s in found if s is not None]
