"""Java ``String.hashCode()`` for tag codes and IndexFile key hashes.

The ConsumeQueue stores ``TAGS.hashCode()`` as the tags code, subscriptions carry the same value
in ``codeSet``, and the IndexFile slots are chosen by ``abs(key.hashCode())``.  Python must
reproduce Java exactly: ``h = 31 * h + c`` over UTF-16 code units (characters outside the BMP
count as two surrogate units), wrapped to a signed 32-bit int.

Theory of operation.  The broker hashes every stored message's tag and keys, so the function is
memoised with :func:`functools.lru_cache` (tags repeat a lot) and takes an ASCII fast path where
the UTF-8 bytes are the UTF-16 code units.  Golden values: ``"TagA" -> 2598919``, ``"*" -> 42``.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Final

INT32_MIN: Final = -(2**31)
_MASK32: Final = 0xFFFFFFFF


@lru_cache(maxsize=65536)
def java_string_hash(s: str) -> int:
    """Return Java's ``s.hashCode()`` as a signed int32."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & _MASK32
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for c in struct.unpack(f">{len(data) // 2}H", data):
            h = (31 * h + c) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def tags_hash_code(tags: str | None) -> int:
    """The ConsumeQueue tags code: 0 without a tag, else the Java hash of the tag string."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """IndexFile key hash: ``abs(hashCode)``, with ``Integer.MIN_VALUE`` mapped to 0 as Java does."""
    h = java_string_hash(key)
    if h == INT32_MIN:
        return 0
    return -h if h < 0 else h
