"""SQL92 property filter: tokenizer and recursive-descent parser (never ``eval``).

The grammar is RocketMQ's ``SelectorParser.jj`` (ActiveMQ's JMS selector without LIKE, arithmetic,
hex/octal literals), plus ``!=`` as a synonym of ``<>`` and 5.x's ``[NOT] CONTAINS / STARTSWITH /
ENDSWITH``.  Keywords are case-insensitive; property names keep their case::

    or          := and (OR and)*
    and         := equality (AND equality)*
    equality    := comparison ( ('=' | '<>' | '!=') comparison | IS [NOT] NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string (',' string)* ')'
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := string | integer | decimal | TRUE | FALSE | NULL | identifier | '(' or ')'

Literals: ``'it''s'`` (a doubled quote escapes), integers ``0`` / ``42`` / ``42L`` (Java long
range), decimals ``1.5`` / ``.5`` / ``5.`` / ``1e3``.  Comments ``-- …`` and ``/* … */``.  The
semantic checks are RocketMQ's: ``<``-style operators and BETWEEN bounds take numbers, never a
string or boolean literal; ``= NULL`` must be written ``IS NULL``; BETWEEN's bounds must be in
order; IN needs a property on its left.  Every error is a :class:`Sql92ParseError` carrying the
0-based character position, what was expected and what was found.  Compiled expressions are cached
(:func:`compile_sql92`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rocketq.broker.filter.expression import (
    And,
    BoolCast,
    Compare,
    Const,
    InList,
    IsNull,
    Negate,
    Node,
    Not,
    Or,
    Prop,
    StringMatch,
    is_number,
)

__all__ = ["MAX_EXPRESSION_LENGTH", "Sql92ParseError", "compile_sql92", "parse_sql92"]

MAX_EXPRESSION_LENGTH = 64 * 1024
MAX_NESTING = 64
_KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
_STRING_OPS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_NUMBER = re.compile(r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[lL]?", re.ASCII)
_DIGITS = frozenset("0123456789")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_OPERATORS = ("<>", "!=", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-")
_LONG_MAX = 2**63 - 1


class Sql92ParseError(ValueError):
    """A filter expression that does not parse (answered with SUBSCRIPTION_PARSE_FAILED)."""

    def __init__(self, position: int, expected: str, found: str) -> None:
        super().__init__(f"SQL92 expression error at position {position}: expected {expected}, found {found}")
        self.position = position
        self.expected = expected
        self.found = found


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "KW", "ID", "STR", "INT", "DEC", "OP", "EOF"
    text: str  # keyword upper-cased, operator, identifier, decoded string, number text
    pos: int

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of expression"
        if self.kind == "STR":
            return "string '" + self.text.replace("'", "''") + "'"
        return repr(self.text)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; Sql92ParseError on a character that starts no token."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r\f":
            i += 1
        elif text.startswith("--", i):
            nl = [p for p in (text.find("\n", i), text.find("\r", i)) if p >= 0]
            i = min(nl) + 1 if nl else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise Sql92ParseError(i, "'*/' closing the comment", "end of expression")
            i = end + 2
        elif c == "'":
            i = _string(text, i, tokens)
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            i = _number(text, i, tokens)
        elif m := _IDENT.match(text, i):
            word = m.group()
            upper = word.upper()
            tokens.append(Token("KW", upper, i) if upper in _KEYWORDS else Token("ID", word, i))
            i = m.end()
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise Sql92ParseError(i, "an operator, literal or property name", f"character {c!r}")
            tokens.append(Token("OP", op, i))
            i += len(op)
    tokens.append(Token("EOF", "", n))
    return tokens


def _string(text: str, start: int, tokens: list[Token]) -> int:
    out: list[str] = []
    i = start + 1
    while True:
        end = text.find("'", i)
        if end < 0:
            raise Sql92ParseError(start, "a closing quote for the string", "end of expression")
        out.append(text[i:end])
        if text.startswith("''", end):
            out.append("'")
            i = end + 2
            continue
        tokens.append(Token("STR", "".join(out), start))
        return end + 1


def _number(text: str, start: int, tokens: list[Token]) -> int:
    m = _NUMBER.match(text, start)
    assert m is not None  # starts with a digit, or '.' and a digit
    literal = m.group()
    if any(ch in literal for ch in ".eE"):
        tokens.append(Token("DEC", literal, start))
    else:
        digits = literal.rstrip("lL")
        if len(digits) > 1 and digits[0] == "0":
            raise Sql92ParseError(start, "a decimal integer without leading zeros", repr(literal))
        if int(digits) > _LONG_MAX:
            raise Sql92ParseError(start, "an integer within the Java long range", repr(literal))
        tokens.append(Token("INT", digits, start))
    return m.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    # -- token helpers -----------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.text == text)

    def take(self) -> Token:
        t = self.tok
        if t.kind != "EOF":
            self.i += 1
        return t

    def expect(self, kind: str, text: str | None, what: str) -> Token:
        if not self.at(kind, text):
            raise self.error(what)
        return self.take()

    def error(self, expected: str, tok: Token | None = None) -> Sql92ParseError:
        t = tok or self.tok
        return Sql92ParseError(t.pos, expected, t.describe())

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"at most {MAX_NESTING} nested parentheses or unary operators")

    # -- grammar -----------------------------------------------------------------------------
    def parse(self) -> Node:
        if self.at("EOF"):
            raise self.error("an expression")
        node = self.or_expr()
        if not self.at("EOF"):
            raise self.error("AND, OR, a comparison operator or end of expression")
        return self.as_boolean(node, self.tokens[0])

    def as_boolean(self, node: Node, where: Token) -> Node:
        if node.is_boolean:
            return node
        if isinstance(node, Prop):
            return BoolCast(node)
        raise self.error("a condition (the expression does not result in a boolean value)", where)

    def or_expr(self) -> Node:
        first = self.tok
        operands = [self.and_expr()]
        while self.at("KW", "OR"):
            self.take()
            where = self.tok
            operands.append(self.as_boolean(self.and_expr(), where))
        if len(operands) == 1:
            return operands[0]
        operands[0] = self.as_boolean(operands[0], first)
        return Or(tuple(operands))

    def and_expr(self) -> Node:
        first = self.tok
        operands = [self.equality()]
        while self.at("KW", "AND"):
            self.take()
            where = self.tok
            operands.append(self.as_boolean(self.equality(), where))
        if len(operands) == 1:
            return operands[0]
        operands[0] = self.as_boolean(operands[0], first)
        return And(tuple(operands))

    def equality(self) -> Node:
        left_tok = self.tok
        left = self.comparison()
        while True:
            if self.at("OP", "=") or self.at("OP", "<>") or self.at("OP", "!="):
                op = "=" if self.take().text == "=" else "<>"
                right_tok = self.tok
                right = self.comparison()
                self.check_equal_operand(left, left_tok)
                self.check_equal_operand(right, right_tok)
                if (
                    isinstance(left, Const)
                    and isinstance(right, Const)
                    and left.is_boolean != right.is_boolean
                ):
                    raise self.error(
                        f"operands that can be compared ({left} cannot be compared with {right})", left_tok
                    )
                left = Compare(op, left, right)
            elif self.at("KW", "IS"):
                self.take()
                negated = bool(self.at("KW", "NOT") and self.take())
                self.expect("KW", "NULL", "NULL" if negated else "NULL or NOT NULL")
                left = IsNull(left, negated)
            else:
                return left

    def comparison(self) -> Node:
        left_tok = self.tok
        left = self.unary()
        while True:
            t = self.tok
            if t.kind == "OP" and t.text in ("<", "<=", ">", ">="):
                self.take()
                right_tok = self.tok
                right = self.unary()
                self.check_ordered_operand(left, left_tok)
                self.check_ordered_operand(right, right_tok)
                left = Compare(t.text, left, right)
                continue
            negated = (
                t.kind == "KW"
                and t.text == "NOT"
                and self.peek().kind == "KW"
                and self.peek().text in ("BETWEEN", "IN", *_STRING_OPS)
            )
            if negated:
                self.take()
                t = self.tok
            if self.at("KW", "BETWEEN"):
                left = self.between(left, left_tok, negated)
            elif self.at("KW", "IN"):
                left = self.in_list(left, left_tok, negated)
            elif t.kind == "KW" and t.text in _STRING_OPS:
                self.take()
                literal = self.expect("STR", None, f"a string literal after {t.text}").text
                left = StringMatch(t.text, left, literal, negated)
            else:
                return left

    def between(self, value: Node, value_tok: Token, negated: bool) -> Node:
        self.take()
        low_tok = self.tok
        low = self.unary()
        self.expect("KW", "AND", "AND between the BETWEEN bounds")
        high_tok = self.tok
        high = self.unary()
        for node, where in ((value, value_tok), (low, low_tok), (high, high_tok)):
            self.check_ordered_operand(node, where)
        if (
            isinstance(low, Const)
            and isinstance(high, Const)
            and is_number(low.value)
            and is_number(high.value)
            and low.value > high.value
        ):
            raise self.error(
                f"BETWEEN bounds in order (left value {low} must be <= right value {high})", low_tok
            )
        if negated:
            return Or((Compare("<", value, low), Compare(">", value, high)))
        return And((Compare(">=", value, low), Compare("<=", value, high)))

    def in_list(self, left: Node, left_tok: Token, negated: bool) -> Node:
        self.take()
        if not isinstance(left, Prop):
            raise self.error("a property name on the left of IN", left_tok)
        self.expect("OP", "(", "'(' after IN")
        values = [self.expect("STR", None, "a string literal in the IN list").text]
        while self.at("OP", ","):
            self.take()
            values.append(self.expect("STR", None, "a string literal in the IN list").text)
        self.expect("OP", ")", "',' or ')' in the IN list")
        return InList(left, frozenset(values), negated)

    def unary(self) -> Node:
        t = self.tok
        if (t.kind == "OP" and t.text in ("+", "-")) or (t.kind == "KW" and t.text == "NOT"):
            self.take()
            self.nest()
            operand_tok = self.tok
            operand = self.unary()
            self.depth -= 1
            if t.text == "+":
                return operand
            if t.text == "NOT":
                return Not(self.as_boolean(operand, operand_tok))
            if (
                isinstance(operand, Const)
                and isinstance(operand.value, (int, float))
                and not isinstance(operand.value, bool)
            ):
                return Const(-operand.value)
            return Negate(operand)
        return self.primary()

    def primary(self) -> Node:
        t = self.tok
        if t.kind == "STR":
            self.take()
            return Const(t.text)
        if t.kind == "INT":
            self.take()
            return Const(int(t.text))
        if t.kind == "DEC":
            self.take()
            return Const(float(t.text))
        if t.kind == "KW" and t.text in ("TRUE", "FALSE", "NULL"):
            self.take()
            return Const(None if t.text == "NULL" else t.text == "TRUE")
        if t.kind == "ID":
            self.take()
            return Prop(t.text)
        if t.kind == "OP" and t.text == "(":
            self.take()
            self.nest()
            node = self.or_expr()
            self.depth -= 1
            self.expect("OP", ")", "')'")
            return node
        raise self.error("a value (string, number, TRUE, FALSE, NULL, property name or '(')")

    # -- RocketMQ's semantic checks ------------------------------------------------------------
    def check_equal_operand(self, node: Node, where: Token) -> None:
        if isinstance(node, Const) and node.value is None:
            raise self.error("a comparable value ('= NULL' is never true: use IS NULL)", where)

    def check_ordered_operand(self, node: Node, where: Token) -> None:
        if isinstance(node, Const):
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                return
            raise self.error(
                f"a number or property (value {node} cannot be compared with <, >, BETWEEN)", where
            )
        if node.is_boolean:
            raise self.error(
                "a number or property (a condition cannot be compared with <, >, BETWEEN)", where
            )


def parse_sql92(text: str) -> Node:
    """Parse ``text``; raise :class:`Sql92ParseError` (position, expected, found) if it is invalid."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise Sql92ParseError(
            MAX_EXPRESSION_LENGTH,
            f"an expression of at most {MAX_EXPRESSION_LENGTH} characters",
            f"{len(text)} characters",
        )
    return _Parser(text).parse()


@lru_cache(maxsize=512)
def _compile_cached(text: str) -> Node | Sql92ParseError:
    try:
        return parse_sql92(text)
    except Sql92ParseError as exc:
        return exc


def compile_sql92(text: str) -> Node:
    """:func:`parse_sql92` with a cache (subscriptions repeat on every pull)."""
    result = _compile_cached(text)
    if isinstance(result, Sql92ParseError):
        # a fresh exception each time: re-raising the cached one would grow its traceback
        raise Sql92ParseError(result.position, result.expected, result.found)
    return result
