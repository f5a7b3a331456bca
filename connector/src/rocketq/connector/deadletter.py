"""Dead letters and decode counts of the source's poison-message policy (``onDecodeError``).

:class:`DeadLetterSink` (one per task, on the sink options
:meth:`SourceOptions.dead_letter_sink <rocketq.connector.options.SourceOptions.dead_letter_sink>`
builds) turns the messages that did not decode into sink rows — the raw body, tags, keys and
user properties, plus their origin (properties ``originTopic``,
``originBrokerName``, ``originQueueId``, ``originQueueOffset``, ``originMsgId``) and the error
(``decodeError``) — and sends them to ``deadLetterTopic`` with the at-least-once sink path
(:func:`rocketq.connector.writer.write_batches`, which returns once the broker confirmed every
request; a new topic is auto-created like any sink topic).  The origin is the deduplication key
of a dead letter that a re-executed task sent again.

:func:`write_stats` / :func:`decode_stats`: a task's decode counts in ``decodeStatsPath``, one file
per set of queue ranges (a re-executed task replaces its own file), added up per micro-batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from rocketq.client.remoting.properties import MessageConst
from rocketq.connector.options import ValueOptions
from rocketq.connector.planning import QueueRange
from rocketq.connector.sink_options import SinkOptions
from rocketq.connector.values import Decoded
from rocketq.connector.writer import AtLeastOnceStrategy, write_batches

log = logging.getLogger("rocketq.connector")

#: properties a dead letter carries about the message it replaces
ORIGIN_PROPERTIES = ("originTopic", "originBrokerName", "originQueueId", "originQueueOffset", "originMsgId")
#: the properties RocketMQ sets itself, which a dead letter does not copy from the original
SYSTEM_PROPERTIES = frozenset(v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str))


@dataclass
class DecodeCounts:
    """What one task decoded."""

    rows: int = 0
    failed: int = 0
    first_error: str | None = None
    per_queue: dict[str, int] = field(default_factory=dict)


def dead_letter_batch(batch: pa.RecordBatch, decoded: Decoded) -> pa.RecordBatch:
    """Sink rows (body, tags, keys, properties) of the failed rows of ``batch``."""
    rows = decoded.bad_rows()
    bad = batch.take(pa.array(rows))
    system = SYSTEM_PROPERTIES
    props = []
    for i, row in enumerate(rows.tolist()):
        original = {k: v for k, v in bad.column("properties")[i].as_py() if k not in system}
        origin = (
            bad.column("topic")[i].as_py(),
            bad.column("brokerName")[i].as_py(),
            str(bad.column("queueId")[i].as_py()),
            str(bad.column("queueOffset")[i].as_py()),
            bad.column("msgId")[i].as_py(),
        )
        original.update(zip(ORIGIN_PROPERTIES, origin, strict=True))
        original["decodeError"] = decoded.errors[row][:2000].replace("\x01", " ").replace("\x02", " ")
        props.append(list(original.items()))
    return pa.RecordBatch.from_arrays(
        [
            bad.column("body"),
            bad.column("tags"),
            bad.column("keys"),
            pa.array(props, pa.map_(pa.string(), pa.string())),
        ],
        names=["body", "tags", "keys", "properties"],
    )


class DeadLetterSink:
    """Sends a task's failed rows to ``deadLetterTopic`` with the at-least-once sink path."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def send(self, batch: pa.RecordBatch, decoded: Decoded) -> int:
        """Send the failed rows of ``batch``; returns when the broker confirmed them all."""
        sink = self.options
        sent = write_batches(sink, iter([dead_letter_batch(batch, decoded)]), AtLeastOnceStrategy(sink)).rows
        log.info("rocketmq source: %d dead letters confirmed by %s", sent, sink.topic)
        return sent


# -- counts per task -------------------------------------------------------------------------


def _range_digest(ranges: Iterable[QueueRange]) -> str:
    text = json.dumps(sorted((r.topic, r.broker_name, r.queue_id, r.start, r.end) for r in ranges))
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def write_stats(path: str, ranges: list[QueueRange], values: ValueOptions, counts: DecodeCounts) -> None:
    """``<path>/<digest of the ranges>.json``: the task's ranges and counts (replaced atomically)."""
    record = {
        "ranges": [[r.topic, r.broker_name, r.queue_id, r.start, r.end] for r in ranges],
        "rows": counts.rows,
        "failed": counts.failed,
        "policy": values.on_decode_error.value,
        "perQueue": counts.per_queue,
        "firstError": counts.first_error,
    }
    os.makedirs(path, exist_ok=True)
    target = Path(path) / f"{_range_digest(ranges)}.json"
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, target)


def _offsets(text: str | Mapping[str, Any] | None) -> dict[tuple[str, str], int] | None:
    if text is None:
        return None
    data = json.loads(text) if isinstance(text, str) else text
    return {(topic, key): int(o) for topic, queues in data.items() for key, o in queues.items()}


def decode_stats(
    path: str, start: str | Mapping[str, Any] | None = None, end: str | Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Decode counts of the tasks whose ranges lie within ``[start, end)`` (offset JSON as in
    ``StreamingQueryProgress.sources[0].startOffset``/``endOffset``; None: no bound).

    Returns ``{"rows": n, "failed": n, "perQueue": {...}, "firstErrors": [...], "tasks": n}``."""
    lo, hi = _offsets(start), _offsets(end)
    total: dict[str, Any] = {"rows": 0, "failed": 0, "perQueue": {}, "firstErrors": [], "tasks": 0}
    for file in sorted(Path(path).glob("*.json")):
        record = json.loads(file.read_text(encoding="utf-8"))
        inside = True
        for topic, broker, qid, begin, until in record["ranges"]:
            key = (topic, f"{broker}:{qid}")
            if (lo is not None and begin < lo.get(key, 0)) or (hi is not None and until > hi.get(key, -1)):
                inside = False
        if not inside:
            continue
        total["tasks"] += 1
        total["rows"] += record["rows"]
        total["failed"] += record["failed"]
        for queue, n in record["perQueue"].items():
            total["perQueue"][queue] = total["perQueue"].get(queue, 0) + n
        if record["firstError"]:
            total["firstErrors"].append(record["firstError"])
    return total
