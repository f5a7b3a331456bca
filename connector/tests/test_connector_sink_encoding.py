"""Sink unit tests without Spark or broker: column checks, routing, bulk batch encoding."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.model import Message
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.remoting.batch import decode_batch
from rocketq.client.remoting.route import MessageQueue
from rocketq.connector.encoding import BulkUniqKeys, chunk_bounds, encode_rows, entry_sizes, properties_column
from rocketq.connector.errors import OptionError, SinkError
from rocketq.connector.options import parse_sink_options
from rocketq.connector.writer import (
    TargetQueue,
    TaskState,
    batch_requests,
    first_keys,
    hash_indices,
    route_rows,
)

OPTS = parse_sink_options({"nameserver": "127.0.0.1:9876", "topic": "out"})
QUEUES = [TargetQueue("out", "broker-a", i) for i in range(8)]


def test_schema_validation() -> None:
    from pyspark.sql.types import IntegerType, LongType, MapType, StringType, StructField, StructType

    from rocketq.connector.sink import validate_sink_schema

    ok = StructType(
        [
            StructField("body", StringType()),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("queueId", LongType()),
        ]
    )
    validate_sink_schema(ok, OPTS)
    with pytest.raises(OptionError, match="unknown column"):
        validate_sink_schema(
            StructType([StructField("body", StringType()), StructField("value", StringType())]), OPTS
        )
    with pytest.raises(OptionError, match="'body' column"):
        validate_sink_schema(StructType([StructField("tags", StringType())]), OPTS)
    with pytest.raises(OptionError, match="tags"):
        validate_sink_schema(
            StructType([StructField("body", StringType()), StructField("tags", IntegerType())]), OPTS
        )
    no_topic = parse_sink_options({"nameserver": "h:1"})
    with pytest.raises(OptionError, match="'topic'"):
        validate_sink_schema(StructType([StructField("body", StringType())]), no_topic)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30), st.integers(1, 16))
def test_hash_routing_matches_client_selector(keys: list[str], n: int) -> None:
    mqs = [MessageQueue("out", "broker-a", i) for i in range(n)]
    selector = SelectMessageQueueByHash()
    got = hash_indices(pa.array(keys, pa.string()), n)
    want = [selector(mqs, Message("out", b"x"), k).queue_id for k in keys]
    assert got.tolist() == want


def test_first_keys_string_and_array() -> None:
    assert first_keys(pa.array(["a b", None, "", " c d"])).to_pylist() == ["a", None, None, "c"]
    arr = pa.array([["x", "y"], [], None, ["z"]], pa.list_(pa.string()))
    assert first_keys(arr).to_pylist() == ["x", None, None, "z"]


def test_route_rows_precedence() -> None:
    batch = pa.RecordBatch.from_pydict({
        "body": ["a", "b", "c", "d", "e"],
        "keys": ["k1", "k1", None, "k2", None],
        "shardingKey": [None, None, None, "s", None],
        "queueId": [None, None, 5, None, None],
    })  # fmt: skip
    state = TaskState()
    target = route_rows(batch, QUEUES, state)
    assert target[0] == target[1] == hash_indices(pa.array(["k1"]), 8)[0]
    assert target[2] == 5
    assert target[3] == hash_indices(pa.array(["s"]), 8)[0]
    assert 0 <= target[4] < 8
    bad = pa.RecordBatch.from_pydict({"body": ["a"], "queueId": [8]})
    with pytest.raises(SinkError, match="queueId 8"):
        route_rows(bad, QUEUES, state)


def test_encode_rows_decodes_with_the_client_codec() -> None:
    n = 50
    bodies = pa.array([f"body {i}".encode() * (i % 4 + 1) for i in range(n)], pa.binary())
    uniq = BulkUniqKeys().take(n)
    props = properties_column(
        n,
        uniq_keys=uniq,
        tags=pa.array([None if i % 3 == 0 else f"T{i % 2}" for i in range(n)]),
        keys_text=pa.array([f"k{i} j{i}" if i % 5 else None for i in range(n)]),
        sharding_key=None,
        user=pa.array(
            [[("a", str(i)), ("b", None)] if i % 2 else None for i in range(n)],
            pa.map_(pa.string(), pa.string()),
        ),
    )
    data = encode_rows(bodies, props)
    decoded = decode_batch(data)
    assert len(decoded) == n
    assert sum(entry_sizes(bodies, props)) == len(data)
    for i, m in enumerate(decoded):
        assert m.body == bodies[i].as_py()
        assert m.properties["UNIQ_KEY"] == uniq[i].as_py()
        assert m.properties["WAIT"] == "true"
        assert m.properties.get("TAGS") == (None if i % 3 == 0 else f"T{i % 2}")
        assert m.properties.get("KEYS") == (f"k{i} j{i}" if i % 5 else None)
        assert m.properties.get("a") == (str(i) if i % 2 else None)
        assert "b" not in m.properties


def test_uniq_keys_are_unique_and_well_formed() -> None:
    gen = BulkUniqKeys()
    ids = gen.take(70_000).to_pylist() + gen.take(10).to_pylist()
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and i == i.upper() for i in ids[:100])


def test_chunk_bounds_respect_limits() -> None:
    sizes = np.array([100] * 25, dtype=np.int64)
    bounds = chunk_bounds(sizes, max_bytes=1000, max_messages=7)
    assert bounds[0] == (0, 7) and bounds[-1][1] == 25
    assert all(j - i <= 7 and sizes[i:j].sum() <= 1000 for i, j in bounds)
    with pytest.raises(SinkError, match="batchMaxBytes"):
        chunk_bounds(np.array([5000]), max_bytes=1000, max_messages=10)


def test_requests_keep_row_order_per_queue() -> None:
    n = 200
    batch = pa.RecordBatch.from_pydict(
        {"body": [f"{i}" for i in range(n)], "keys": [f"key{i % 7}" for i in range(n)]}
    )
    target = route_rows(batch, QUEUES, TaskState())
    opts = parse_sink_options({"nameserver": "h:1", "topic": "out", "batchmaxmessages": "9"})
    seen: dict[int, list[int]] = {}
    for req in batch_requests(batch, QUEUES, target, opts, BulkUniqKeys()):
        assert req.count <= 9
        seen.setdefault(req.queue.queue_id, []).extend(int(m.body) for m in decode_batch(req.body))
    for qid, rows in seen.items():
        assert rows == sorted(rows)
        assert {f"key{r % 7}" for r in rows} <= {f"key{k}" for k in range(7) if target[k] == qid}
    assert sorted(r for rows in seen.values() for r in rows) == list(range(n))


def test_separator_in_tags_rejected() -> None:
    with pytest.raises(SinkError, match="tags"):
        properties_column(
            1,
            uniq_keys=pa.array(["u"]),
            tags=pa.array(["a\x01b"]),
            keys_text=None,
            sharding_key=None,
            user=None,
        )
