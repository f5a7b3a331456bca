"""Reading half records for a ranged END_TRANSACTION: columns, not decoded messages.

A ranged commit of a Spark micro-batch touches tens of thousands of half records, and each must be
read back, checked (a half message, the right producer group) and turned into its real message.
Decoding every record into a :class:`~rocketq.client.remoting.message.StoredMessage` with a
properties dict costs more than the original send did, so this module reads what the commit needs
straight from the record bytes.

Theory of operation.  :func:`read_halves` gets the buffers of one ConsumeQueue read and returns
:class:`HalfColumns`: one list per field, in half-queue order.  Its bulk path covers records as
rocketq stores a prepared batch (:func:`.ranged.half_properties`): IPv4 hosts, MAGIC_V1, the half
topic, properties ending in ``REAL_TOPIC``/``REAL_QID`` with one destination for all, one
``PGROUP``, no ``TRAN_PREPARED_QUEUE_OFFSET`` (never checked back) and no ``DELAY``.  The records
are joined into one copy; the fixed header fields of all of them are gathered with numpy; bodies
and properties are sliced per record; the property conditions are counted over all properties at
once (``bytes.count`` of ``\\x02KEY\\x01``), and the committed properties are the stored ones with
the ``REAL_*`` suffix cut and ``TRAN_PREPARED_QUEUE_OFFSET`` appended.  Anything else (another
layout, a renewed copy, a delayed message, an inconsistency) is read record by record by
:func:`read_half`, which gives the same columns (the bulk and per-record readers are tested to
agree) and skips unreadable records with an error in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rocketq.broker.transaction.half_message import HALF_TOPIC, parse_real_queue
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import MAGIC_V1, split_stored_message
from rocketq.client.remoting.msgid import bytes_to_ip
from rocketq.client.remoting.properties import (
    MessageConst,
    decode_properties,
    encode_properties_bytes,
    property_spans,
)

__all__ = ["HalfColumns", "host_of", "read_half", "read_halves"]

log = logging.getLogger(__name__)

_REAL_TOPIC: Final = MessageConst.REAL_TOPIC
_REAL_QID: Final = MessageConst.REAL_QUEUE_ID
_ORIGIN: Final = MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET
_GROUP: Final = MessageConst.PRODUCER_GROUP
_DELAY: Final = MessageConst.DELAY_TIME_LEVEL
_LOOKED_UP: Final = (_REAL_TOPIC, _REAL_QID, _GROUP, _ORIGIN, _DELAY)
_BULK_MIN: Final = 8
_HALF_TOPIC_B: Final = HALF_TOPIC.encode()
_HDR: Final = 88  # record header size with IPv4 hosts

Host = tuple[bytes, int]  # (IP bytes, port) as stored


@dataclass(slots=True, eq=False)
class HalfColumns:
    """Half records as columns, in half-queue order.

    ``reals`` is the ``(REAL_TOPIC, REAL_QID)`` of each record (None if missing or malformed),
    ``origins`` the half offset of the transaction's first copy (``TRAN_PREPARED_QUEUE_OFFSET``
    when valid, else the record's own offset), ``committed`` the properties its real message gets
    (``REAL_*`` dropped, ``TRAN_PREPARED_QUEUE_OFFSET`` = origin).
    """

    queue_offsets: list[int] = field(default_factory=list)
    origins: list[int] = field(default_factory=list)
    physical_offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    sys_flags: list[int] = field(default_factory=list)
    born_timestamps: list[int] = field(default_factory=list)
    reconsume_times: list[int] = field(default_factory=list)
    born_hosts: list[Host] = field(default_factory=list)
    store_hosts: list[Host] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    reals: list[tuple[str, int] | None] = field(default_factory=list)
    groups: list[str | None] = field(default_factory=list)
    delayed: list[bool] = field(default_factory=list)
    committed: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def extend(self, other: HalfColumns) -> None:
        for name in self.__slots__:  # type: ignore[attr-defined]
            getattr(self, name).extend(getattr(other, name))

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` records."""
        for name in self.__slots__:  # type: ignore[attr-defined]
            del getattr(self, name)[n:]


_hosts: dict[Host, tuple[str, int]] = {}


def host_of(raw: Host) -> tuple[str, int]:
    """The (IP text, port) of a stored host (cached: a broker sees few hosts)."""
    host = _hosts.get(raw)
    if host is None:
        if len(_hosts) > 1024:
            _hosts.clear()
        host = _hosts[raw] = (bytes_to_ip(raw[0]), raw[1])
    return host


def read_half(buf: Any, into: HalfColumns) -> None:
    """Append the record in ``buf`` to ``into`` (the same readings as :mod:`.half_message`'s helpers)."""
    raw = split_stored_message(buf)
    spans = property_spans(raw.properties, _LOOKED_UP)
    values: dict[str, str | None]
    if spans is None:
        decoded = decode_properties(raw.properties)
        values = {k: decoded.get(k) for k in _LOOKED_UP}
    else:
        values = {k: v[2] for k, v in spans.items()}
    origin = raw.queue_offset
    text = values.get(_ORIGIN)
    if text is not None:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if 0 <= value <= raw.queue_offset:
            origin = value
    if spans is None:
        props = decode_properties(raw.properties)
        props.pop(_REAL_TOPIC, None)
        props.pop(_REAL_QID, None)
        props[_ORIGIN] = str(origin)
        committed = encode_properties_bytes(props)
    else:
        pieces, pos, data = [], 0, raw.properties
        for start, end in sorted(spans[k][:2] for k in (_REAL_TOPIC, _REAL_QID, _ORIGIN) if k in spans):
            pieces.append(data[pos:start])
            pos = end
        pieces.append(data[pos:])
        pieces.append(f"{_ORIGIN}\x01{origin}\x02".encode())
        committed = b"".join(pieces)
    into.queue_offsets.append(raw.queue_offset)
    into.origins.append(origin)
    into.physical_offsets.append(raw.physical_offset)
    into.sizes.append(raw.total_size)
    into.flags.append(raw.flag)
    into.sys_flags.append(raw.sys_flag)
    into.born_timestamps.append(raw.born_timestamp)
    into.reconsume_times.append(raw.reconsume_times)
    into.born_hosts.append(raw.born_host)
    into.store_hosts.append(raw.store_host)
    into.bodies.append(raw.body)
    into.topics.append(raw.topic)
    into.reals.append(parse_real_queue(values.get(_REAL_TOPIC), values.get(_REAL_QID)))
    into.groups.append(values.get(_GROUP))
    into.delayed.append(values.get(_DELAY) is not None)
    into.committed.append(committed)


