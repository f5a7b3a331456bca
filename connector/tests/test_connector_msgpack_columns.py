"""The column-wise msgpack decoder against the row-wise one: same values, same errors, on
well-typed, ill-typed and corrupted bodies (property tests), and no row left to the row-wise
decoder when the bodies are what a producer normally writes."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketq.connector import msgpack_columns
from rocketq.connector.msgpack_columns import MIN_ROWS, decode_columns
from rocketq.connector.value_encoding import encode_values
from rocketq.connector.value_types import ValueFormat, parse_ddl
from rocketq.connector.values import Decoded, _isolate, _msgpack_block, decode_values

SCHEMA = (
    "i8 tinyint, i16 smallint, i32 int, i64 bigint, f32 float, f64 double, b boolean, s string, "
    "bin binary, ts timestamp, tsn timestamp_ntz, d date, dec decimal(10,2), arr array<int>, "
    "m map<string,int>, st struct<a: string, b: array<struct<c: bigint, `naïve long name`: string>>>"
)
TYP = parse_ddl(SCHEMA)
UTC = dt.UTC


@pytest.fixture(autouse=True)
def unlimited_steps(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small random batches of a 16-field schema with shuffled keys need more vectorized steps
    than the budget allows, and would all go row-wise: lift the budget but where it is tested."""
    if "give_up" not in request.node.name:
        monkeypatch.setattr(msgpack_columns, "STEP_FLOOR", 10**6)


def row_wise(bodies: pa.Array, typ: pa.DataType) -> Decoded:
    errors: dict[int, str] = {}
    values = _isolate(bodies, typ, lambda b: _msgpack_block(b, typ), errors)
    return Decoded(values, errors)


def assert_same(bodies: list[bytes], typ: pa.DataType = TYP) -> Decoded:
    arr = pa.array(bodies, pa.binary())
    got = decode_values(arr, ValueFormat.MSGPACK, typ)
    want = row_wise(arr, typ)
    assert got.errors == want.errors
    assert got.values.type == want.values.type
    for i, (a, b) in enumerate(zip(got.values.to_pylist(), want.values.to_pylist(), strict=True)):
        assert repr(a) == repr(b), (i, bodies[i], a, b)  # repr: NaN equal to NaN, -0.0 not to 0.0
    return got


# -- generated values (from a seed hypothesis picks: drawing every value through hypothesis
# makes batches of this size too slow to generate) ---------------------------------------------

EDGE_INTS = [
    0,
    1,
    -1,
    127,
    128,
    -32,
    -33,
    255,
    256,
    -129,
    2**15,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63,
    2**64 - 1,
]


def an_int(rnd: random.Random) -> int:
    roll = rnd.randrange(4)
    if roll == 0:
        return rnd.choice(EDGE_INTS)
    return rnd.randint(-(2**63), 2**64 - 1) if roll == 1 else rnd.randint(-50, 300)


def a_text(rnd: random.Random, size: int = 8) -> str:
    return "".join(rnd.choice("abcxyz_-é漢😀\x00\n") for _ in range(rnd.randrange(size)))


