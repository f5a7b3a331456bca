"""Tests of the fastjson-tolerant JSON reader and the standard JSON writer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.remoting.lenient_json import JSONFormatError, dumps, freeze, loads, thaw


def test_unquoted_numeric_keys_parse_like_quoted() -> None:
    assert loads(b'{0:"a",1:"b",-3:"c"}') == {"0": "a", "1": "b", "-3": "c"}
    assert loads(b'{0:"a",1:"b"}') == loads(b'{"0":"a","1":"b"}')
    assert loads(" { 12 : { 7 : [1, 2.5, -1e3, true, false, null] } } ") == {
        "12": {"7": [1, 2.5, -1000.0, True, False, None]}
    }
    assert loads("{bare_key:1}") == {"bare_key": 1}


def test_object_keys_become_frozen_item_tuples() -> None:
    text = (
        '{"offsetTable":{'
        '{"brokerName":"b","queueId":0,"topic":"t"}:123,'
        '{"topic":"t","queueId":1,"brokerName":"b"}:7'
        "}}"
    )
    table = loads(text)["offsetTable"]
    key0 = (("brokerName", "b"), ("queueId", 0), ("topic", "t"))
    assert table == {key0: 123, (("brokerName", "b"), ("queueId", 1), ("topic", "t")): 7}
    assert thaw(key0) == {"brokerName": "b", "queueId": 0, "topic": "t"}
    assert freeze({"b": [1, {"x": 2}], "a": 1}) == (("a", 1), ("b", (1, (("x", 2),))))
    # writing it back yields fastjson's form, which parses to the same value
    assert dumps(loads(text)) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:123,{"brokerName":"b","queueId":1,"topic":"t"}:7}}'
    )
    assert loads(dumps(loads(text))) == loads(text)


def test_strings_and_escapes() -> None:
    assert loads(b'{0:"\\u00e9\\n\\"x"}') == {"0": 'é\n"x'}
    assert loads('{0:"ünï"}'.encode()) == {"0": "ünï"}


@pytest.mark.parametrize(
    "bad",
    [b"", b"{", b'{0:"a"', b'{0 "a"}', b'{"a":1,}x', b"[1 2]", b'{"a":tru}', b"\xff", b'{0:"a"} x', b"{:1}"],
)
def test_errors(bad: bytes) -> None:
    with pytest.raises(JSONFormatError):
        loads(bad)


def test_deep_nesting_is_a_format_error() -> None:
    with pytest.raises(JSONFormatError):
        loads("[" * 100000)
    with pytest.raises(JSONFormatError):
        loads("{0:" * 100000)


def test_writer_is_standard_sorted_compact_ascii() -> None:
    assert dumps({"b": 1, "a": [True, None], "c": "é"}) == b'{"a":[true,null],"b":1,"c":"\\u00e9"}'
    assert dumps({1: "x", 0: "y"}) == b'{"0":"y","1":"x"}'
    assert json.loads(dumps({1: "x", "k": 2})) == {"1": "x", "k": 2}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_roundtrip(value: object) -> None:
    assert loads(dumps(value)) == value


@given(st.dictionaries(st.integers(-(2**63), 2**63 - 1), st.text(), max_size=5))
def test_fastjson_int_keys_roundtrip(table: dict[int, str]) -> None:
    fastjson = "{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in table.items()) + "}"
    assert loads(fastjson) == {str(k): v for k, v in table.items()}


@given(st.text(max_size=30))
def test_garbage_raises_only_format_error(text: str) -> None:
    try:
        loads(text)
    except JSONFormatError:
        pass
