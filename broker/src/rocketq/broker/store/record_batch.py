"""Column-oriented message batches and the bulk CommitLog record builder.

A :class:`MessageBatchToStore` holds the messages of one topic/queue as columns: a list of bodies,
a list of encoded properties and integer columns (or one int for the whole batch).  It is what the
broker's SEND_BATCH_MESSAGE path decodes a wire batch into.  A :class:`MessageToStore` is one
message in the same terms (before offsets and store time exist); ``MessageStore.put_message(s)``
turn a sequence of them into a batch with :func:`batch_from_messages`.

Theory of operation.  :func:`prepare_batch` runs outside the append lock.  It validates the batch
with array reductions, then builds every record field that does not depend on the log position:

* the fixed header (TOTALSIZE .. BODYLENGTH, ``HEADER_DTYPES``) of all records is one numpy
  structured array: a per-batch template (magic, queue id, hosts, constant columns) repeated,
  then the per-record columns (size, CRC, body length, ...) assigned in bulk;
* the part between body and properties (topic length, topic, properties length) is a second
  structured array;
* BODYCRC is ``zlib.crc32`` per body (C, the only per-message call besides ``len``);
* nothing is parsed from the properties here: dispatch extracts tags codes and index keys for
  many batches at once (:mod:`.props_scan`) unless the caller handed them over.

Under the lock :meth:`PreparedBatch.render` writes QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP
as three column assignments and interleaves header, body, middle and properties of every record
with one ``bytes.join`` (a C loop of memcpys).  Batches below ``SMALL_BATCH`` records use the
scalar encoder (:func:`encode_stored_message`) instead: numpy's per-call overhead would dominate.
Both produce the same bytes (tested with hypothesis).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.props_scan import Buffer, PropsColumn
from rocketq.broker.store.status import PutMessageStatus
from rocketq.client.errors import MessageFormatError, RocketQError
from rocketq.client.remoting.message import StoredMessage, encode_stored_message
from rocketq.client.remoting.msgid import ip_to_bytes
from rocketq.client.remoting.properties import encode_properties
from rocketq.client.remoting.record_layout import (
    BORNHOST_V6_FLAG,
    HOST_V6_FLAGS,
    IPV4,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_SIZE,
    MAX_TOPIC_LENGTH_V1,
    PHYSICALOFFSET_POS,
    QUEUEOFFSET_POS,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    header_dtype_spec,
    host_kind,
    store_timestamp_pos,
)

I64 = npt.NDArray[np.int64]
IntColumn = int | Sequence[int] | I64

#: Below this many records the scalar encoder beats numpy's fixed per-call cost.
SMALL_BATCH = 6
_PREPARED, _ROLLBACK = TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_QO_PHY = struct.Struct(">qq")  # QUEUEOFFSET and PHYSICALOFFSET, adjacent
assert PHYSICALOFFSET_POS == QUEUEOFFSET_POS + _QO_PHY.size // 2
_TS = struct.Struct(">q")
_SYS_FLAG = struct.Struct(">i")
_PORT = struct.Struct(">i")


#: Record header layouts indexed by host_kind(sys_flag), built from the layout module's spec.
HEADER_DTYPES: tuple[np.dtype[np.void], ...] = tuple(np.dtype(header_dtype_spec(k)) for k in range(4))
assert HEADER_DTYPES[0].fields is not None and HEADER_DTYPES[0].fields["queue_offset"][1] == QUEUEOFFSET_POS
assert HEADER_DTYPES[0].fields["physical_offset"][1] == PHYSICALOFFSET_POS


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageToStore:
    """A message as the broker hands it to the store (before offsets and store time exist)."""

    topic: str
    queue_id: int
    flag: int = 0
    body: bytes
    properties: Mapping[str, str] | str
    sys_flag: int = 0
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def properties_text(self) -> str:
        props = self.properties
        return props if isinstance(props, str) else encode_properties(props)

    @classmethod
    def copy_of(
        cls,
        msg: StoredMessage | MessageToStore,
        *,
        topic: str,
        queue_id: int,
        properties: Mapping[str, str] | str,
        sys_flag: int | None = None,
        born_host: tuple[str, int] | None = None,
        store_host: tuple[str, int] | None = None,
        reconsume_times: int | None = None,
        prepared_transaction_offset: int | None = None,
    ) -> MessageToStore:
        """A message put again under ``topic``/``queue_id`` with ``properties`` (a delayed, timed,
        sent-back or transactional message moving between topics): flag, body and born timestamp
        as in ``msg``, the other fields too unless given."""
        return cls(
            topic=topic,
            queue_id=queue_id,
            flag=msg.flag,
            body=msg.body,
            properties=properties,
            sys_flag=msg.sys_flag if sys_flag is None else sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host if born_host is None else born_host,
            store_host=msg.store_host if store_host is None else store_host,
            reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
            prepared_transaction_offset=(
                msg.prepared_transaction_offset
                if prepared_transaction_offset is None
                else prepared_transaction_offset
            ),
        )


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class MessageBatchToStore:
    """Messages of one topic and queue, as columns (an int column may be one int for all).

    ``properties`` are the encoded ``k\\x01v\\x02`` UTF-8 bytes.  ``tags_codes`` and ``keys`` (index
    keys per message: the ``KEYS`` values, then the ``UNIQ_KEY``) may be handed over when the caller
    knows them; otherwise they are extracted from the properties in bulk.
    """

    topic: str
    queue_id: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    bodies: Sequence[Buffer]
    properties: Sequence[Buffer]
    born_timestamps: IntColumn
    flags: IntColumn = 0
    sys_flags: IntColumn = 0
    reconsume_times: IntColumn = 0
    prepared_transaction_offsets: IntColumn = 0
    tags_codes: IntColumn | None = None
    keys: Sequence[Sequence[str]] | None = None

    def __len__(self) -> int:
        return len(self.bodies)

    def column(self, name: str, i: int) -> int:
        value: IntColumn = getattr(self, name)
        return value if isinstance(value, int) else int(value[i])


@dataclass(slots=True, eq=False)
class PreparedBatch:
    """A batch encoded outside the append lock; offsets and store time are written by ``render``."""

    topic: str
    queue_id: int
    store_host: tuple[str, int]
    n: int
    total: int
    sizes: I64 | list[int]
    starts: I64 | list[int]  # relative to the first record, as if written contiguously
    in_cq: npt.NDArray[np.bool_] | list[bool]
    all_in_cq: bool
    ts_pos: int
    properties: Sequence[Buffer]  # for dispatch (tags codes and index keys are extracted there)
    plen: I64 | list[int]
    unindexed: npt.NDArray[np.bool_] | list[bool] | None  # rolled-back records (None: none)
    tags_codes: I64 | list[int] | None  # handed over by the caller, else extracted by dispatch
    keys: list[list[str]] | None
    wait_store: bool
    hdr: npt.NDArray[np.void] | None = None
    pieces: list[Buffer] | None = None
    records: bytearray | None = None
    want_msg_ids: bool = True  # False: the result's msg_id is left empty (nobody reads it)

    def render(self, queue_offsets: I64 | list[int], phys: I64 | list[int], store_timestamp: int) -> Buffer:
        """The records with their queue offsets, physical offsets and store time, back to back."""
        hdr, pieces = self.hdr, self.pieces
        if hdr is not None and pieces is not None:
            hdr["queue_offset"] = queue_offsets
            hdr["physical_offset"] = phys
            hdr["store_timestamp"] = store_timestamp
            pieces[0::4] = hdr.view(f"V{hdr.dtype.itemsize}").tolist()
            return b"".join(pieces)
        buf = self.records
        assert buf is not None
        ts_pos, pack_qp, pack_ts = self.ts_pos, _QO_PHY.pack_into, _TS.pack_into
        for start, qo, phy in zip(self.starts, queue_offsets, phys, strict=True):
            pack_qp(buf, start + QUEUEOFFSET_POS, qo, phy)
            pack_ts(buf, start + ts_pos, store_timestamp)
        return buf

    def dispatch_properties(self, rendered: Buffer) -> Sequence[Buffer]:
        """The records' properties for their dispatch hint, given ``rendered`` (:meth:`render`'s
        result).  Records of one size with properties of one length (a producer's batch of equal
        messages) are copied out of ``rendered`` as the rows of one compact
        :class:`~.props_scan.PropsColumn` with one strided copy: dispatch then scans them as one
        layout (:func:`~.props_scan.scan_uniform`, as a slave's replicated batches) instead of
        parsing every record's bytes.  Other batches (and records without properties) keep their
        list of properties."""
        starts, sizes, plen = self.starts, self.sizes, self.plen
        if not (isinstance(starts, np.ndarray) and isinstance(plen, np.ndarray)) or self.n < 2 or not plen[0]:
            return self.properties  # (a small batch: lists)
        # (the properties end each record; rows() is None unless they have one length and stride)
        rows = PropsColumn(rendered, starts + sizes - plen, plen).rows()
        if rows is None:
            return self.properties
        return PropsColumn(rows.tobytes(), np.arange(self.n, dtype=np.int64) * rows.shape[1], plen)


def enters_consume_queue(sys_flag: int) -> bool:
    """False for prepared and rolled-back transaction records."""
    tran = sys_flag & TRANSACTION_TYPE_MASK
    return tran != _PREPARED and tran != _ROLLBACK


def _int_column(value: IntColumn, n: int, bounds: tuple[int, int]) -> I64 | int | None:
    """The column as int64 (or the scalar), or None if a value is out of ``bounds``."""
    if isinstance(value, int):
        return value if bounds[0] <= value <= bounds[1] else None
    try:
        arr = np.asarray(value, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):
        return None
    if arr.shape != (n,) or (n and (int(arr.min()) < bounds[0] or int(arr.max()) > bounds[1])):
        return None
    return arr


def check_sizes(blen: I64 | list[int], plen: I64 | list[int], cfg: StoreConfig) -> PutMessageStatus | None:
    """The status rejecting the first message whose body or properties are too large, if any."""
    max_props, max_body = cfg.max_properties_size_bytes, cfg.max_message_size_bytes
    for b, p in zip(blen, plen, strict=True):  # only walked when a maximum is exceeded
        if p > max_props:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        if b > max_body or p > MAX_PROPERTIES_SIZE:
            return PutMessageStatus.MESSAGE_ILLEGAL
    return None


def prepare_batch(
    batch: MessageBatchToStore, cfg: StoreConfig, topic_ok: Callable[[str], bool]
) -> PreparedBatch | PutMessageStatus:
    """Validate and encode ``batch`` (outside the lock); a status if it is rejected."""
    n = len(batch.bodies)
    if n == 0 or len(batch.properties) != n or not topic_ok(batch.topic) or not 0 <= batch.queue_id < 2**31:
        return PutMessageStatus.MESSAGE_ILLEGAL
    if n < SMALL_BATCH:
        return _prepare_small(batch, cfg, n)
    return _prepare_bulk(batch, cfg, n)


def _wait_store(props: Buffer) -> bool:
    """False if the (first) message says ``WAIT=false``: SYNC_FLUSH does not wait for it."""
    data = props if isinstance(props, bytes) else bytes(props)
    return b"WAIT\x01false\x02" not in data


def _prepare_small(batch: MessageBatchToStore, cfg: StoreConfig, n: int) -> PreparedBatch | PutMessageStatus:
    blen = [len(b) for b in batch.bodies]
    plen = [len(p) for p in batch.properties]
    if max(plen) > cfg.max_properties_size_bytes or max(blen) > cfg.max_message_size_bytes:
        return check_sizes(blen, plen, cfg) or PutMessageStatus.MESSAGE_ILLEGAL
    records: list[bytes] = []
    sys_flags: list[int] = []
    for i in range(n):
        try:
            rec = encode_stored_message(
                topic=batch.topic,
                queue_id=batch.queue_id,
                flag=batch.column("flags", i),
                body=bytes(batch.bodies[i]),
                properties=bytes(batch.properties[i]),
                sys_flag=batch.column("sys_flags", i),
                born_timestamp=batch.column("born_timestamps", i),
                born_host=batch.born_host,
                store_host=batch.store_host,
                reconsume_times=batch.column("reconsume_times", i),
                prepared_transaction_offset=batch.column("prepared_transaction_offsets", i),
            )
        except (RocketQError, TypeError, OverflowError):
            return PutMessageStatus.MESSAGE_ILLEGAL
        records.append(rec)
        sys_flags.append(_SYS_FLAG.unpack_from(rec, SYSFLAG_POS)[0])
    sizes = [len(r) for r in records]
    starts = [0] * n
    for i in range(1, n):
        starts[i] = starts[i - 1] + sizes[i - 1]
    in_cq = [enters_consume_queue(f) for f in sys_flags]
    rolled_back = [f & TRANSACTION_TYPE_MASK == _ROLLBACK for f in sys_flags]
    tags = batch.tags_codes
    return PreparedBatch(
        topic=batch.topic,
        queue_id=batch.queue_id,
        store_host=batch.store_host,
        n=n,
        total=sum(sizes),
        sizes=sizes,
        starts=starts,
        in_cq=in_cq,
        all_in_cq=all(in_cq),
        ts_pos=store_timestamp_pos(sys_flags[0]),
        properties=batch.properties,
        plen=plen,
        unindexed=rolled_back if any(rolled_back) else None,
        tags_codes=None if tags is None else [batch.column("tags_codes", i) for i in range(n)],
        keys=None if batch.keys is None else [list(k) for k in batch.keys],
        wait_store=_wait_store(batch.properties[0]),
        records=bytearray(b"".join(records)),
    )


_host_cache: dict[tuple[str, int], bytes] = {}


def _host_bytes(host: tuple[str, int]) -> bytes:
    """IP bytes + port int32 (cached: a broker sees few hosts)."""
    data = _host_cache.get(host)
    if data is None:
        data = ip_to_bytes(host[0]) + _PORT.pack(host[1])
        if len(_host_cache) > 4096:
            _host_cache.clear()
        _host_cache[host] = data
    return data


def _template(
    batch: MessageBatchToStore, n: int, kind: int, magic: int, columns: dict[str, I64 | int]
) -> npt.NDArray[np.void]:
    """Headers of all records with the batch-constant fields (and scalar columns) filled in."""
    dtype = HEADER_DTYPES[kind]
    t = np.zeros(1, dtype=dtype)
    t["magic"] = magic
    t["queue_id"] = batch.queue_id
    t["born_host"] = np.void(_host_bytes(batch.born_host))
    t["store_host"] = np.void(_host_bytes(batch.store_host))
    for name, value in columns.items():
        if isinstance(value, int):
            t[name] = value
    hdr = t.repeat(n)
    for name, value in columns.items():
        if not isinstance(value, int):
            hdr[name] = value
    return hdr


def _prepare_bulk(batch: MessageBatchToStore, cfg: StoreConfig, n: int) -> PreparedBatch | PutMessageStatus:
    bodies, props = batch.bodies, batch.properties
    blen = np.fromiter(map(len, bodies), dtype=np.int64, count=n)
    plen = np.fromiter(map(len, props), dtype=np.int64, count=n)
    if (
        int(plen.max()) > min(cfg.max_properties_size_bytes, MAX_PROPERTIES_SIZE)
        or int(blen.max()) > cfg.max_message_size_bytes
    ):
        return check_sizes(blen.tolist(), plen.tolist(), cfg) or PutMessageStatus.MESSAGE_ILLEGAL
    columns: dict[str, I64 | int] = {}
    for name, field, bounds in (
        ("flags", "flag", _INT32),
        ("sys_flags", "sys_flag", _INT32),
        ("born_timestamps", "born_timestamp", _INT64),
        ("reconsume_times", "reconsume_times", _INT32),
        ("prepared_transaction_offsets", "prepared_transaction_offset", _INT64),
    ):
        col = _int_column(getattr(batch, name), n, bounds)
        if col is None:
            return PutMessageStatus.MESSAGE_ILLEGAL
        columns[field] = col
    try:
        born, store = _host_bytes(batch.born_host), _host_bytes(batch.store_host)
    except (RocketQError, struct.error, ValueError):
        return PutMessageStatus.MESSAGE_ILLEGAL
    v6 = (BORNHOST_V6_FLAG if len(born) != IPV4.born_host_len else 0) | (
        STOREHOST_V6_FLAG if len(store) != IPV4.store_host_len else 0
    )
    sys_flags = columns["sys_flag"]
    sys_flags = columns["sys_flag"] = (sys_flags & ~HOST_V6_FLAGS) | v6
    topic_b = batch.topic.encode()
    if len(topic_b) > MAX_TOPIC_LENGTH_V1:
        magic, middle_head = MAGIC_V2, struct.pack(">H", len(topic_b)) + topic_b
    else:
        magic, middle_head = MAGIC_V1, bytes((len(topic_b),)) + topic_b
    kind = host_kind(v6)
    hsize = HEADER_DTYPES[kind].itemsize
    sizes = hsize + blen + (len(middle_head) + 2) + plen
    columns["total_size"] = sizes
    columns["body_crc"] = np.fromiter(map(zlib.crc32, bodies), dtype=np.int64, count=n) & 0x7FFFFFFF
    columns["body_length"] = blen
    hdr = _template(batch, n, kind, magic, columns)
    middle = np.zeros(1, dtype=[("topic", f"V{len(middle_head)}"), ("properties_length", ">i2")])
    middle["topic"] = np.void(middle_head)
    mid = middle.repeat(n)
    mid["properties_length"] = plen
    pieces: list[Buffer] = [b""] * (4 * n)
    pieces[1::4] = bodies
    pieces[2::4] = mid.view(f"V{mid.dtype.itemsize}").tolist()
    pieces[3::4] = props
    if isinstance(sys_flags, int):
        in_cq: npt.NDArray[np.bool_] | list[bool] = [enters_consume_queue(sys_flags)] * n
        all_in_cq = in_cq[0]
        unindexed: npt.NDArray[np.bool_] | list[bool] | None = (
            [True] * n if sys_flags & TRANSACTION_TYPE_MASK == _ROLLBACK else None
        )
    else:
        tran = sys_flags & TRANSACTION_TYPE_MASK
        in_cq_arr = (tran != _PREPARED) & (tran != _ROLLBACK)
        in_cq, all_in_cq = in_cq_arr, bool(in_cq_arr.all())
        rolled_back = tran == _ROLLBACK
        unindexed = rolled_back if rolled_back.any() else None
    tags = batch.tags_codes
    if tags is not None:
        tags = np.full(n, tags, dtype=np.int64) if isinstance(tags, int) else np.asarray(tags, dtype=np.int64)
    return PreparedBatch(
        topic=batch.topic,
        queue_id=batch.queue_id,
        store_host=batch.store_host,
        n=n,
        total=int(sizes.sum()),
        sizes=sizes,
        starts=np.cumsum(sizes) - sizes,
        in_cq=in_cq,
        all_in_cq=all_in_cq,
        ts_pos=store_timestamp_pos(v6),
        properties=props,
        plen=plen,
        unindexed=unindexed,
        tags_codes=tags,
        keys=None if batch.keys is None else [list(k) for k in batch.keys],
        wait_store=_wait_store(props[0]),
        hdr=hdr,
        pieces=pieces,
    )


def prepare_parts(
    *,
    topic: str,
    queue_id: int,
    store_host: tuple[str, int],
    hdr: npt.NDArray[np.void],
    bodies: Sequence[Buffer],
    middles: Sequence[Buffer],
    properties: Sequence[Buffer],
    properties_len: I64,
    wait_store: bool,
    want_msg_ids: bool = True,
) -> PreparedBatch:
    """A batch whose records the caller encoded as parts: ``hdr`` (IPv4 layout, ``HEADER_DTYPES[0]``,
    every field but QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP filled in, TOTALSIZE included),
    then per record the body, a *middle* (topic length, topic, PROPERTIESLENGTH and any properties
    that precede ``properties[i]``) and ``properties[i]`` (of length ``properties_len[i]``).

    The caller vouches that the parts agree with the header (sizes, lengths, CRC): this is the
    path of records rebuilt from stored ones (a committed transaction's real messages).  Dispatch
    extracts tags codes and index keys from ``properties``, so the middle's properties must hold
    none of ``TAGS``, ``KEYS`` and ``UNIQ_KEY``.
    """
    n = len(hdr)
    assert hdr.dtype == HEADER_DTYPES[0] and len(bodies) == len(middles) == len(properties) == n
    sizes = hdr["total_size"].astype(np.int64)
    tran = hdr["sys_flag"].astype(np.int64) & TRANSACTION_TYPE_MASK
    in_cq = (tran != _PREPARED) & (tran != _ROLLBACK)
    rolled_back = tran == _ROLLBACK
    pieces: list[Buffer] = [b""] * (4 * n)
    pieces[1::4] = bodies
    pieces[2::4] = middles
    pieces[3::4] = properties
    return PreparedBatch(
        topic=topic,
        queue_id=queue_id,
        store_host=store_host,
        n=n,
        total=int(sizes.sum()),
        sizes=sizes,
        starts=np.cumsum(sizes) - sizes,
        in_cq=in_cq,
        all_in_cq=bool(in_cq.all()),
        ts_pos=store_timestamp_pos(0),
        properties=properties,
        plen=properties_len,
        unindexed=rolled_back if rolled_back.any() else None,
        tags_codes=None,
        keys=None,
        wait_store=wait_store,
        hdr=hdr,
        pieces=pieces,
        want_msg_ids=want_msg_ids,
    )


def batch_from_messages(msgs: Sequence[MessageToStore]) -> MessageBatchToStore | None:
    """The columns of ``msgs`` (None if they mix topics, queues or hosts, or a property is unencodable)."""
    first = msgs[0]
    topic, queue_id, born, store = first.topic, first.queue_id, first.born_host, first.store_host
    props: list[bytes] = []
    try:
        for m in msgs:
            if m.topic != topic or m.queue_id != queue_id or m.born_host != born or m.store_host != store:
                return None
            p = m.properties
            props.append(p.encode() if isinstance(p, str) else encode_properties(p).encode())
    except MessageFormatError:
        return None
    if len(msgs) == 1:
        return MessageBatchToStore(
            topic=topic,
            queue_id=queue_id,
            born_host=born,
            store_host=store,
            bodies=[first.body],
            properties=props,
            born_timestamps=first.born_timestamp,
            flags=first.flag,
            sys_flags=first.sys_flag,
            reconsume_times=first.reconsume_times,
            prepared_transaction_offsets=first.prepared_transaction_offset,
        )
    return MessageBatchToStore(
        topic=topic,
        queue_id=queue_id,
        born_host=born,
        store_host=store,
        bodies=[m.body for m in msgs],
        properties=props,
        born_timestamps=[m.born_timestamp for m in msgs],
        flags=[m.flag for m in msgs],
        sys_flags=[m.sys_flag for m in msgs],
        reconsume_times=[m.reconsume_times for m in msgs],
        prepared_transaction_offsets=[m.prepared_transaction_offset for m in msgs],
    )
