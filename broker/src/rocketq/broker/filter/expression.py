"""The compiled form of a SQL92 filter: expression nodes evaluated against message properties.

RocketMQ 4.x evaluates the selector (an ActiveMQ ``SelectorParser`` derivative with
``convert_string_expressions`` always on) over the message's properties, which are all strings.

Theory of operation.  Every node's :meth:`Node.evaluate` returns a value: ``None`` (SQL's
unknown: a missing property, or a comparison involving one), a ``bool``, an ``int``, a ``float``
or a ``str``.  Logic is three-valued (``NOT unknown`` is unknown, ``unknown AND false`` is false,
``unknown OR true`` is true); a message matches only when the whole expression is exactly true.
When one side of a comparison is a number and the other a string (a property), the string is
converted like Java's ``Long.valueOf`` (integer constant) or ``Double.valueOf`` (decimal
constant); ``<``/``>``/``<=``/``>=`` between two strings compare them as decimals.  A conversion
that fails aborts the evaluation (:class:`EvalError`) and the message does not match, exactly as
RocketMQ's broker catches the ``NumberFormatException`` and drops the message.  AND/OR are n-ary
so that long chains evaluate without recursion.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

__all__ = [
    "And",
    "BoolCast",
    "Compare",
    "Const",
    "EvalError",
    "InList",
    "IsNull",
    "Negate",
    "Node",
    "Not",
    "Or",
    "Prop",
    "StringMatch",
    "Value",
    "is_number",
    "matches",
]

Value = None | bool | int | float | str

_JAVA_LONG = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class EvalError(Exception):
    """A value could not be converted for a comparison: the message does not match."""


def is_number(v: Value) -> TypeGuard[int | float]:
    """A long or double value (a bool is neither, although Python's bool is an int)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _to_long(text: str) -> int:
    if not _JAVA_LONG.fullmatch(text):
        raise EvalError(f"{text!r} is not a long")
    value = int(text)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise EvalError(f"{text!r} is out of the long range")
    return value


def _to_double(text: str) -> float:
    stripped = text.strip()  # Java's Double.valueOf trims whitespace
    if not _JAVA_DOUBLE.fullmatch(stripped):
        raise EvalError(f"{text!r} is not a double")
    return float(stripped.rstrip("fFdD").replace("Infinity", "inf"))


def _convert(text: str, like: Value) -> Value:
    """``text`` converted to the type of the other operand (convert_string_expressions)."""
    if isinstance(like, bool):
        return text.lower() == "true"
    if isinstance(like, int):
        return _to_long(text)
    return _to_double(text)


def _compare(lv: Value, rv: Value) -> int:
    """Java ``ComparisonExpression.__compare``: -1, 0 or 1 (``-1`` for incomparable types)."""
    if isinstance(lv, str) and not isinstance(rv, str):
        lv = _convert(lv, rv)
    elif isinstance(rv, str) and not isinstance(lv, str):
        rv = _convert(rv, lv)
    if isinstance(lv, bool) != isinstance(rv, bool):
        return -1
    if isinstance(lv, str) or isinstance(rv, str):
        if not (isinstance(lv, str) and isinstance(rv, str)):
            return -1
        return -1 if lv < rv else (1 if lv > rv else 0)
    assert lv is not None and rv is not None
    return -1 if lv < rv else (1 if lv > rv else 0)


class Node:
    """One expression node."""

    __slots__ = ()

    @property
    def is_boolean(self) -> bool:
        """RocketMQ's BooleanExpression: the node may stand as a condition."""
        return False

    def evaluate(self, props: Mapping[str, str]) -> Value:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Const(Node):
    value: Value

    @property
    def is_boolean(self) -> bool:
        # TRUE, FALSE and NULL are RocketMQ's BooleanConstantExpression
        return self.value is None or isinstance(self.value, bool)

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return self.value

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return repr(v)


@dataclass(frozen=True, slots=True)
class Prop(Node):
    name: str

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return props.get(self.name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Negate(Node):
    """Unary minus of a non-constant: numbers only (a string property yields unknown)."""

    operand: Node

    def evaluate(self, props: Mapping[str, str]) -> Value:
        v = self.operand.evaluate(props)
        return -v if is_number(v) else None

    def __str__(self) -> str:
        return f"-{self.operand}"


@dataclass(frozen=True, slots=True)
class BoolCast(Node):
    """A bare property used as a condition: properties are strings, so never true."""

    operand: Node
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        v = self.operand.evaluate(props)
        if v is None:
            return None
        return v if isinstance(v, bool) else False


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``."""

    op: str
    left: Node
    right: Node
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        op = self.op
        if op in ("=", "<>"):
            equal = self._equal(props)
            return equal if equal is None or op == "=" else not equal
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = _to_double(lv), _to_double(rv)
        c = _compare(lv, rv)
        if op == "<":
            return c < 0
        if op == "<=":
            return c <= 0
        if op == ">":
            return c > 0
        return c >= 0

    def _equal(self, props: Mapping[str, str]) -> bool | None:
        lv = self.left.evaluate(props)
        rv = self.right.evaluate(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if type(lv) is type(rv) and lv == rv:
            return True
        return _compare(lv, rv) == 0

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    operand: Node
    negated: bool = False
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return (self.operand.evaluate(props) is None) != self.negated


@dataclass(frozen=True, slots=True)
class InList(Node):
    """``prop [NOT] IN ('a', 'b')`` (string literals only, as in RocketMQ)."""

    operand: Prop
    values: frozenset[str]
    negated: bool = False
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        v = self.operand.evaluate(props)
        if not isinstance(v, str):
            return None
        return (v in self.values) != self.negated


@dataclass(frozen=True, slots=True)
class StringMatch(Node):
    """5.x's ``[NOT] CONTAINS`` / ``STARTSWITH`` / ``ENDSWITH`` with a string literal."""

    op: str
    operand: Node
    literal: str
    negated: bool = False
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        v = self.operand.evaluate(props)
        if not isinstance(v, str):
            return None
        if self.op == "CONTAINS":
            hit = self.literal in v
        elif self.op == "STARTSWITH":
            hit = v.startswith(self.literal)
        else:
            hit = v.endswith(self.literal)
        return hit != self.negated


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Node
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        v = self.operand.evaluate(props)
        return None if v is None else not v


@dataclass(frozen=True, slots=True)
class And(Node):
    operands: Sequence[Node]
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return _connective(self.operands, props, decisive=False)


@dataclass(frozen=True, slots=True)
class Or(Node):
    operands: Sequence[Node]
    is_boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return _connective(self.operands, props, decisive=True)


def _connective(operands: Sequence[Node], props: Mapping[str, str], *, decisive: bool) -> Value:
    """SQL's three-valued AND (``decisive=False``) and OR (``decisive=True``): the first operand
    whose truth is ``decisive`` decides (the rest are not evaluated); otherwise the result is
    unknown (None) if an operand was unknown, else ``not decisive``."""
    unknown = False
    for node in operands:
        v = node.evaluate(props)
        if v is None:
            unknown = True
        elif bool(v) is decisive:
            return decisive
    return None if unknown else not decisive


def matches(expr: Node, props: Mapping[str, str]) -> bool:
    """True only if ``expr`` evaluates to exactly true for ``props`` (errors and unknown: False)."""
    try:
        return expr.evaluate(props) is True
    except EvalError:
        return False
