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
:func:`read_half`, which decodes it in full with :mod:`.half_message`'s helpers and gives the same
columns (the two readers are tested to agree); unreadable records are skipped with an error in
the log.  Hosts are kept as (IP text, port), decoded once per distinct value.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rocketq.broker.transaction.half_message import HALF_TOPIC, origin_offset, parse_real_queue, real_queue
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.msgid import bytes_to_ip
from rocketq.client.remoting.properties import MessageConst, encode_properties_bytes, find_property
from rocketq.client.remoting.record_layout import (
    HOST_V6_FLAGS,
    IPV4,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    MIN_TAIL_SIZE,
    PORT_SIZE,
    PROPERTIES_LENGTH_SIZE,
    header_dtype_spec,
)

__all__ = ["HalfColumns", "read_half", "read_halves"]

log = logging.getLogger(__name__)

_REAL_TOPIC: Final = MessageConst.REAL_TOPIC
_REAL_QID: Final = MessageConst.REAL_QUEUE_ID
_ORIGIN: Final = MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET
_GROUP: Final = MessageConst.PRODUCER_GROUP
_DELAY: Final = MessageConst.DELAY_TIME_LEVEL
_BULK_MIN: Final = 8
_HALF_TOPIC_B: Final = HALF_TOPIC.encode()
_HDR: Final = IPV4_HEADER_SIZE
#: Field name -> (position, width, numpy format) in an IPv4 record header.
_FIELDS: Final = {
    name: (IPV4.positions[name], np.dtype(fmt).itemsize, fmt) for name, fmt in header_dtype_spec(IPV4.kind)
}

Host = tuple[str, int]  # (IP text, port)


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
        for name in self.__slots__:
            getattr(self, name).extend(getattr(other, name))

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` records."""
        for name in self.__slots__:
            del getattr(self, name)[n:]


def read_half(buf: Any, into: HalfColumns) -> None:
    """Append the record in ``buf`` to ``into`` (decoded in full: the readings of :mod:`.half_message`)."""
    msg = decode_stored_message(buf, decompress=False)
    props = dict(msg.properties)
    origin = origin_offset(msg)
    props.pop(_REAL_TOPIC, None)
    props.pop(_REAL_QID, None)
    props[_ORIGIN] = str(origin)
    into.queue_offsets.append(msg.queue_offset)
    into.origins.append(origin)
    into.physical_offsets.append(msg.physical_offset)
    into.sizes.append(msg.total_size)
    into.flags.append(msg.flag)
    into.sys_flags.append(msg.sys_flag)
    into.born_timestamps.append(msg.born_timestamp)
    into.reconsume_times.append(msg.reconsume_times)
    into.born_hosts.append(msg.born_host)
    into.store_hosts.append(msg.store_host)
    into.bodies.append(msg.body)
    into.topics.append(msg.topic)
    into.reals.append(real_queue(msg))
    into.groups.append(msg.properties.get(_GROUP))
    into.delayed.append(_DELAY in msg.properties)
    into.committed.append(encode_properties_bytes(props))


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


def _field(a: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], name: str) -> npt.NDArray[Any]:
    """Header field ``name`` of every (IPv4) record starting at ``starts``."""
    pos, width, fmt = _FIELDS[name]
    return _gather(a, starts + pos, width, fmt)


def _needle(key: str) -> bytes:
    return f"\x02{key}\x01".encode()


def _read_bulk(buffers: Sequence[Any]) -> HalfColumns | None:
    n = len(buffers)
    data = b"".join(buffers)
    lens = np.fromiter(map(len, buffers), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    a = np.frombuffer(data, dtype=np.uint8)
    if (lens < _HDR + MIN_TAIL_SIZE + len(_HALF_TOPIC_B)).any():
        return None
    if (_field(a, starts, "total_size") != lens).any() or (_field(a, starts, "magic") != MAGIC_V1).any():
        return None
    sys_flags = _field(a, starts, "sys_flag")
    if (sys_flags & HOST_V6_FLAGS).any():
        return None  # an IPv6 host: another header layout
    body_len = _field(a, starts, "body_length")
    tpos = starts + _HDR + body_len
    ends = starts + lens
    if (body_len < 0).any() or (tpos + MIN_TAIL_SIZE + len(_HALF_TOPIC_B) > ends).any():
        return None
    topic = np.frombuffer(bytes((len(_HALF_TOPIC_B),)) + _HALF_TOPIC_B, dtype=np.uint8)  # V1 length, topic
    if (a[tpos[:, None] + np.arange(len(topic))] != topic).any():
        return None
    ppos = tpos + len(topic) + PROPERTIES_LENGTH_SIZE
    if (ppos + _gather(a, tpos + len(topic), PROPERTIES_LENGTH_SIZE, ">i2") != ends).any():
        return None
    props = [data[p:e] for p, e in zip(ppos.tolist(), ends.tolist(), strict=True)]
    if not all(map(bytes.endswith, props, repeat(b"\x02"))):
        return None
    topic0, qid0, group = (find_property(props[0], k) for k in (_REAL_TOPIC, _REAL_QID, _GROUP))
    real = parse_real_queue(topic0, qid0)
    if real is None or group is None:
        return None
    suffix = f"{_REAL_TOPIC}\x01{topic0}\x02{_REAL_QID}\x01{qid0}\x02".encode()
    if not all(map(bytes.endswith, props, repeat(suffix))):
        return None  # REAL_* do not end the properties, or not one destination for all
    joined = b"\x02" + b"\x02".join(props)
    if (
        joined.count(_needle(_ORIGIN))
        or joined.count(_needle(_DELAY))
        or joined.count(_needle(_REAL_TOPIC)) != n
        or joined.count(_needle(_REAL_QID)) != n
        or joined.count(_needle(_GROUP)) != n
        or joined.count(f"\x02{_GROUP}\x01{group}\x02".encode()) != n
    ):
        return None
    cut = len(suffix)
    queue_offsets = _field(a, starts, "queue_offset").tolist()
    return HalfColumns(
        queue_offsets=queue_offsets,
        origins=list(queue_offsets),
        physical_offsets=_field(a, starts, "physical_offset").tolist(),
        sizes=lens.tolist(),
        flags=_field(a, starts, "flag").tolist(),
        sys_flags=sys_flags.tolist(),
        born_timestamps=_field(a, starts, "born_timestamp").tolist(),
        reconsume_times=_field(a, starts, "reconsume_times").tolist(),
        born_hosts=_hosts(_field(a, starts, "born_host").tolist()),
        store_hosts=_hosts(_field(a, starts, "store_host").tolist()),
        bodies=[data[b:e] for b, e in zip((starts + _HDR).tolist(), tpos.tolist(), strict=True)],
        topics=[HALF_TOPIC] * n,
        reals=[real] * n,
        groups=[group] * n,
        delayed=[False] * n,
        committed=[
            p[:-cut] + b"%s\x01%d\x02" % (_ORIGIN.encode(), qo)
            for p, qo in zip(props, queue_offsets, strict=True)
        ],
    )


def _hosts(raw: list[bytes]) -> list[tuple[str, int]]:
    """(IP text, port) of stored IPv4 hosts (IP + int32 port), each distinct value decoded once."""
    ip_len = IPV4.born_host_len - PORT_SIZE
    decoded = {r: (bytes_to_ip(r[:ip_len]), int.from_bytes(r[ip_len:], "big", signed=True)) for r in set(raw)}
    return [decoded[r] for r in raw]
