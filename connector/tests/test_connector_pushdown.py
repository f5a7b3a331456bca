"""Filter pushdown of batch reads: translation of Spark's filters, the executor's exact re-check,
offset narrowing, the reader's pickled state, and the options around it (no broker, no Spark)."""

from __future__ import annotations

import datetime
import pickle
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.errors import OptionError
from rocketq.connector.options import parse_source_options
from rocketq.connector.planning import QueueRange, plan_partitions
from rocketq.connector.positions import narrow_ranges
from rocketq.connector.pushdown import PushedScan, filter_batch, holds, translate
from rocketq.connector.source import RocketMQPushdownReader

UTC = datetime.UTC


def ts(us: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(microseconds=us)


def push(
    *filters: Filter, tags: frozenset[str] | None = None, sql: bool = False
) -> tuple[PushedScan, list[Filter]]:
    return translate(list(filters), option_tags=tags, sql_filter=sql)


def test_tag_equality_and_in_become_the_broker_tag_filter() -> None:
    eq, inn = EqualTo(("tags",), "a"), In(("tags",), ("a", "b", None))
    scan, rest = push(eq, inn, IsNotNull(("tags",)))
    assert scan.tags == frozenset({"a"}) and rest == [] and len(scan.accepted) == 3
    scan, _ = push(In(("tags",), ("a", "b")), tags=frozenset({"b", "c"}))  # subExpression b || c
    assert scan.tags == frozenset({"b"})
    scan, _ = push(EqualTo(("tags",), "a"), EqualTo(("tags",), "b"))
    assert scan.empty, "tags = 'a' AND tags = 'b' matches nothing"


@pytest.mark.parametrize("value", ["*", "a || b", " a", ""])
def test_tags_a_tag_expression_cannot_say_stay_with_spark(value: str) -> None:
    f = EqualTo(("tags",), value)
    scan, rest = push(f)
    assert rest == [f] and scan.tags is None and scan.accepted == ()


def test_with_sql_filter_tags_join_the_sql92_expression_and_other_filters_do_not_push() -> None:
    tag, other = EqualTo(("tags",), "a"), EqualTo(("body",), b"x")
    scan, rest = push(tag, other, Not(EqualTo(("tags",), "b")), sql=True)
    assert scan.tags is None and scan.sql == "(TAGS IN ('a'))" and scan.accepted == (tag,) and len(rest) == 2
    nested = EqualTo(("properties", "k"), "v")
    assert push(nested)[1] == [nested], "map/nested columns are never pushed"


def props(*filters: Filter, tags: frozenset[str] | None = None) -> tuple[PushedScan, list[Filter]]:
    return translate(
        list(filters),
        option_tags=tags,
        sql_filter=False,
        property_columns={
            "region": "string",
            "Kind": "string",
            "and": "string",
            "amount": "bigint",
            "price": "double",
        },
    )


def test_property_column_filters_become_sql92() -> None:
    scan, rest = props(
        EqualTo(("region",), "eu"), In(("kind",), ("a", "it's")), Not(IsNull(("Kind",))),
        EqualNullSafe(("region",), None), Not(EqualTo(("region",), "us")),
    )  # fmt: skip
    assert rest == [] and len(scan.accepted) == 5 and scan.tags is None
    assert scan.sql == (
        "(region = 'eu') AND (Kind IN ('a', 'it''s')) AND (NOT (Kind IS NULL)) AND (region IS NULL) "
        "AND (NOT (region = 'us'))"
    )
    assert "SQL92 (region = 'eu')" in scan.describe()


def test_numeric_property_columns_push_comparisons() -> None:
    scan, rest = props(
        GreaterThan(("amount",), 100), LessThanOrEqual(("amount",), -5), In(("amount",), (1, 2)),
        GreaterThanOrEqual(("price",), 2.5), EqualTo(("price",), 1e20), Not(LessThan(("price",), 0.0)),
    )  # fmt: skip
    assert rest == []
    assert scan.sql == (
        "(amount > 100) AND (amount <= -5) AND (amount = 1 OR amount = 2) AND (price >= 2.5) "
        "AND (price = 1e+20) AND (NOT (price < 0.0))"
    )
    stay = [GreaterThan(("price",), float("nan")), EqualTo(("amount",), True), EqualTo(("amount",), "7")]
    scan, rest = props(*stay)
    assert rest == stay and scan.sql is None


def test_property_filters_sql92_cannot_say_stay_with_spark() -> None:
    stay = [
        GreaterThan(("region",), "m"),  # SQL92 compares only numbers with >
        StringStartsWith(("region",), "e"),  # 4.x brokers have no STARTSWITH
        In(("region",), ("a", None)),
        EqualTo(("and",), "x"),  # a keyword is not a property name in SQL92
        EqualTo(("other",), "x"),  # not a property column
    ]
    scan, rest = props(*stay)
    assert rest == stay and scan.sql is None and scan.accepted == ()


def test_tags_join_the_sql92_of_property_filters() -> None:
    scan, rest = props(EqualTo(("region",), "eu"), In(("tags",), ("a", "b")), tags=frozenset({"b", "c"}))
    assert rest == [] and scan.tags is None and scan.sql == "(region = 'eu') AND (TAGS IN ('b'))"
    scan, _ = props(EqualTo(("region",), "eu"), tags=frozenset({"b", "c"}))  # subExpression only
    assert scan.sql == "(region = 'eu') AND (TAGS IN ('b', 'c'))"
    scan, _ = props(EqualTo(("region",), "eu"), EqualTo(("tags",), "x"), tags=frozenset({"b"}))
    assert scan.empty


def test_filter_batch_rechecks_property_columns() -> None:
    batch = pa.RecordBatch.from_pydict({"region": ["eu", None, "us", "eu"], "Kind": ["a", "a", "b", None]})
    scan, _ = props(EqualTo(("region",), "eu"), Not(IsNull(("kind",))))
    assert filter_batch(batch, scan.accepted).to_pydict() == {"region": ["eu"], "Kind": ["a"]}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("region,region", "listed twice"),
        ("Region, region", "listed twice"),
        ("tags", "would hide the column 'tags'"),
        ("VALUE", "would hide the column 'value'"),
        ("a-b", "not a property name"),
        ("1st", "not a property name"),
        ("a,,b", "not a property name"),
        ("a:decimal", "the type must be one of string, int, bigint, double"),
    ],
)
def test_property_columns_option_errors(text: str, error: str) -> None:
    with pytest.raises(OptionError, match=error):
        parse_source_options({"nameServer": "n:1", "topic": "t", "propertyColumns": text})


