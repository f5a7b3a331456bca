"""Where a read begins and ends: ``startingOffsets``, ``startingTimestamp``,
``startingOffsetsByTimestamp`` and ``endingOffsets``, parsed into :class:`StartSpec` and
:class:`EndSpec`.

Starting position precedence is Kafka's: ``startingTimestamp`` > ``startingOffsetsByTimestamp``
> ``startingOffsets``; they only matter when a query starts without a checkpoint.  Resolving them
against the brokers is :mod:`rocketq.connector.positions`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import OffsetMap, queue_text
from rocketq.connector.option_text import get_int, get_text


class StartMode(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    COMMITTED = "committed"
    OFFSETS = "offsets"  # explicit JSON
    TIMESTAMP = "timestamp"  # one timestamp for every queue
    TIMESTAMP_PER_QUEUE = "timestamp_per_queue"


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where a query without a checkpoint (or a batch read) begins."""

    mode: StartMode
    offsets: OffsetMap | None = None  # OFFSETS (may hold -2/-1) and TIMESTAMP_PER_QUEUE (ms)
    timestamp_ms: int | None = None  # TIMESTAMP


@dataclass(frozen=True, slots=True)
class EndSpec:
    """Where a batch read stops: ``latest`` or explicit offsets (``-1`` = latest)."""

    latest: bool = True
    offsets: OffsetMap | None = None


def _offsets_json(key: str, text: str, *, allow_sentinels: bool) -> OffsetMap:
    try:
        return OffsetMap.from_json(text, allow_sentinels=allow_sentinels)
    except ValueError as exc:
        raise OptionError(key, f'{exc}; expected JSON like {{"topic": {{"broker-a:0": 42}}}}') from None


def parse_starting(options: Mapping[str, str], *, batch: bool | None) -> StartSpec:
    ts_text = get_text(options, "startingTimestamp")
    if ts_text is not None:
        ts = get_int(options, "startingTimestamp", None)
        return StartSpec(StartMode.TIMESTAMP, timestamp_ms=ts)
    by_ts = get_text(options, "startingOffsetsByTimestamp")
    if by_ts is not None:
        return StartSpec(
            StartMode.TIMESTAMP_PER_QUEUE,
            offsets=_offsets_json("startingOffsetsByTimestamp", by_ts, allow_sentinels=False),
        )
    text = get_text(options, "startingOffsets")
    if text is None:
        return StartSpec(StartMode.LATEST if batch is False else StartMode.EARLIEST)
    if text.startswith("{"):
        return StartSpec(
            StartMode.OFFSETS, offsets=_offsets_json("startingOffsets", text, allow_sentinels=True)
        )
    try:
        mode = StartMode(text.lower())
    except ValueError:
        mode = StartMode.OFFSETS
    if mode in (StartMode.OFFSETS, StartMode.TIMESTAMP, StartMode.TIMESTAMP_PER_QUEUE):
        raise OptionError(
            "startingOffsets", f"expected earliest, latest, committed or a JSON object, got {text!r}"
        )
    if batch and mode is StartMode.LATEST:
        raise OptionError(
            "startingOffsets", "'latest' is not allowed for batch reads (nothing would be read)"
        )
    return StartSpec(mode)


def parse_ending(options: Mapping[str, str], *, batch: bool | None) -> EndSpec:
    text = get_text(options, "endingOffsets")
    if text is None:
        return EndSpec()
    if batch is False:
        raise OptionError("endingOffsets", "only applies to batch reads (spark.read), not to streaming")
    if text.lower() == "latest":
        return EndSpec()
    if not text.startswith("{"):
        raise OptionError("endingOffsets", f"expected 'latest' or a JSON object, got {text!r}")
    offsets = _offsets_json("endingOffsets", text, allow_sentinels=True)
    bad = [queue_text(q) for q, o in offsets.items() if o == -2]
    if bad:
        raise OptionError(
            "endingOffsets", f"-2 (earliest) is not allowed as an ending offset ({', '.join(bad)})"
        )
    return EndSpec(latest=False, offsets=offsets)
