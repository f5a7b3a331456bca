"""Where a read begins and ends: ``startingOffsets``, ``startingTimestamp``,
``startingOffsetsByTimestamp`` (with ``startingOffsetsByTimestampStrategy``) and ``endingOffsets``,
``endingTimestamp``, ``endingOffsetsByTimestamp``, parsed into :class:`StartSpec` and
:class:`EndSpec`.

Precedence is Kafka's: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` >
``startingOffsets``, and ``endingTimestamp`` > ``endingOffsetsByTimestamp`` > ``endingOffsets``.
Starting positions only matter when a query starts without a checkpoint; ending positions are for
batch reads only.  Resolving them against the brokers is :mod:`rocketq.connector.positions`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import OffsetMap, queue_text
from rocketq.connector.option_text import get_int, get_text


class TimestampStrategy(enum.Enum):
    """``startingOffsetsByTimestampStrategy``: a queue with no message stored at or after the
    starting timestamp fails the query (``error``, Kafka's default) or starts at its end (``latest``)."""

    ERROR = "error"
    LATEST = "latest"


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
    #: TIMESTAMP and TIMESTAMP_PER_QUEUE: a queue with no message at or after the time
    strategy: TimestampStrategy = TimestampStrategy.ERROR


@dataclass(frozen=True, slots=True)
class EndSpec:
    """Where a batch read stops: ``latest``, explicit offsets (``-1`` = latest), or the first
    message stored at or after a time (one for every queue, or per queue), exclusive; a queue
    with no such message is read to its end."""

    latest: bool = True
    offsets: OffsetMap | None = None
    timestamp_ms: int | None = None  # endingTimestamp
    timestamps: OffsetMap | None = None  # endingOffsetsByTimestamp (ms)

    @property
    def option(self) -> str:
        """The option this end came from (for errors)."""
        if self.timestamp_ms is not None:
            return "endingTimestamp"
        return "endingOffsetsByTimestamp" if self.timestamps is not None else "endingOffsets"


def _offsets_json(key: str, text: str, *, allow_sentinels: bool) -> OffsetMap:
    try:
        return OffsetMap.from_json(text, allow_sentinels=allow_sentinels)
    except ValueError as exc:
        raise OptionError(key, f'{exc}; expected JSON like {{"topic": {{"broker-a:0": 42}}}}') from None


def _strategy(options: Mapping[str, str]) -> TimestampStrategy:
    key = "startingOffsetsByTimestampStrategy"
    text = get_text(options, key) or TimestampStrategy.ERROR.value
    try:
        return TimestampStrategy(text.lower())
    except ValueError:
        raise OptionError(key, f"expected 'error' or 'latest', got {text!r}") from None


def parse_starting(options: Mapping[str, str], *, batch: bool | None) -> StartSpec:
    strategy = _strategy(options)
    ts_text = get_text(options, "startingTimestamp")
    if ts_text is not None:
        ts = get_int(options, "startingTimestamp", None)
        return StartSpec(StartMode.TIMESTAMP, timestamp_ms=ts, strategy=strategy)
    by_ts = get_text(options, "startingOffsetsByTimestamp")
    if by_ts is not None:
        return StartSpec(
            StartMode.TIMESTAMP_PER_QUEUE,
            offsets=_offsets_json("startingOffsetsByTimestamp", by_ts, allow_sentinels=False),
            strategy=strategy,
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


def _batch_only(key: str) -> OptionError:
    return OptionError(key, "only applies to batch reads (spark.read), not to streaming: a stream has no end")


def parse_ending(options: Mapping[str, str], *, batch: bool | None) -> EndSpec:
    for key in ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"):
        if batch is False and get_text(options, key) is not None:
            raise _batch_only(key)
    if get_text(options, "endingTimestamp") is not None:
        return EndSpec(latest=False, timestamp_ms=get_int(options, "endingTimestamp", None))
    by_ts = get_text(options, "endingOffsetsByTimestamp")
    if by_ts is not None:
        timestamps = _offsets_json("endingOffsetsByTimestamp", by_ts, allow_sentinels=False)
        return EndSpec(latest=False, timestamps=timestamps)
    text = get_text(options, "endingOffsets")
    if text is None:
        return EndSpec()
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