def test_property_columns_option() -> None:
    options = {"nameServer": "n:1", "topic": "t", "propertyColumns": " region , $x_1: LONG,p:double,q:int"}
    opts = parse_source_options(options)
    assert opts.values.property_map() == {"region": "string", "$x_1": "bigint", "p": "double", "q": "int"}
    assert opts.values.extra_names() == ("region", "$x_1", "p", "q")
    assert [f.type for f in opts.values.extra_fields()] == [pa.string(), pa.int64(), pa.float64(), pa.int32()]


def test_typed_property_columns_follow_java_number_rules() -> None:
    from rocketq.connector.poison import typed_property

    text = pa.array(["12", "+3", "-0", " 4", "1.5", "0x10", "99999999999999999999", "3000000000", None, ""])
    assert typed_property(text, "bigint").to_pylist() == [
        12,
        3,
        0,
        None,
        None,
        None,
        None,
        3000000000,
        None,
        None,
    ]
    assert typed_property(text, "int").to_pylist() == [12, 3, 0, None, None, None, None, None, None, None]
    doubles = pa.array(["1.5", ".5", "5.", "1e3", "-2E-2", "inf", "NaN", "1.5f", " 1", "1e400"])
    assert typed_property(doubles, "double").to_pylist() == [
        1.5, 0.5, 5.0, 1000.0, -0.02, None, None, None, None, float("inf")
    ]  # fmt: skip


def test_queue_filters_prune_queues_with_three_valued_logic() -> None:
    scan, rest = push(
        In(("queueId",), (0, 2, 3)),
        Not(EqualTo(("brokerName",), "broker-b")),
        GreaterThan(("queueId",), 0),
        StringStartsWith(("topic",), "Or"),
    )
    assert rest == []
    kept = [
        q
        for q in (
            MessageQueue(t, b, i)
            for t in ("Orders", "Logs")
            for b in ("broker-a", "broker-b")
            for i in range(4)
        )
        if scan.keeps_queue(q)
    ]
    assert kept == [MessageQueue("Orders", "broker-a", 2), MessageQueue("Orders", "broker-a", 3)]
    # 2 IN (1, NULL) is NULL: the queue is kept, its rows fail the re-check
    assert holds(In(("queueId",), (1, None)), 2) is None
    assert holds(Not(In(("queueId",), (1, None))), 2) is None
    mistyped = EqualTo(("queueId",), "3")
    assert push(mistyped)[1] == [mistyped], "a literal of another type is left to Spark"


