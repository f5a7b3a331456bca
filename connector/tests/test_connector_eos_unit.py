"""Exactly-once sink: options, commit records and the check-back decision (no broker, no Spark)."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.model import LocalTransactionState
from rocketq.connector.commit_log import (
    MAX_RECORD_BYTES,
    CommitIndex,
    CommitRecord,
    HalfBatch,
    TxnTag,
    commit_topic,
    decide,
    producer_group,
)
from rocketq.connector.errors import OptionError, SinkError
from rocketq.connector.options import TOPIC_RE, DeliveryGuarantee, parse_sink_options, require_sink_id

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
NS = {"nameServer": "127.0.0.1:9876", "topic": "out"}


def handle(write_id: str, req: int, count: int = 3, queue_id: int = 0) -> HalfBatch:
    return HalfBatch(
        "out", "127.0.0.1:10911", "broker-a", queue_id, 10 * req, count, 1000 * req,
        tuple(f"M{req}{i}" for i in range(count)), tuple(f"T{req}{i}" for i in range(count)), write_id, req,
    )  # fmt: skip


# -- options ---------------------------------------------------------------------------------------


def test_at_least_once_stays_the_default() -> None:
    opts = parse_sink_options(NS)
    assert opts.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE and not opts.exactly_once
    assert opts.sink_id is None


@pytest.mark.parametrize("text", ["exactlyOnce", "exactly-once", "EXACTLY_ONCE", "exactlyonce"])
def test_exactly_once_spellings(text: str) -> None:
    opts = parse_sink_options({**NS, "deliveryGuarantee": text, "transactionalId": "etl-1"})
    assert opts.exactly_once and opts.sink_id == "etl-1"


def test_unknown_guarantee_is_refused() -> None:
    with pytest.raises(OptionError, match="deliveryGuarantee"):
        parse_sink_options({**NS, "deliveryGuarantee": "atMostOnce"})


def test_sink_id_from_checkpoint_location_is_stable_and_absolute(tmp_path: object) -> None:
    cp = f"{tmp_path}/cp"
    a = parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce", "checkpointLocation": cp})
    b = parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce", "checkpointlocation": cp + "/"})
    assert a.sink_id == b.sink_id and a.sink_id is not None and a.sink_id.startswith("cp")
    rel = parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce", "checkpointLocation": "rel/cp"})
    absolute = parse_sink_options(
        {**NS, "deliveryGuarantee": "exactlyOnce", "checkpointLocation": os.path.abspath("rel/cp")}
    )
    assert rel.sink_id == absolute.sink_id
    uri = parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce", "checkpointLocation": "hdfs://nn/cp"})
    assert uri.sink_id != a.sink_id
    assert TOPIC_RE.match(commit_topic(a.sink_id)) and len(commit_topic(a.sink_id)) <= 127


def test_transactional_id_wins_and_is_validated() -> None:
    opts = parse_sink_options(
        {**NS, "deliveryGuarantee": "exactlyOnce", "transactionalId": "a_b-1", "checkpointLocation": "/x"}
    )
    assert opts.sink_id == "a_b-1" and producer_group("a_b-1") == "rq-eos-a_b-1"
    with pytest.raises(OptionError, match="transactionalId"):
        parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce", "transactionalId": "bad id!"})


def test_exactly_once_without_identity_names_the_options() -> None:
    opts = parse_sink_options({**NS, "deliveryGuarantee": "exactlyOnce"})
    with pytest.raises(OptionError, match="checkpointLocation") as info:
        require_sink_id(opts)
    assert "transactionalId" in str(info.value)


# -- records ------------------------------------------------------------------------------------


def test_record_round_trip_and_pickle() -> None:
    handles = [handle("w1", 0), handle("w1", 2, queue_id=1), handle("w2", 0)]
    record = CommitRecord.of("s", "7", handles)
    assert record.writes == {"w1": (0, 2), "w2": (0,)}
    back = CommitRecord.from_body(record.to_body())
    assert back == record
    assert pickle.loads(pickle.dumps(handles[1])) == handles[1]
    apache = HalfBatch("out", "a:1", "b", 0, 5, 2, 9, ("x", "y"), ("t", "u"), "w", 1, False, (5, 8), 10)
    assert HalfBatch.from_obj(apache.to_obj()) == apache


@given(st.lists(st.tuples(st.sampled_from(["wa", "wb", "wc"]), st.integers(0, 50)), max_size=30))
def test_record_lists_exactly_its_handles(idents: list[tuple[str, int]]) -> None:
    record = CommitRecord.of("s", "1", [handle(w, r) for w, r in idents])
    for w in ("wa", "wb", "wc", "wz"):
        for r in range(52):
            assert record.lists(w, r) == ((w, r) in idents)


def test_oversized_record_is_refused() -> None:
    big = [
        HalfBatch("out", "a", "b", 0, 0, 1, 0, (os.urandom(64).hex(),) * 1, (os.urandom(64).hex(),), "w", i)
        for i in range(MAX_RECORD_BYTES // 60)
    ]
    with pytest.raises(SinkError, match="maxMessagesPerTrigger"):
        CommitRecord.of("s", "1", big).to_body()


# -- check-back decision ----------------------------------------------------------------------------


def index_of(*records: CommitRecord) -> CommitIndex:
    index = CommitIndex()
    for r in records:
        index.add(r)
    return index


def test_decide_listed_unlisted_orphan_unknown() -> None:
    index = index_of(CommitRecord.of("s", "3", [handle("w1", 0), handle("w1", 1)]))
    assert decide(index, "3", "w1", 1) is COMMIT
    assert decide(index, "3", "w1", 2) is ROLLBACK  # an unconfirmed retry of the accepted attempt
    assert decide(index, "3", "w9", 0) is ROLLBACK  # a failed / speculative / replayed attempt
    assert decide(index, "2", "w0", 0) is ROLLBACK  # orphan: a later batch committed, this one never
    assert decide(index, "4", "w5", 0) is UNKNOW  # may still commit
    assert decide(index, "job-abc", "w5", 0) is UNKNOW  # batch-write job without a record


def test_first_record_of_a_batch_wins() -> None:
    first = CommitRecord.of("s", "5", [handle("w1", 0)])
    second = CommitRecord.of("s", "5", [handle("w2", 0)])
    index = index_of(first, second)
    assert decide(index, "5", "w1", 0) is COMMIT and decide(index, "5", "w2", 0) is ROLLBACK
    assert index.max_batch == 5


# -- the half messages' identity property ----------------------------------------------------------


@given(
    st.text(alphabet="abcXYZ_-:09", min_size=1, max_size=20),
    st.sampled_from(["0", "17", "job-0123456789abcdef"]),
    st.integers(0, 10**10 - 1),
    st.integers(0, 500),
    st.integers(0, 9),
)
def test_txn_tag_round_trip(sink: str, batch: str, req: int, part: int, attempt: int) -> None:
    tag = TxnTag(sink, batch, "0123456789abcdef", part, attempt, req)
    text = tag.text()
    assert text.startswith(f"{req:010d}:") and TxnTag.parse(text) == tag


@pytest.mark.parametrize("text", [None, "", "12:0:0:w:b", "x:0:0:w:b:s", "1:0:0::b:s", "1:0:0:w:b:"])
def test_txn_tag_parse_refuses_other_values(text: str | None) -> None:
    assert TxnTag.parse(text) is None


def test_rows_are_encoded_with_the_identity_and_renumbered_per_send() -> None:
    import pyarrow as pa

    from rocketq.client.remoting.batch import decode_batch
    from rocketq.connector.encoding import BulkUniqKeys
    from rocketq.connector.transactional import WriteIdentity, renumber, row_suffix
    from rocketq.connector.writer import TargetQueue, TaskState, batch_requests, route_rows

    ident = WriteIdentity("sinkA", "7", "00ff00ff00ff00ff", 3, 1)
    suffix, tail = row_suffix(ident, producer_group("sinkA"))
    queues = [TargetQueue("out", "broker-a", i) for i in range(3)]
    n = 50
    batch = pa.RecordBatch.from_pydict(
        {
            "body": [f"r{i}" for i in range(n)],
            "keys": [f"key{i % 5}" for i in range(n)],
            "properties": [[("user", f"v{i}")] for i in range(n)],
        },
        schema=pa.schema(
            [("body", pa.string()), ("keys", pa.string()), ("properties", pa.map_(pa.string(), pa.string()))]
        ),
    )
    target = route_rows(batch, queues, TaskState())
    opts = parse_sink_options({**NS, "batchMaxMessages": "7"})
    seen = 0
    for number, request in enumerate(
        batch_requests(batch, queues, target, opts, BulkUniqKeys(), suffix), start=41
    ):
        assert request.entry_ends is not None and request.uniq_keys is not None
        assert int(request.entry_ends[-1]) == len(request.body) and len(request.uniq_keys) == request.count
        msgs = decode_batch(renumber(request, number, tail))
        assert [m.properties["UNIQ_KEY"] for m in msgs] == request.uniq_keys
        for m in msgs:
            assert TxnTag.parse(m.properties["__RQ_TXN"]) == TxnTag(
                "sinkA", "7", "00ff00ff00ff00ff", 3, 1, number
            )
            assert m.properties["user"].startswith("v") and m.properties["KEYS"].startswith("key")
            assert (
                list(m.properties)[-2:] == ["TRAN_MSG", "PGROUP"] and m.properties["PGROUP"] == "rq-eos-sinkA"
            )
        assert (
            decode_batch(request.body)[0].properties["__RQ_TXN"].startswith("0000000000:")
        )  # the body is not changed
        seen += request.count
    assert seen == n
