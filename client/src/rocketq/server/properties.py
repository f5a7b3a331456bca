"""The one reader of Java ``.properties`` text, shared by the broker, NameServer and controller configs.

A RocketMQ user's ``broker.conf``, ``namesrv.properties`` and ``controller.conf`` must load
unchanged, so this follows the grammar of Java's ``Properties.load(Reader)``:

* a logical line may span several natural lines: a line ending in an odd number of backslashes
  continues on the next one, whose leading blanks are skipped;
* blank lines and lines whose first non-blank character is ``#`` or ``!`` are comments (a
  continuation line is a comment only if nothing but blanks and the backslash came before it);
* the key runs to the first unescaped ``=``, ``:`` or blank; blanks around one ``=`` or ``:``
  separator are skipped, so ``key=value``, ``key: value`` and ``key value`` are the same;
* escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``, and a backslash before any other character stands
  for that character (``\\=``, ``\\:``, ``\\ `` and ``\\\\`` in keys and values);
* a key given twice keeps its last value.

One deliberate difference: trailing blanks of a value are dropped (Java keeps them), because no
RocketMQ key takes a value ending in blanks and a stray space after ``true`` or a port number is
an easy mistake in a hand-written file.
"""

from __future__ import annotations

import re

__all__ = ["PropertiesSyntaxError", "parse_properties"]

_BLANKS = " \t\f"
_SEPARATORS = "=:"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """A malformed ``\\uXXXX`` escape (the only syntax error Java's reader reports)."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text into ``{key: value}`` (later keys win)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_line(line)
        result[_unescape(key)] = _unescape(value).rstrip(_BLANKS)
    return result


def _trailing_backslashes(line: str) -> int:
    return len(line) - len(line.rstrip("\\"))


def _logical_lines(text: str) -> list[str]:
    """Join continued lines, drop comments and blank lines; escapes are still raw."""
    lines: list[str] = []
    pending: str | None = None
    naturals = _LINE_BREAK.split(text)
    if len(naturals) > 1 and not naturals[-1] and not text.endswith("\r\n"):
        # Java ends the text at its last \n or \r: a continued empty line just before it still counts
        naturals.pop()
    for natural in naturals:
        stripped = natural.lstrip(_BLANKS)
        if not pending and (not stripped or stripped[0] in "#!"):
            pending = None  # as Java, a comment may follow a continued line that is still empty
            continue
        if pending is not None and not stripped:
            lines.append(pending)  # a blank line ends a continuation
            pending = None
            continue
        joined = stripped if pending is None else pending + stripped
        if _trailing_backslashes(joined) % 2 == 1:
            pending = joined[:-1]
            continue
        lines.append(joined)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _split_line(line: str) -> tuple[str, str]:
    """Split one logical line at the first unescaped separator: (raw key, raw value)."""
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in _SEPARATORS or char in _BLANKS:
            break
        index += 1
    key, rest = line[:index], line[index:]
    rest = rest.lstrip(_BLANKS)
    if rest and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append(char if char != "\\" else "")
            index += 1
            continue
        escaped = raw[index + 1]
        if escaped == "u":
            digits = raw[index + 2 : index + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesSyntaxError(f"malformed \\uxxxx escape: {raw[index : index + 6]!r}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)