def test_offset_bounds() -> None:
    scan, _ = push(GreaterThan(("queueOffset",), 5), LessThanOrEqual(("queueOffset",), 10))
    assert (scan.offset_low, scan.offset_high) == (6, 11)
    scan, _ = push(In(("queueOffset",), (7, 3)), GreaterThanOrEqual(("queueOffset",), 4))
    assert (scan.offset_low, scan.offset_high) == (4, 8)
    scan, _ = push(EqualTo(("queueOffset",), 9), LessThan(("queueOffset",), 9))
    assert scan.empty


def test_time_bounds_round_outwards_to_milliseconds() -> None:
    scan, _ = push(GreaterThan(("storeTimestamp",), ts(1500)), LessThan(("storeTimestamp",), ts(9000)))
    assert (scan.time_low_ms, scan.time_high_ms) == (2, 9)  # ms 1 (1000 us) is not > 1500 us
    scan, _ = push(
        GreaterThanOrEqual(("storeTimestamp",), ts(1500)), LessThanOrEqual(("storeTimestamp",), ts(9500))
    )
    assert (scan.time_low_ms, scan.time_high_ms) == (2, 10)
    scan, _ = push(EqualTo(("storeTimestamp",), ts(3000)))
    assert (scan.time_low_ms, scan.time_high_ms) == (3, 4)
    berlin = datetime.timezone(datetime.timedelta(hours=1))
    scan, _ = push(
        GreaterThanOrEqual(("storeTimestamp",), datetime.datetime(1970, 1, 1, 1, 0, 1, tzinfo=berlin))
    )
    assert scan.time_low_ms == 1000


def _batch() -> pa.RecordBatch:
    tags = ["a", None, "b", "a", None, "c"]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(["T"] * 6),
            pa.array(["broker-a"] * 6),
            pa.array([0, 1, 2, 3, 0, 1], pa.int32()),
            pa.array([10, 11, 12, 13, 14, 15], pa.int64()),
            pa.array(tags),
            pa.array([1000 * i for i in range(6)], pa.timestamp("us", tz="UTC")),
        ],
        names=["topic", "brokerName", "queueId", "queueOffset", "tags", "storeTimestamp"],
    )


def _reference(f: Filter, row: dict[str, Any]) -> bool | None:
    """Spark's semantics for one row, written out by hand."""
    if isinstance(f, Not):
        inner = _reference(f.child, row)
        return None if inner is None else not inner
    column = vars(f)["attribute"][0]
    value = row[column]
    if isinstance(f, IsNotNull):
        return value is not None
    if isinstance(f, EqualNullSafe):
        return value == f.value if value is not None and f.value is not None else value is f.value
    if value is None:
        return None
    if isinstance(f, In):
        if value in [v for v in f.value if v is not None]:
            return True
        return None if None in f.value else False
    if isinstance(f, StringContains):
        return f.value in value
    return holds(f, value)


CASES: list[Filter] = [
    EqualTo(("tags",), "a"),
    Not(EqualTo(("tags",), "a")),
    In(("tags",), ("a", "c")),
    Not(In(("tags",), ("a", None))),
    Not(In(("tags",), ("a",))),
    EqualNullSafe(("tags",), None),
    EqualNullSafe(("tags",), "b"),
    IsNotNull(("tags",)),
    GreaterThan(("queueOffset",), 11),
    LessThanOrEqual(("queueOffset",), 13),
    In(("queueOffset",), (10, 15)),
    In(("queueId",), (1, 3)),
    Not(EqualTo(("queueId",), 0)),
    GreaterThanOrEqual(("storeTimestamp",), ts(2000)),
    LessThan(("storeTimestamp",), ts(4500)),
    StringStartsWith(("brokerName",), "broker-"),
    StringContains(("tags",), "a"),
]


