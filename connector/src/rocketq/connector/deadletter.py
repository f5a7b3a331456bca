"""Dead letters and decode counts of the source's poison-message policy (``onDecodeError``).

:func:`send_dead_letters` turns the messages that did not decode into sink rows — the raw body,
tags, keys and user properties, plus their origin (properties ``originTopic``,
``originBrokerName``, ``originQueueId``, ``originQueueOffset``, ``originMsgId``) and the error
(``decodeError``) — and sends them to ``deadLetterTopic`` with the at-least-once sink path
(:func:`rocketq.connector.writer.write_batches`, which returns once the broker confirmed every
request; a new topic is auto-created like any sink topic).  The origin is the deduplication key
of a dead letter that a re-executed task sent again.

:func:`write_stats` / :func:`decode_stats`: a task's decode counts in ``decodeStatsPath``, one file
per set of queue ranges (a re-executed task replaces its own file), added up per micro-batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rocketq.connector.values import Decoded

if TYPE_CHECKING:
    from rocketq.connector.options import SourceOptions
    from rocketq.connector.planning import QueueRange
    from rocketq.connector.poison import DecodeCounts, ValueOptions

log = logging.getLogger("rocketq.connector")

DEAD_LETTER_PRODUCER_GROUP = "spark-rocketmq-dead-letter"
#: properties a dead letter carries about the message it replaces
ORIGIN_PROPERTIES = ("originTopic", "originBrokerName", "originQueueId", "originQueueOffset", "originMsgId")


def _system_properties() -> frozenset[str]:
    from rocketq.client.remoting.properties import MessageConst

    return frozenset(v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str))


def dead_letter_batch(batch: pa.RecordBatch, decoded: Decoded) -> pa.RecordBatch:
    """Sink rows (body, tags, keys, properties) of the failed rows of ``batch``."""
    rows = decoded.bad_rows()
    bad = batch.take(pa.array(rows))
    system = _system_properties()
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


def send_dead_letters(opts: SourceOptions, batch: pa.RecordBatch, decoded: Decoded) -> int:
    """Send the failed rows to ``deadLetterTopic``; returns when the broker confirmed them all."""
    from rocketq.connector.options import parse_sink_options
    from rocketq.connector.writer import AtLeastOnceStrategy, write_batches

    topic = opts.values.dead_letter_topic
    assert topic is not None
    sink = parse_sink_options(
        {"nameServer": opts.name_server, "topic": topic, "producerGroup": DEAD_LETTER_PRODUCER_GROUP}
    )
    sink = dataclasses.replace(sink, client=opts.client)
    sent = write_batches(sink, iter([dead_letter_batch(batch, decoded)]), AtLeastOnceStrategy(sink)).rows
    log.info("rocketmq source: %d dead letters confirmed by %s", sent, topic)
    if os.environ.get("ROCKETQ_TEST_AFTER_DEAD_LETTER"):
        _test_hook(os.environ["ROCKETQ_TEST_AFTER_DEAD_LETTER"], sent)
    return sent


def _test_hook(marker: str, sent: int) -> None:
    """Tests: note that dead letters were confirmed (a file), then wait to be killed if asked."""
    import time

    with open(marker, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()} {sent}\n")
    pause = float(os.environ.get("ROCKETQ_TEST_PAUSE_AFTER_DEAD_LETTER_S", "0"))
    if pause and not os.path.exists(marker + ".resumed"):
        time.sleep(pause)


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
