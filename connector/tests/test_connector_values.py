"""Value codecs (valueFormat), value schemas (DDL) and the decode-error policies, without a broker."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from rocketq.connector.deadletter import DecodeCounts, decode_stats, write_stats
from rocketq.connector.errors import OptionError
from rocketq.connector.options import parse_sink_options, parse_source_options
from rocketq.connector.planning import QueueRange
from rocketq.connector.poison import DecodeError, ValueStage, describe_body
from rocketq.connector.records import empty_batch
from rocketq.connector.schema import ARROW_SCHEMA
from rocketq.connector.value_encoding import encode_values
from rocketq.connector.value_schema import infer_type
from rocketq.connector.value_types import DDLError, ValueFormat, parse_ddl, spark_type, to_ddl
from rocketq.connector.values import decode_values

DDL = (
    "id bigint not null, name string, price decimal(12,3), at timestamp, day date, tags array<string>, "
    "attrs map<string,int>, inner struct<x: double, ys: array<struct<z: int>>>"
)
NO_MAP_DDL = (
    "id bigint, at timestamp, day date, p decimal(10,2), inner struct<x: double, ys: array<struct<z: int>>>"
)


def rows() -> list[dict[str, Any]]:
    utc = dt.UTC
    return [
        {
            "id": 1, "name": 'a"b\\c\n\x01é', "price": decimal.Decimal("1.500"),
            "at": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=utc), "day": dt.date(2024, 1, 2),
            "tags": ["x", None], "attrs": [("k", 1), ("n", None)],
            "inner": {"x": 1.5, "ys": [{"z": 1}, None]},
        },
        {"id": 2, "name": None, "price": None, "at": None, "day": None, "tags": None, "attrs": None,
         "inner": None},
        {"id": 3, "name": "", "price": decimal.Decimal("-0.001"), "at": None, "day": None, "tags": [],
         "attrs": [], "inner": {"x": None, "ys": []}},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "ddl",
    [
        DDL,
        NO_MAP_DDL,
        "int",
        "array<struct<a: string>>",
        "map<string, array<int>>",
        "a: decimal(5, 2), `b c` string",
    ],
)
def test_ddl_gives_sparks_arrow_types(ddl: str) -> None:
    typ = parse_ddl(ddl)
    assert to_arrow_type(spark_type(typ), timezone="UTC") == typ
    assert parse_ddl(to_ddl(typ)) == typ
    if "not null" not in ddl and "`" not in ddl:  # simpleString drops NOT NULL and quotes
        assert parse_ddl(spark_type(typ).simpleString()) == typ


@pytest.mark.parametrize("bad", ["", "a", "a int,, b", "array<int", "map<string>", "a blob"])
def test_bad_ddl(bad: str) -> None:
    with pytest.raises(DDLError):
        parse_ddl(bad)


@pytest.mark.parametrize("fmt", [ValueFormat.JSON, ValueFormat.MSGPACK])
@pytest.mark.parametrize("ddl", [DDL, NO_MAP_DDL])
def test_round_trip(fmt: ValueFormat, ddl: str) -> None:
    typ = parse_ddl(ddl)
    names = {f.name for f in typ}
    values = pa.array([{k: v for k, v in r.items() if k in names} for r in rows()], typ)
    bodies = encode_values(values, fmt)
    decoded = decode_values(bodies, fmt, typ)
    assert decoded.errors == {}
    assert decoded.values.equals(values), (decoded.values.to_pylist(), values.to_pylist())


def test_json_text_is_standard_json() -> None:
    typ = parse_ddl(DDL)
    bodies = encode_values(pa.array(rows(), typ), ValueFormat.JSON)
    first = json.loads(bodies[0].as_py())
    assert first["name"] == 'a"b\\c\n\x01é' and first["at"] == "2024-01-02T03:04:05.123456Z"
    assert first["attrs"] == {"k": 1, "n": None} and first["day"] == "2024-01-02"


@pytest.mark.parametrize("ddl", [DDL, NO_MAP_DDL])
def test_json_bad_rows_are_isolated(ddl: str) -> None:
    typ = parse_ddl(ddl)
    bodies = pa.array(
        [b'{"id": 1,\n "inner": {"x": 2}}', b'{"id": 1.5}', b"not json", b'{"id":3}{"id":4}', b"  ", b"\xff",
         b'{"id": 5}', b"null", b"[1]"],
        pa.binary(),
    )  # fmt: skip
    decoded = decode_values(bodies, ValueFormat.JSON, typ)
    assert sorted(decoded.errors) == [1, 2, 3, 4, 5, 8]
    got = decoded.values.to_pylist()
    assert got[0]["id"] == 1 and got[0]["inner"]["x"] == 2.0  # a newline inside a body is whitespace
    assert got[6]["id"] == 5 and got[7] is None
    assert decoded.error_column().to_pylist()[1] == decoded.errors[1]


def test_msgpack_bad_rows_are_isolated() -> None:
    typ = parse_ddl("id bigint, name string")
    good = encode_values(pa.array([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], typ), ValueFormat.MSGPACK)
    bodies = pa.array([good[0].as_py(), b"\xc1", good[1].as_py() * 2, b"\x81\xa2id\xa1x", good[1].as_py()])
    decoded = decode_values(bodies, ValueFormat.MSGPACK, typ)
    assert sorted(decoded.errors) == [1, 2, 3]
    assert decoded.values.to_pylist()[4] == {"id": 2, "name": "b"}


def test_string_format() -> None:
    decoded = decode_values(pa.array([b"ok \xc3\xa9", b"\xff\xfe"]), ValueFormat.STRING, pa.string())
    assert decoded.values.to_pylist() == ["ok é", None] and list(decoded.errors) == [1]
    assert encode_values(pa.array(["é"]), ValueFormat.STRING).to_pylist() == ["é".encode()]


def test_inference() -> None:
    bodies = pa.array([b'{"a": 1, "b": {"c": "x"}}', b"bad", b'{"a": 2, "d": [1.5]}', b'{"a": "x"}'])
    typ = infer_type(bodies, ValueFormat.JSON)
    assert typ == parse_ddl("a bigint, b struct<c: string>, d array<double>")
    packed = encode_values(pa.array([{"a": 1, "s": "x"}], parse_ddl("a int, s string")), ValueFormat.MSGPACK)
    assert infer_type(packed, ValueFormat.MSGPACK) == parse_ddl("a bigint, s string")
    assert infer_type(pa.array([b"\xc1"]), ValueFormat.MSGPACK) is None


def test_describe_body() -> None:
    assert describe_body(b"ab\x00\xff") == "61 62 00 ff |ab..| (4 bytes)"
    assert describe_body(b"x" * 40).endswith("... (40 bytes)")


OPTS = {"nameServer": "127.0.0.1:9876", "topic": "T"}


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        ({"valueFormat": "xml"}, "valueFormat"),
        ({"valueFormat": "json"}, "valueSchema"),
        ({"valueFormat": "json", "valueSchema": "a blob"}, "valueSchema"),
        ({"valueFormat": "string", "valueSchema": "a int"}, "valueSchema"),
        ({"valueFormat": "json", "valueSchemaInference": "0"}, "valueSchemaInference"),
        ({"valueFormat": "json", "valueSchema": "a int", "onDecodeError": "retry"}, "onDecodeError"),
        ({"valueFormat": "json", "valueSchema": "a int", "onDecodeError": "deadLetter"}, "deadLetterTopic"),
        ({"valueFormat": "json", "valueSchema": "a int", "onDecodeError": "deadLetter",
          "deadLetterTopic": "T"}, "deadLetterTopic"),
        ({"onDecodeError": "skip"}, "onDecodeError"),
        ({"valueFormat": "json", "valueSchema": "a int", "deadLetterTopic": "D"}, "deadLetterTopic"),
    ],
)  # fmt: skip
def test_bad_value_options(extra: dict[str, str], option: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_source_options({**OPTS, **extra})
    assert info.value.option == option


def test_sink_value_format_option() -> None:
    assert parse_sink_options({**OPTS, "valueFormat": "msgpack"}).value_format is ValueFormat.MSGPACK
    with pytest.raises(OptionError):
        parse_sink_options({**OPTS, "valueFormat": "avro"})


def pulled(bodies: list[bytes]) -> pa.RecordBatch:
    """A source batch (fixed schema) with these bodies, queue 0, offsets 100...."""
    n = len(bodies)
    base = empty_batch().to_pydict()
    row: dict[str, Any] = {name: None for name in base}
    ts = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    row.update(topic="T", brokerName="broker-a", queueId=0, msgId="AB", properties=[], bornTimestamp=ts)
    row.update(storeTimestamp=ts, bornHost="h:1", storeHost="h:2", reconsumeTimes=0, flag=0, sysFlag=0)
    data: dict[str, list[Any]] = {name: [row[name]] * n for name in base}
    data["queueOffset"] = list(range(100, 100 + n))
    data["body"] = bodies
    return pa.RecordBatch.from_pydict(data, schema=ARROW_SCHEMA)


def stage(policy: str) -> ValueStage:
    opts = parse_source_options(
        {**OPTS, "valueFormat": "json", "valueSchema": "id int", "onDecodeError": policy}
    )
    return ValueStage(opts, [QueueRange("T", "broker-a", 0, "h:1", 100, 103)])


def test_policies() -> None:
    batch = pulled([b'{"id": 1}', b"\x00oops", b'{"id": 3}'])
    with pytest.raises(DecodeError) as info:
        stage("fail").apply(batch)
    text = str(info.value)
    assert "topic T broker broker-a queue 0 queueOffset 101" in text and "00 6f 6f 70 73 |.oops|" in text
    nulled = stage("null").apply(batch)
    assert nulled.schema.names[-2:] == ["value", "decodeError"]
    assert nulled.column("value").to_pylist() == [{"id": 1}, None, {"id": 3}]
    assert [e is not None for e in nulled.column("decodeError").to_pylist()] == [False, True, False]
    skipping = stage("skip")
    kept = skipping.apply(batch)
    assert kept.column("queueOffset").to_pylist() == [100, 102] and kept.schema.names[-1] == "value"
    assert (skipping.counts.rows, skipping.counts.failed) == (3, 1)
    assert skipping.counts.per_queue == {"T/broker-a:0": 1}


def test_decode_stats(tmp_path: Path) -> None:
    opts = parse_source_options({**OPTS, "valueFormat": "string", "onDecodeError": "skip"})
    ranges = [QueueRange("T", "broker-a", 0, "h:1", 0, 10), QueueRange("T", "broker-a", 1, "h:1", 5, 8)]
    write_stats(
        str(tmp_path), ranges, opts.values, DecodeCounts(rows=13, failed=2, per_queue={"T/broker-a:0": 2})
    )
    write_stats(str(tmp_path), ranges, opts.values, DecodeCounts(rows=13, failed=2))  # a re-executed task
    later = [QueueRange("T", "broker-a", 0, "h:1", 10, 20)]
    write_stats(str(tmp_path), later, opts.values, DecodeCounts(rows=10, failed=1))
    assert decode_stats(str(tmp_path))["failed"] == 3
    first = decode_stats(str(tmp_path), None, {"T": {"broker-a:0": 10, "broker-a:1": 8}})
    assert (first["rows"], first["failed"], first["tasks"]) == (13, 2, 1)
    second = decode_stats(str(tmp_path), json.dumps({"T": {"broker-a:0": 10}}), None)
    assert (second["rows"], second["failed"]) == (10, 1)


def test_sink_value_column() -> None:
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from rocketq.connector.sink import validate_sink_schema
    from rocketq.connector.writer import encode_value_column

    value = StructField("value", StructType([StructField("id", LongType())]))
    json_opts = parse_sink_options({**OPTS, "valueFormat": "json"})
    validate_sink_schema(StructType([value, StructField("keys", StringType())]), json_opts)
    with pytest.raises(OptionError, match="not both"):
        validate_sink_schema(StructType([value, StructField("body", BinaryType())]), json_opts)
    with pytest.raises(OptionError, match="valueFormat=json"):
        validate_sink_schema(StructType([value]), parse_sink_options(OPTS))
    with pytest.raises(OptionError, match="there is none"):
        validate_sink_schema(StructType([StructField("body", BinaryType())]), json_opts)
    with pytest.raises(OptionError, match="string 'value'"):
        validate_sink_schema(StructType([value]), parse_sink_options({**OPTS, "valueFormat": "string"}))
    with pytest.raises(OptionError, match="binary"):
        binary = StructField("value", StructType([StructField("raw", BinaryType())]))
        validate_sink_schema(StructType([binary]), json_opts)
    batch = pa.RecordBatch.from_pydict({"value": [{"id": 1}], "keys": ["k"]})
    encoded = encode_value_column(batch, ValueFormat.JSON)
    assert encoded.schema.names == ["body", "keys"] and encoded.column("body").to_pylist() == [b'{"id":1}']
