"""Reader for fastjson's non-standard JSON, and the standard JSON writer rocketq emits.

Java RocketMQ serializes bodies with fastjson, whose default output is not always JSON: a
``Map<Long, String>`` is written with unquoted numeric keys (``{0:"a",1:"b"}``) and a map keyed by
objects writes the objects themselves as keys
(``{{"brokerName":"b","queueId":0,"topic":"t"}:123}``).

Theory of operation.  :func:`loads` tries the standard library's C parser first and only falls back
to the small recursive-descent parser here when that fails, so standard JSON costs nothing extra.
The lenient parser accepts everything standard JSON does plus, *as object keys*: bare numbers and
identifiers (returned as their text, so ``{0:"a"}`` and ``{"0":"a"}`` parse the same), and objects
or arrays, returned in a hashable *frozen form*: an object becomes a tuple of ``(key, value)``
pairs sorted by key, an array a tuple, recursively (see :func:`freeze` and :func:`thaw`).
:func:`dumps` writes compact JSON with sorted keys and ASCII escapes (what Java's NameServer sends
in standard-JSON mode); dictionaries keyed by frozen objects are written fastjson-style, since
that is the only form Java can read back.

Nesting is limited to :data:`MAX_DEPTH` levels in the lenient parser (and a ``RecursionError`` of
the C parser is turned into the same error), so a hostile body of 100 000 ``[`` is a clean
:class:`JSONFormatError`, never a ``RecursionError`` escaping into the transport.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any, Final

from rocketq.client.errors import ProtocolError


class JSONFormatError(ProtocolError, ValueError):
    """A body is neither standard JSON nor fastjson's dialect of it."""


_WS: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_BARE_KEY: Final = re.compile(r"[A-Za-z_$][\w$]*|-?\d+(?:\.\d+)?")
#: The C string scanner behind json.loads (public at runtime, missing from typeshed).
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_LITERALS: Final = {"true": True, "false": False, "null": None}
FrozenJSON = tuple[Any, ...]
MAX_DEPTH: Final = 200
"""Deepest nesting of objects/arrays the lenient parser accepts (RocketMQ bodies use < 10)."""


def freeze(value: Any) -> Any:
    """The hashable form of a JSON value: dicts become sorted item tuples, lists tuples."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def thaw(key: FrozenJSON) -> dict[str, Any]:
    """Turn a frozen object key back into a dict (nested values stay frozen)."""
    return dict(key)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON or fastjson's dialect (UTF-8 bytes or text)."""
    try:
        text = data if isinstance(data, str) else str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFormatError(f"JSON body is not UTF-8: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise JSONFormatError("JSON nested too deeply") from None
    try:
        value, end = _Parser(text).parse_value(_skip(text, 0))
    except RecursionError:
        raise JSONFormatError("JSON nested too deeply") from None
    end = _skip(text, end)
    if end != len(text):
        raise _err(text, end, "extra data after the JSON value")
    return value


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _err(text: str, pos: int, what: str) -> JSONFormatError:
    return JSONFormatError(f"{what} at position {pos}: {text[max(pos - 20, 0) : pos + 20]!r}")


class _Parser:
    """Recursive-descent parser over a str; positions are indexes into it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _err(self.text, pos, f"JSON nested deeper than {MAX_DEPTH} levels")

    def parse_value(self, pos: int) -> tuple[Any, int]:
        text = self.text
        if pos >= len(text):
            raise _err(text, pos, "unexpected end of JSON")
        ch = text[pos]
        if ch == '"':
            return self._string(pos)
        if ch == "{" or ch == "[":
            self._enter(pos)
            nested: tuple[Any, int] = self._object(pos) if ch == "{" else self._array(pos)
            self.depth -= 1
            return nested
        for word, value in _LITERALS.items():
            if text.startswith(word, pos):
                return value, pos + len(word)
        match = _NUMBER.match(text, pos)
        if match is None:
            raise _err(text, pos, "unexpected character")
        if match.group(1) or match.group(2):
            return float(match.group()), match.end()
        return int(match.group()), match.end()

    def _string(self, pos: int) -> tuple[str, int]:
        try:
            return _scanstring(self.text, pos + 1, True)
        except json.JSONDecodeError as exc:
            raise _err(self.text, pos, f"bad string ({exc.msg})") from None

    def _key(self, pos: int) -> tuple[Any, int]:
        ch = self.text[pos] if pos < len(self.text) else ""
        if ch == '"':
            return self._string(pos)
        if ch in "{[":
            value, end = self.parse_value(pos)
            return freeze(value), end
        match = _BARE_KEY.match(self.text, pos)
        if match is None:
            raise _err(self.text, pos, "bad object key")
        return match.group(), match.end()

    def _object(self, pos: int) -> tuple[dict[Any, Any], int]:
        text = self.text
        result: dict[Any, Any] = {}
        pos = _skip(text, pos + 1)
        if text.startswith("}", pos):
            return result, pos + 1
        while True:
            key, pos = self._key(pos)
            pos = _skip(text, pos)
            if not text.startswith(":", pos):
                raise _err(text, pos, "expected ':'")
            result[key], pos = self.parse_value(_skip(text, pos + 1))
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos = _skip(text, pos + 1)
            elif text.startswith("}", pos):
                return result, pos + 1
            else:
                raise _err(text, pos, "expected ',' or '}'")

    def _array(self, pos: int) -> tuple[list[Any], int]:
        text = self.text
        result: list[Any] = []
        pos = _skip(text, pos + 1)
        if text.startswith("]", pos):
            return result, pos + 1
        while True:
            value, pos = self.parse_value(pos)
            result.append(value)
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos = _skip(text, pos + 1)
            elif text.startswith("]", pos):
                return result, pos + 1
            else:
                raise _err(text, pos, "expected ',' or ']'")


def dumps(value: Any) -> bytes:
    """Compact JSON, sorted keys, ASCII escapes; int keys are written as quoted strings."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    except TypeError:
        pass  # keys that JSON cannot express (frozen objects) or mixed key types
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts).encode()


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: _key_sort(kv[0]))
        out.append("{")
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            if isinstance(key, tuple):
                _write(_thaw_deep(key), out)  # fastjson object key
            else:
                out.append(json.dumps(key if isinstance(key, str) else json.dumps(key)))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        out.append(json.dumps(value))


def _key_sort(key: Any) -> tuple[int, str]:
    return (1, repr(key)) if isinstance(key, tuple) else (0, key if isinstance(key, str) else json.dumps(key))


def _thaw_deep(key: FrozenJSON) -> dict[str, Any]:
    return {k: _thaw_deep(v) if _is_frozen_object(v) else v for k, v in key}


def _is_frozen_object(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) > 0
        and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in value)
    )