def anything(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.randrange(9 if depth < 2 else 7)
    if roll == 0:
        return None
    if roll == 1:
        return rnd.random() < 0.5
    if roll == 2:
        return an_int(rnd)
    if roll == 3:
        return rnd.choice([rnd.uniform(-1e6, 1e6), 1e300, -0.0, float("inf"), 1.5])
    if roll == 4:
        return a_text(rnd)
    if roll == 5:
        return rnd.randbytes(rnd.randrange(6))
    if roll == 6:
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
            microseconds=rnd.randint(-6 * 10**16, 2 * 10**17)
        )
    if roll == 7:
        return [anything(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {a_text(rnd, 4): anything(rnd, depth + 1) for _ in range(rnd.randrange(4))}


def typed(rnd: random.Random, typ: pa.DataType, wild: float) -> Any:
    """A value of ``typ`` (sometimes null); with probability ``wild`` at each node, one that does
    not fit (anything at all, a number out of range, a timestamp as text, an extra key)."""
    if rnd.random() < 0.05:
        return None
    odd = rnd.random() < wild
    if odd and rnd.random() < 0.3:
        return anything(rnd)
    if pa.types.is_struct(typ):
        out = {f.name: typed(rnd, f.type, wild) for f in typ if rnd.randrange(10)}
        if rnd.random() < 0.5:  # producers order keys their own way
            items = list(out.items())
            rnd.shuffle(items)
            out = dict(items)
        if odd:
            out[a_text(rnd, 5)] = anything(rnd)
        return out
    if pa.types.is_list(typ):
        return [typed(rnd, typ.value_type, wild) for _ in range(rnd.randrange(5))]
    if pa.types.is_map(typ):
        return {a_text(rnd, 4): typed(rnd, typ.item_type, wild) for _ in range(rnd.randrange(4))}
    if pa.types.is_integer(typ):
        bits = typ.bit_width
        return an_int(rnd) if odd else rnd.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_floating(typ):
        if odd:
            return rnd.choice([2**60, 1e300, True, "1.5"])
        return rnd.choice([rnd.uniform(-1e9, 1e9), rnd.randint(-1000, 1000), float("nan"), -0.0])
    if pa.types.is_boolean(typ):
        return rnd.choice([0, 1, "true"]) if odd else rnd.random() < 0.5
    if pa.types.is_string(typ):
        return rnd.randbytes(3) if odd else a_text(rnd, 12)
    if pa.types.is_binary(typ):
        return a_text(rnd) if odd else rnd.randbytes(rnd.randrange(12))
    if pa.types.is_timestamp(typ):
        if odd:  # as text, or outside the int64 nanoseconds the row-wise decoder goes through
            stamp = dt.datetime(1, 1, 2) + dt.timedelta(microseconds=rnd.randint(0, 3 * 10**17))
            return stamp.isoformat() if rnd.random() < 0.5 else stamp.replace(tzinfo=UTC)
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
            microseconds=rnd.randint(-9 * 10**15, 9 * 10**15)
        )
    if pa.types.is_date(typ):
        return (dt.date(1, 1, 1) + dt.timedelta(days=rnd.randrange(3_000_000))).isoformat()
    if pa.types.is_decimal(typ):
        return str(decimal.Decimal(rnd.randint(-(10**9), 10**9)) / 100)
    raise AssertionError(typ)


def pack(rnd: random.Random, value: Any) -> bytes:
    options = {"datetime": True, "use_bin_type": rnd.randrange(10) > 0}
    if rnd.random() < 0.3:
        try:  # 32-bit floats where they fit, as some producers write
            packed: bytes = msgpack.packb(value, use_single_float=True, **options)
            return packed
        except OverflowError:
            pass
    packed = msgpack.packb(value, **options)
    return packed


def a_batch(seed: int) -> tuple[list[bytes], random.Random]:
    rnd = random.Random(seed)
    wild = rnd.choice([0.0, 0.003, 0.03])
    return [pack(rnd, typed(rnd, TYP, wild)) for _ in range(rnd.randrange(MIN_ROWS, MIN_ROWS + 60))], rnd


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.integers(0, 2**32))
def test_same_as_row_wise_on_generated_values(seed: int) -> None:
    bodies = a_batch(seed)[0]
    found = decode_columns(pa.array(bodies, pa.binary()), TYP)
    assert found is not None and found[1].size < len(bodies)  # rows are decoded column-wise
    assert_same(bodies)


@SETTINGS
@given(st.integers(0, 2**32))
def test_same_as_row_wise_on_corrupted_bodies(seed: int) -> None:
    bodies, rnd = a_batch(seed)
    out = []
    for body in bodies:
        b = bytearray(body)
        action = rnd.randrange(6)
        if action == 0 and b:
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        elif action == 1:
            del b[rnd.randrange(len(b) + 1) :]
        elif action == 2:
            b += rnd.randbytes(rnd.randrange(1, 4))
        elif action == 3 and b:
            at = rnd.randrange(len(b))
            b[at : at + 1] = bytes([0xC1, 0xDB, 0xFF, 0xD7, 0xDD])[rnd.randrange(5) :][:2]
        out.append(bytes(b))
    assert_same(out)


