"""Tests of Java String.hashCode: golden values and a reference model over UTF-16 code units."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.remoting.javahash import index_key_hash, java_string_hash, tags_hash_code


def _reference(s: str) -> int:
    """Textbook definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, as a signed int32."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    total: int = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


def test_golden_values() -> None:
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("*") == 42
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276  # wraps negative
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00 == 1772899
    assert java_string_hash("é") == 0xE9


def test_tags_code_and_index_hash() -> None:
    assert tags_hash_code(None) == 0 and tags_hash_code("") == 0 and tags_hash_code("TagA") == 2598919
    assert index_key_hash("Hello World") == 862545276
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0  # Math.abs(MIN_VALUE) < 0 -> 0


@given(st.text())
def test_matches_reference(s: str) -> None:
    h = java_string_hash(s)
    assert h == _reference(s)
    assert -(2**31) <= h < 2**31
    assert index_key_hash(s) == (0 if h == -(2**31) else abs(h))