@pytest.mark.parametrize("f", CASES, ids=repr)
def test_filter_batch_is_exact(f: Filter) -> None:
    batch = _batch()
    rows = batch.to_pylist()
    for row in rows:
        row["storeTimestamp"] = row["storeTimestamp"].replace(tzinfo=UTC)
    want = [r["queueOffset"] for r in rows if _reference(f, r) is True]
    got = filter_batch(batch, [f]).column("queueOffset").to_pylist()
    assert got == want, f"{f}: rows {got}, Spark keeps {want}"


def test_filter_batch_ands_all_filters() -> None:
    got = filter_batch(_batch(), [In(("tags",), ("a", "b")), GreaterThan(("queueOffset",), 10)])
    assert got.column("queueOffset").to_pylist() == [12, 13]


class _FakeTimes:
    """SEARCH_OFFSET_BY_TIMESTAMP over a known list of store times, with RocketMQ's answers."""

    def __init__(self, times_ms: list[int]) -> None:
        self.times = times_ms

    def search_offset(self, queue: MessageQueue, addr: str, timestamp_ms: int) -> int:
        for offset, t in enumerate(self.times):
            if t >= timestamp_ms:
                return offset
        return len(self.times) - 1  # after every message: the last one

    def max_offset(self, queue: MessageQueue, addr: str) -> int:
        return len(self.times)


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [
        (20, 40, (2, 4)),
        (None, 1000, (0, 6)),
        (55, None, (5, 6)),
        # the search answers the last offset both when the last message is at/after 50 and when every
        # message is before 50, so the last message is read and re-checked (a superset, never less)
        (None, 50, (0, 6)),
        (None, 40, (0, 4)),
        (0, 5, (0, 0)),
    ],
)
def test_narrow_ranges_by_time(low: int | None, high: int | None, want: tuple[int, int]) -> None:
    q = MessageQueue("T", "broker-a", 0)
    access: Any = _FakeTimes([10, 10, 20, 30, 40, 50])
    scan = PushedScan(time_low_ms=low, time_high_ms=high)
    begins, ends = narrow_ranges(access, scan, {q: "addr"}, {q: 0}, {q: 6})
    assert (begins[q], ends[q]) == want
    scan = PushedScan(offset_low=1, offset_high=3, time_low_ms=low, time_high_ms=high)
    begins, ends = narrow_ranges(access, scan, {q: "addr"}, {q: 0}, {q: 6})
    assert begins[q] == ends[q] or (begins[q] >= 1 and ends[q] <= 3), "offset bounds still apply"


def test_pushdown_reader_carries_its_scan_to_the_executor() -> None:
    opts = parse_source_options(
        {"nameServer": "127.0.0.1:9876", "topic": "T", "pushFilters": "true"}, batch=True
    )
    reader = RocketMQPushdownReader(opts)
    keep = EqualTo(("body",), b"x")
    rest = list(reader.pushFilters([In(("tags",), ("b", "a")), keep, GreaterThan(("queueOffset",), 3)]))
    assert rest == [keep]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.opts.sub_expression == "a || b" and copy.opts.tags == frozenset({"a", "b"})
    assert copy.scan == reader.scan and copy.scan.offset_low == 4


def test_filter_options() -> None:
    base = {"nameServer": "127.0.0.1:9876", "topic": "T"}
    with pytest.raises(OptionError, match="sqlFilter"):
        parse_source_options({**base, "sqlFilter": "a > 1", "subExpression": "x"})
    with pytest.raises(OptionError, match="pushFilters"):
        parse_source_options({**base, "pushFilters": "true"}, batch=False)
    opts = parse_source_options({**base, "sqlFilter": "a > 1"})
    assert opts.pull_expression == "a > 1" and opts.pull_expression_type.value == "SQL92"
    assert parse_source_options(base).max_partitions is None
    assert opts.group != parse_source_options(base).group, "a SQL92 query gets its own default group"


def test_no_partition_cap_by_default() -> None:
    ranges = [QueueRange("T", "b", i, "addr", 0, 10 + i) for i in range(12)]
    assert len(plan_partitions(ranges, min_partitions=None, max_partitions=None)) == 12
    assert len(plan_partitions(ranges, min_partitions=24, max_partitions=None)) >= 24
    assert len(plan_partitions(ranges, min_partitions=None, max_partitions=3)) == 3