def test_same_as_row_wise_on_invalid_utf8_and_timestamps() -> None:
    good = {"s": "x", "st": {"a": "y", "b": [{"c": 1}]}}
    bodies = [msgpack.packb(good)] * MIN_ROWS
    bad_utf8 = msgpack.packb(good).replace(b"\xa1x", b"\xa1\xff")
    bad_key = msgpack.packb({**good, "z": 1}).replace(b"\xa1z", b"\xa1\xfe")
    bad_skipped = msgpack.packb({**good, "zz": ["ok", "no"]}).replace(b"\xa2no", b"\xa2\xc3\x28")
    stamp = msgpack.packb({"ts": msgpack.Timestamp(1, 5)}, datetime=True)  # 5 ns: not a whole µs
    nsec_12 = (2**31 - 1).to_bytes(4, "big") + (1).to_bytes(8, "big")  # 12-byte form, nsec >= 10^9
    bad_nsec = b"\x81\xa2ts\xc7\x0c\xff" + nsec_12
    got = assert_same([*bodies, bad_utf8, bad_key, bad_skipped, stamp, bad_nsec])
    assert set(got.errors) == {MIN_ROWS, MIN_ROWS + 1, MIN_ROWS + 2, MIN_ROWS + 3, MIN_ROWS + 4}


def test_duplicate_keys_keep_the_last_as_row_wise() -> None:
    twice = b"\x83\xa1s\xa1a\xa3i64\x05\xa1s\xa1b"  # {"s": "a", "i64": 5, "s": "b"}
    retyped = b"\x82\xa1s\xa1a\xa1s\x07"  # {"s": "a", "s": 7}: the last does not fit
    got = assert_same([msgpack.packb({"s": "x"})] * MIN_ROWS + [twice, retyped])
    assert got.values[MIN_ROWS].as_py()["s"] == "b"
    assert set(got.errors) == {MIN_ROWS + 1}


def test_producer_bodies_are_decoded_column_wise() -> None:
    typ = parse_ddl("id bigint, customer string, amount double, qty int, tags array<string>, at timestamp")
    at = dt.datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {"id": i * 7919 - 5000, "customer": f"cüstomer-{i}", "amount": i / 3, "qty": i % 300 - 150,
         "tags": ["retail", "eu"][: i % 3], "at": at + dt.timedelta(microseconds=i * 997)}
        if i % 11 else None
        for i in range(500)
    ]  # fmt: skip
    values = pa.array(rows, typ)
    bodies = encode_values(values, ValueFormat.MSGPACK)
    found = decode_columns(bodies, typ)
    assert found is not None
    decoded, flagged = found
    assert flagged.size == 0
    assert decoded.equals(values)
    reordered = [
        msgpack.packb(dict(reversed(list(r.items()))), datetime=True) if r else b"\xc0" for r in rows
    ]
    found = decode_columns(pa.array(reordered, pa.binary()), typ)
    assert found is not None and found[1].size == 0 and found[0].equals(values)


def test_long_arrays_give_up_to_row_wise() -> None:
    typ = parse_ddl("xs array<int>")
    bodies = [msgpack.packb({"xs": list(range(i, i + 5000))}) for i in range(MIN_ROWS)]
    assert decode_columns(pa.array(bodies, pa.binary()), typ) is None
    got = assert_same(bodies, typ)
    assert got.values.to_pylist()[3] == {"xs": list(range(3, 5003))}


@pytest.mark.parametrize("n", [0, 1, MIN_ROWS - 1])
def test_small_batches_go_row_wise(n: int) -> None:
    bodies = pa.array([msgpack.packb({"s": "a"})] * n, pa.binary())
    assert decode_columns(bodies, TYP) is None
    assert (
        decode_values(bodies, ValueFormat.MSGPACK, TYP).values.to_pylist()
        == [{f.name: ("a" if f.name == "s" else None) for f in TYP}] * n
    )


def test_sliced_bodies() -> None:
    bodies = pa.array([msgpack.packb({"i64": i, "s": str(i)}) for i in range(200)], pa.binary()).slice(
        37, 100
    )
    got = decode_values(bodies, ValueFormat.MSGPACK, TYP)
    assert not got.errors
    assert [v["i64"] for v in got.values.to_pylist()] == list(range(37, 137))
    assert np.array_equal(got.bad_rows(), [])