def read_halves(buffers: Sequence[Any]) -> HalfColumns:
    """The records of ``buffers`` as columns: in bulk when they are the usual ones (see the module)."""
    fast = _read_bulk(buffers) if len(buffers) >= _BULK_MIN else None
    if fast is not None:
        return fast
    out = HalfColumns()
    for buf in buffers:
        try:
            read_half(buf, out)
        except MessageFormatError as exc:
            log.error("unreadable half record skipped: %s", exc)
    return out


def _gather(a: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64], width: int, dtype: str) -> npt.NDArray[Any]:
    """The ``width``-byte field at ``pos`` of every record, viewed as ``dtype`` (big-endian)."""
    out: npt.NDArray[Any] = a[pos[:, None] + np.arange(width)].view(dtype).ravel()
    return out


def _needle(key: str) -> bytes:
    return f"\x02{key}\x01".encode()


def _read_bulk(buffers: Sequence[Any]) -> HalfColumns | None:
    n = len(buffers)
    data = b"".join(buffers)
    lens = np.fromiter(map(len, buffers), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    a = np.frombuffer(data, dtype=np.uint8)
    if (lens < _HDR + 3 + len(_HALF_TOPIC_B)).any():
        return None
    if (_gather(a, starts, 4, ">i4") != lens).any() or (_gather(a, starts + 4, 4, ">u4") != MAGIC_V1).any():
        return None
    sys_flags = _gather(a, starts + 36, 4, ">i4")
    if (sys_flags & 0x30).any():
        return None  # an IPv6 host: another header layout
    body_len = _gather(a, starts + 84, 4, ">i4")
    tpos = starts + _HDR + body_len
    ends = starts + lens
    if (body_len < 0).any() or (tpos + 3 + len(_HALF_TOPIC_B) > ends).any():
        return None
    topic = np.frombuffer(bytes((len(_HALF_TOPIC_B),)) + _HALF_TOPIC_B, dtype=np.uint8)
    if (a[tpos[:, None] + np.arange(len(topic))] != topic).any():
        return None
    ppos = tpos + len(topic) + 2
    if (ppos + _gather(a, tpos + len(topic), 2, ">i2") != ends).any():
        return None
    props = [data[p:e] for p, e in zip(ppos.tolist(), ends.tolist(), strict=True)]
    if not all(map(bytes.endswith, props, repeat(b"\x02"))):
        return None
    spans = property_spans(props[0], (_REAL_TOPIC, _REAL_QID, _GROUP))
    if not spans or _REAL_TOPIC not in spans or _REAL_QID not in spans or _GROUP not in spans:
        return None
    suffix = props[0][spans[_REAL_TOPIC][0]:]
    if spans[_REAL_TOPIC][1] != spans[_REAL_QID][0] or spans[_REAL_QID][1] != len(props[0]):
        return None  # REAL_* do not end the properties
    real = parse_real_queue(spans[_REAL_TOPIC][2], spans[_REAL_QID][2])
    if real is None or not all(map(bytes.endswith, props, repeat(suffix))):
        return None
    joined = b"\x02" + b"\x02".join(props)
    group = spans[_GROUP][2]
    if joined.count(_needle(_ORIGIN)) or joined.count(_needle(_DELAY)) \
            or joined.count(_needle(_REAL_TOPIC)) != n or joined.count(_needle(_REAL_QID)) != n \
            or joined.count(_needle(_GROUP)) != n or joined.count(f"\x02{_GROUP}\x01{group}\x02".encode()) != n:
        return None
    cut = len(suffix)
    queue_offsets = _gather(a, starts + 20, 8, ">i8").tolist()
    return HalfColumns(
        queue_offsets=queue_offsets, origins=list(queue_offsets),
        physical_offsets=_gather(a, starts + 28, 8, ">i8").tolist(), sizes=lens.tolist(),
        flags=_gather(a, starts + 16, 4, ">i4").tolist(), sys_flags=sys_flags.tolist(),
        born_timestamps=_gather(a, starts + 40, 8, ">i8").tolist(),
        reconsume_times=_gather(a, starts + 72, 4, ">i4").tolist(),
        born_hosts=list(zip(_gather(a, starts + 48, 4, "V4").tolist(), _gather(a, starts + 52, 4, ">i4").tolist(),
                            strict=True)),
        store_hosts=list(zip(_gather(a, starts + 64, 4, "V4").tolist(), _gather(a, starts + 68, 4, ">i4").tolist(),
                             strict=True)),
        bodies=[data[b:e] for b, e in zip((starts + _HDR).tolist(), tpos.tolist(), strict=True)],
        topics=[HALF_TOPIC] * n, reals=[real] * n, groups=[group] * n, delayed=[False] * n,
        committed=[p[:-cut] + b"%s\x01%d\x02" % (_ORIGIN.encode(), qo) for p, qo in zip(props, queue_offsets, strict=True)],
    )
