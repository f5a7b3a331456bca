"""rocketq.server.properties: the Java ``Properties.load`` grammar shared by every server config.

The expected results of the hand-written cases are what Java 17's ``Properties.load(Reader)``
gives for the same text (values without their trailing blanks, the one documented difference).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.server.properties import PropertiesSyntaxError, parse_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1\nb : two\nc three\n", {"a": "1", "b": "two", "c": "three"}),
        ("# c\n! c2\n\n   \n  e = spaced value  \n", {"e": "spaced value"}),
        ("a=b=c\n!x\nflag", {"a": "b=c", "flag": ""}),
        ("d=x\\\n  y\n", {"d": "xy"}),
        ("a=1\\\n# not a comment\n", {"a": "1# not a comment"}),
        ("a=1\\\n\nb=2\n", {"a": "1", "b": "2"}),
        ("a=1\\\\\nb=2\n", {"a": "1\\", "b": "2"}),
        ("k\\=ey=v\\:al\nk\\ 2 = v\\\\\n", {"k=ey": "v:al", "k 2": "v\\"}),
        ("x=\\u0041\\t\\n\\q\n", {"x": "A\t\nq"}),
        ("p = C:\\\\store\\\\a\n", {"p": "C:\\store\\a"}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("a\tb\fc\n", {"a": "b\fc"}),
        ("key=\\\n   \\\n  end\n", {"key": "end"}),
        ("  :v\n", {"": "v"}),
        ("a=1\na=2\n", {"a": "2"}),
        ("\\\n# a comment after an empty continued line\n", {}),
    ],
)
def test_java_properties_grammar(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_is_an_error() -> None:
    with pytest.raises(PropertiesSyntaxError, match="uxxxx"):
        parse_properties("a=\\u00zz\n")


def _escape(text: str, *, key: bool) -> str:
    """What Java's ``Properties.store`` writes for ``text`` (every blank escaped in keys)."""
    out = []
    for index, char in enumerate(text):
        if char in "\\=:#!":
            out.append("\\" + char)
        elif char == " " and (key or index == 0):
            out.append("\\ ")
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif not char.isprintable():
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


_CHARS = st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])
_KEYS = st.text(_CHARS, min_size=1, max_size=12)
_VALUES = st.text(_CHARS, max_size=20).map(lambda value: value.rstrip(" \t\f"))


@given(st.dictionaries(_KEYS, _VALUES, max_size=8), st.sampled_from(["=", ":", " ", " = "]))
def test_stored_properties_read_back(props: dict[str, str], separator: str) -> None:
    text = "# written by a test\n" + "".join(
        f"{_escape(key, key=True)}{separator}{_escape(value, key=False)}\n" for key, value in props.items()
    )
    assert parse_properties(text) == props
