"""The SQL92 property filter: parsing, RocketMQ's evaluation semantics, and robustness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.filter.expression import matches
from rocketq.broker.filter.sql92 import MAX_NESTING, Sql92ParseError, compile_sql92, parse_sql92
from rocketq.broker.testing import run_broker
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.vocabulary import ExpressionType
from rocketq.client.testing import pull_header
from rocketq.client.transport.aio import RemotingClient

PROPS = {
    "a": "5",
    "b": "abc",
    "f": "2.5",
    "neg": "-3",
    "TAGS": "TagA",
    "KEYS": "k1 k2",
    "flag": "true",
    "Mixed": "X",
}


def ev(expr: str, props: dict[str, str] | None = None) -> bool:
    return matches(parse_sql92(expr), PROPS if props is None else props)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("a = 5", True),
        ("a = 6", False),
        ("a <> 6", True),
        ("a != 5", False),
        ("a = 5.0", True),
        ("a > 4", True),
        ("a > 5", False),
        ("a >= 5", True),
        ("a < 5", False),
        ("a <= 5", True),
        ("5 < a", False),
        ("4 < a", True),
        ("a > -1", True),
        ("neg < 0", True),
        ("neg = -3", True),
        ("f > 2", False),
        ("f < 2.6", True),
        ("f = 2.5", True),
        ("f > 2.5", False),
        ("f = 2", False),
        ("a > 4.5", True),
        ("a BETWEEN 1 AND 5", True),
        ("a BETWEEN 6 AND 9", False),
        ("a NOT BETWEEN 6 AND 9", True),
        ("a BETWEEN -10 AND 5", True),
        ("f between 2.0 and 3.0", True),
        ("f between 2 and 3", False),
        ("b = 'abc'", True),
        ("b = 'ABC'", False),
        ("b <> 'x'", True),
        ("TAGS = 'TagA'", True),
        ("KEYS = 'k1 k2'", True),
        ("b IN ('x', 'abc')", True),
        ("b IN ('x')", False),
        ("b NOT IN ('x', 'y')", True),
        ("b NOT IN ('abc')", False),
        ("missing IS NULL", True),
        ("a IS NULL", False),
        ("a IS NOT NULL", True),
        ("missing IS NOT NULL", False),
        ("a = 5 AND b = 'abc'", True),
        ("a = 5 AND b = 'x'", False),
        ("a = 6 OR b = 'abc'", True),
        ("NOT (a = 6)", True),
        ("NOT (a = 5)", False),
        ("(a = 6 OR a = 5) AND NOT (b = 'z')", True),
        ("a = 5 and B = 'abc'", False),  # property names are case-sensitive, keywords are not
        ("Mixed = 'X'", True),
        ("flag = TRUE", True),
        ("flag = FALSE", False),
        ("TRUE", True),
        ("FALSE", False),
        ("NULL", False),
        ("a", False),  # a bare string property is never true
        ("b CONTAINS 'bc'", True),
        ("b NOT CONTAINS 'bc'", False),
        ("b STARTSWITH 'ab'", True),
        ("b ENDSWITH 'bc'", True),
        ("b ENDSWITH 'ab'", False),
        ("missing CONTAINS 'x'", False),
        ("a = 5 -- trailing comment", True),
        ("/* c */ a = 5", True),
        ("a = 5L", True),
        ("'it''s' = q", True),
        ("a = +5", True),
        ("x = 'a''b'", False),
    ],
)
def test_evaluation(expr: str, expected: bool) -> None:
    props = {**PROPS, "q": "it's"}
    assert ev(expr, props) is expected


@pytest.mark.parametrize(
    "expr",
    [
        "missing = 5",
        "missing <> 5",
        "missing > 1",
        "missing BETWEEN 1 AND 2",
        "missing NOT BETWEEN 1 AND 2",
        "missing IN ('a')",
        "missing NOT IN ('a')",
        "NOT (missing = 1)",
    ],
)
def test_missing_property_is_unknown_so_never_matches(expr: str) -> None:
    assert ev(expr) is False


def test_three_valued_logic() -> None:
    assert ev("missing = 1 OR a = 5") is True
    assert ev("missing = 1 AND a = 6") is False
    assert ev("missing = 1 AND a = 5") is False


@pytest.mark.parametrize("expr", ["b > 1", "b = 1", "f = 2", "b BETWEEN 1 AND 2"])
def test_non_numeric_property_against_a_number_does_not_match(expr: str) -> None:
    # Java's Long.valueOf / Double.valueOf fails: RocketMQ drops the message
    assert ev(expr) is False


def test_conversion_error_aborts_the_whole_expression_like_rocketmq() -> None:
    assert ev("b = 5 OR a = 5") is False
    assert ev("a = 5 OR b = 5") is True  # short-circuit before the failing comparison


def test_string_ordering_compares_as_decimals() -> None:
    assert ev("a > f", {"a": "10", "f": "9.5"}) is True
    assert ev("a > f", {"a": "x", "f": "9.5"}) is False


def test_integer_literal_needs_an_integer_property() -> None:
    assert ev("f > 1") is False  # Long.valueOf("2.5") fails
    assert ev("f > 1.0") is True


def test_not_binds_tighter_than_comparison_as_in_rocketmq() -> None:
    # NOT a = 5 is (NOT a) = 5: a boolean compared with a number is never equal
    assert ev("NOT a = 5") is False


@pytest.mark.parametrize(
    ("expr", "position", "expected_fragment"),
    [
        ("", 0, "an expression"),
        ("a >", 3, "a value"),
        ("a = 5 AND", 9, "a value"),
        ("(a = 5", 6, "')'"),
        ("a = 5)", 5, "end of expression"),
        ("a > 'x'", 4, "cannot be compared"),
        ("a BETWEEN 'x' AND 'y'", 10, "cannot be compared"),
        ("a BETWEEN 5 AND 1", 10, "in order"),
        ("a BETWEEN 1 5", 12, "AND between"),
        ("a = NULL", 4, "IS NULL"),
        ("TRUE = 1", 0, "cannot be compared"),
        ("a IN (1, 2)", 6, "string literal"),
        ("a IN ('x' 'y')", 10, "',' or ')'"),
        ("5 IN ('x')", 0, "property name"),
        ("a", None, None),  # valid
        ("5", 0, "boolean"),
        ("'x'", 0, "boolean"),
        ("a IS 5", 5, "NULL"),
        ("a IS NOT 5", 9, "NULL"),
        ("b CONTAINS 5", 11, "string literal"),
        ("a = 'unterminated", 4, "closing quote"),
        ("a = 5 /* open", 6, "'*/'"),
        ("a # 5", 2, "operator"),
        ("a = 007", 4, "leading zeros"),
        ("a = 99999999999999999999", 4, "long range"),
        ("a > (b = 1)", 4, "condition"),
        ("a == 5", 3, "a value"),
        ("a LIKE 'x'", 2, "AND, OR"),
    ],
)
def test_parse_errors_name_position_and_expectation(
    expr: str, position: int | None, expected_fragment: str | None
) -> None:
    if position is None:
        parse_sql92(expr)
        return
    with pytest.raises(Sql92ParseError) as info:
        parse_sql92(expr)
    assert info.value.position == position, str(info.value)
    assert expected_fragment is not None and expected_fragment in info.value.expected, str(info.value)
    assert f"position {position}" in str(info.value)


def test_nesting_limit() -> None:
    ok = "(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING
    assert ev(ok, {"a": "1"})
    with pytest.raises(Sql92ParseError):
        parse_sql92("(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1))
    with pytest.raises(Sql92ParseError):
        parse_sql92("NOT " * 5000 + "TRUE")


def test_long_and_chains_evaluate_without_recursion() -> None:
    expr = " AND ".join(f"p{i} IS NULL" for i in range(3_000))
    assert ev(expr, {}) is True


def test_compile_cache_returns_fresh_errors() -> None:
    assert compile_sql92("a = 1") is compile_sql92("a = 1")
    errors = []
    for _ in range(2):
        with pytest.raises(Sql92ParseError) as info:
            compile_sql92("a >")
        errors.append(info.value)
    assert errors[0] is not errors[1] and str(errors[0]) == str(errors[1])


_WORDS = [
    "a",
    "b",
    "TAGS",
    "AND",
    "OR",
    "NOT",
    "BETWEEN",
    "IN",
    "IS",
    "NULL",
    "TRUE",
    "FALSE",
    "CONTAINS",
    "STARTSWITH",
    "ENDSWITH",
    "(",
    ")",
    ",",
    "=",
    "<>",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "1",
    "2.5",
    "-3",
    ".5",
    "1e3",
    "'x'",
    "'it''s'",
    "'",
    "--",
    "/*",
    "*/",
    "0",
    "00",
    "$",
    "é",
    "\n",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_WORDS), max_size=25),
    st.dictionaries(st.sampled_from(["a", "b", "TAGS"]), st.text(max_size=5)),
)
def test_random_token_soup_parses_or_fails_cleanly(words: list[str], props: dict[str, str]) -> None:
    text = " ".join(words)
    try:
        expr = parse_sql92(text)
    except Sql92ParseError:
        return
    assert matches(expr, props) in (True, False)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_random_text_parses_or_fails_cleanly(text: str) -> None:
    try:
        expr = parse_sql92(text)
    except Sql92ParseError:
        return
    assert matches(expr, {"a": "1"}) in (True, False)


# -- the pull processor with a SQL92 subscription (a real broker in-process) --------------------------


def _run_broker(
    tmp_path: Path, scenario: Callable[[RemotingClient, str], Awaitable[None]], **conf: str
) -> None:
    """``scenario(client, addr)`` against an in-process broker with a small store."""
    run_broker(tmp_path, lambda _controller, client, addr: scenario(client, addr), **conf)


async def _pull(
    client: RemotingClient, addr: str, sql: str, offset: int = 0, max_nums: int = 32
) -> RemotingCommand:
    h = pull_header(
        "S",
        0,
        offset,
        group="cg",
        max_msg_nums=max_nums,
        subscription=sql,
        expression_type=ExpressionType.SQL92,
    )
    return await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, h.to_ext_fields()), 5000)


async def _fill(client: RemotingClient, addr: str, n: int) -> None:
    for i in range(n):
        h = SendMessageRequestHeaderV2(
            producer_group="pg",
            topic="S",
            default_topic="TBW102",
            default_topic_queue_nums=1,
            queue_id=0,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=f"TAGS\x01T{i % 2}\x02a\x01{i}\x02",
        )
        r = await client.invoke(
            addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, h.to_ext_fields(), b"%d" % i), 5000
        )
        assert r.code == R.SUCCESS


def test_pull_with_sql92_returns_only_matches(tmp_path: Path) -> None:
    async def scenario(client: RemotingClient, addr: str) -> None:
        await _fill(client, addr, 10)
        await asyncio.sleep(0.2)
        r = await _pull(client, addr, "a >= 3 AND a < 6")
        assert r.code == R.SUCCESS
        assert [m.body for m in iter_stored_messages(r.body)] == [b"3", b"4", b"5"]
        assert r.ext_fields["nextBeginOffset"] == "10" and r.ext_fields["maxOffset"] == "10"
        r = await _pull(client, addr, "a >= 3 AND TAGS = 'T1'", max_nums=2)
        assert [m.body for m in iter_stored_messages(r.body)] == [b"3", b"5"]
        assert r.ext_fields["nextBeginOffset"] == "7"  # the next match: 7 is not skipped, 6 is
        r = await _pull(client, addr, "a > 100")
        assert r.code == R.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "10"
        r = await _pull(client, addr, "a > 1", offset=10)
        assert r.code == R.PULL_NOT_FOUND
        r = await _pull(client, addr, "a > 'x'")
        assert r.code == R.SUBSCRIPTION_PARSE_FAILED and "position 4" in (r.remark or "")

    _run_broker(tmp_path, scenario, enablePropertyFilter="true")


def test_pull_with_sql92_disabled_tells_how_to_enable(tmp_path: Path) -> None:
    async def scenario(client: RemotingClient, addr: str) -> None:
        await _fill(client, addr, 1)
        r = await _pull(client, addr, "a = 0")
        assert r.code == R.SUBSCRIPTION_PARSE_FAILED and "enablePropertyFilter=true" in (r.remark or "")

    _run_broker(tmp_path, scenario)
