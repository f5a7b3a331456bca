"""Remote-address white-list patterns of RocketMQ's plain ACL (RemoteAddressStrategyFactory).

A pattern from ``plain_acl.yml`` (``globalWhiteRemoteAddresses`` or an account's
``whiteRemoteAddress``) is compiled once into an :class:`AddressPattern`; ``matches(ip)`` tells
whether a peer's IP address (no port) is covered.  The forms, as in RocketMQ 4.x:

* blank: matches nothing; ``*``, ``*.*.*.*`` (or the IPv6 ``*:*:*:*:*:*:*:*``): matches everything;
* ``192.168.0.{1,2,3}``: the listed values of the last group; ``192.168.0.1,10.0.0.2``: a list;
* ``192.168.*.*``, ``192.168.1-10.*``, ``192.168.0.10-20``: ``*`` or ``a-b`` in a group (the
  groups after the first such group must be ``*`` as well);
* ``192.168.0.1``: one address (IPv4 or IPv6, compared in expanded form).

A malformed pattern raises :class:`AclConfigError` naming it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rocketq.client.errors import RocketQError

__all__ = ["AclConfigError", "AddressPattern", "compile_address_pattern"]


class AclConfigError(RocketQError):
    """plain_acl.yml (or an ACL admin request) holds something that is not a valid rule."""


@dataclass(frozen=True)
class AddressPattern:
    """A compiled white-list pattern; ``source`` is the text it was compiled from."""

    source: str
    match_all: bool = False
    exact: frozenset[str] = frozenset()
    # range form: fixed leading groups, then per-group inclusive (low, high) bounds
    prefix: tuple[int, ...] = ()
    ranges: tuple[tuple[int, int], ...] = ()

    def matches(self, ip: str) -> bool:
        if self.match_all:
            return True
        normal = _normalize(ip)
        if normal is None:
            return False
        if self.exact:
            return normal in self.exact
        if not self.ranges:
            return False
        try:
            addr = ipaddress.IPv4Address(normal)
        except ValueError:
            return False
        groups = addr.packed
        n = len(self.prefix)
        if tuple(groups[:n]) != self.prefix:
            return False
        return all(lo <= g <= hi for g, (lo, hi) in zip(groups[n:], self.ranges, strict=True))


def _normalize(ip: str) -> str | None:
    try:
        return ipaddress.ip_address(ip.strip().strip("[]")).exploded
    except ValueError:
        return None


def _one(text: str, source: str) -> str:
    normal = _normalize(text)
    if normal is None:
        raise AclConfigError(f"bad address {text!r} in white-list pattern {source!r}")
    return normal


def _range_group(text: str, source: str) -> tuple[int, int]:
    try:
        if text == "*":
            return 0, 255
        if "-" in text:
            lo_s, hi_s = text.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
        else:
            lo = hi = int(text)
    except ValueError:
        raise AclConfigError(f"bad group {text!r} in white-list pattern {source!r}") from None
    if not 0 <= lo <= hi <= 255:
        raise AclConfigError(f"bad range {text!r} in white-list pattern {source!r}")
    return lo, hi


def compile_address_pattern(source: str | None) -> AddressPattern:
    """Compile one white-list pattern (see the module docstring)."""
    text = (source or "").strip()
    if not text:
        return AddressPattern(source="")
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressPattern(source=text, match_all=True)
    if text.endswith("}"):
        head, _, tail = text.rpartition("{")
        if not head or head[-1] not in ".:":
            raise AclConfigError(f"bad white-list pattern {text!r}: '{{...}}' must be the last group")
        values = [v.strip() for v in tail[:-1].split(",") if v.strip()]
        return AddressPattern(source=text, exact=frozenset(_one(head + v, text) for v in values))
    if "," in text:
        return AddressPattern(
            source=text, exact=frozenset(_one(v, text) for v in text.split(",") if v.strip())
        )
    if "*" in text or "-" in text:
        groups = [g.strip() for g in text.split(".")]
        if len(groups) != 4:
            raise AclConfigError(f"bad white-list pattern {text!r}: an IPv4 range needs 4 groups")
        first = next(i for i, g in enumerate(groups) if g == "*" or "-" in g)
        if first == 0 or any(g != "*" for g in groups[first + 1 :]):
            raise AclConfigError(f"bad white-list pattern {text!r}: only '*' may follow a range group")
        prefix = tuple(_range_group(g, text)[0] for g in groups[:first])
        ranges = tuple(_range_group(g, text) for g in groups[first:])
        return AddressPattern(source=text, prefix=prefix, ranges=ranges)
    return AddressPattern(source=text, exact=frozenset({_one(text, text)}))
