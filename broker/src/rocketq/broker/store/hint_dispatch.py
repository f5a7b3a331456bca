"""Dispatch of the batches this process appended, from their :class:`DispatchHint`\\ s, many at once.

The reput thread collects the hints of every batch appended since its last round (often dozens
when appends are fast) and dispatches them together, so numpy's fixed per-call cost is paid once
per round instead of once per batch.

Theory of operation.  For the records of all hints the group builds per-record columns (physical
offset, size, store time, topic prefix hash), extracts tags codes and index keys from the raw
properties of all records with one :func:`.props_scan.scan_joined` call (unless the appender
handed them over), writes one ConsumeQueue run per hint from a single structured array, and hands
the index one vectorised insert in CommitLog order.  Fewer than ``BULK_MIN_RECORDS`` records take a
scalar path (``decode_properties`` per record) with the same results: it is cheaper for a lone
message.  The CommitLog stays the truth: what this module writes is byte-identical to what the
record-parsing path of :mod:`.dispatch` writes (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.commit_log import DispatchHint
from rocketq.broker.store.config import CQ_UNIT_SIZE
from rocketq.broker.store.consume_queue import CQ_DTYPE, UNIT, ConsumeQueue
from rocketq.broker.store.index_file import IndexService, bulk_index_key_hash
from rocketq.broker.store.props_scan import (
    PropsColumn,
    index_key_hashes,
    join_properties,
    scan_joined,
)
from rocketq.client.remoting.javahash import index_key_hash, java_string_hash, tags_hash_code
from rocketq.client.remoting.properties import decode_properties, split_keys

I64 = npt.NDArray[np.int64]
BULK_MIN_RECORDS = 48
Touched = dict[tuple[str, int], int]


def dispatch_hints(
    hints: Sequence[DispatchHint],
    find_or_create_cq: Callable[[str, int], ConsumeQueue],
    index: IndexService | None,
    touched: Touched,
) -> None:
    """Write the ConsumeQueue units and index entries of ``hints`` (consecutive in the CommitLog)."""
    if sum(len(h.sizes) for h in hints) < BULK_MIN_RECORDS:
        _dispatch_small(hints, find_or_create_cq, index, touched)
    else:
        _dispatch_bulk(hints, find_or_create_cq, index, touched)


def _put_units(
    hint: DispatchHint,
    find_or_create_cq: Callable[[str, int], ConsumeQueue],
    units: bytes,
    count: int,
    last_end: int,
    touched: Touched,
) -> None:
    key = (hint.topic, hint.queue_id)
    find_or_create_cq(*key).put_units(hint.first_queue_offset, units, last_end)
    touched[key] = hint.first_queue_offset + count


def _record_keys(topic: str, props: bytes | bytearray | memoryview) -> tuple[int, list[str]]:
    pmap = decode_properties(props)
    keys = split_keys(pmap.get("KEYS"))
    uniq = pmap.get("UNIQ_KEY")
    if uniq:
        keys.append(uniq)
    return tags_hash_code(pmap.get("TAGS")), keys


def _dispatch_small(
    hints: Sequence[DispatchHint],
    find_or_create_cq: Callable[[str, int], ConsumeQueue],
    index: IndexService | None,
    touched: Touched,
) -> None:
    full_keys: list[str] = []
    key_phys: list[int] = []
    key_ts: list[int] = []
    for h in hints:
        units = bytearray()
        last_end = 0
        for i in range(len(h.sizes)):
            tags, keys = (
                _record_keys(h.topic, h.properties[i]) if h.tags_codes is None or h.keys is None else (0, [])
            )
            if h.tags_codes is not None:
                tags = int(h.tags_codes[i])
            if h.keys is not None:
                keys = h.keys[i]
            phy, size = int(h.phys[i]), int(h.sizes[i])
            if h.all_in_cq or h.in_cq[i]:
                units += UNIT.pack(phy, size, tags)
                last_end = phy + size
            if index is not None and not (h.unindexed is not None and h.unindexed[i]):
                for key in keys:
                    if key:
                        full_keys.append(f"{h.topic}#{key}")
                        key_phys.append(phy)
                        key_ts.append(h.store_timestamp)
        if units:
            _put_units(h, find_or_create_cq, bytes(units), len(units) // CQ_UNIT_SIZE, last_end, touched)
    if index is not None and full_keys:
        hashes = (
            bulk_index_key_hash(full_keys)
            if len(full_keys) > 8
            else np.array([index_key_hash(k) for k in full_keys], dtype=np.int64)
        )
        index.build_index_hashes(hashes, np.array(key_phys, dtype=np.int64), np.array(key_ts, dtype=np.int64))


def _dispatch_bulk(
    hints: Sequence[DispatchHint],
    find_or_create_cq: Callable[[str, int], ConsumeQueue],
    index: IndexService | None,
    touched: Touched,
) -> None:
    counts = np.array([len(h.sizes) for h in hints], dtype=np.int64)
    first = np.cumsum(counts) - counts
    total = int(counts.sum())
    phys = np.concatenate([np.asarray(h.phys, dtype=np.int64) for h in hints])
    units = np.empty(total, dtype=CQ_DTYPE)
    units["offset"] = phys
    units["size"] = np.concatenate([np.asarray(h.sizes, dtype=np.int64) for h in hints])
    tags = np.zeros(total, dtype=np.int64)
    scanned = [
        k for k, h in enumerate(hints) if h.tags_codes is None or (index is not None and h.keys is None)
    ]
    key_parts: list[tuple[I64, I64]] = []  # (group record of each key, its index hash)
    scanned = _scan_uniform_runs(hints, scanned, first, tags, index is not None, key_parts)
    if scanned:
        body = join_properties([hints[k].properties for k in scanned])
        lens = np.concatenate([np.asarray(hints[k].plen, dtype=np.int64) for k in scanned])
        rec_map = (
            np.concatenate([np.arange(first[k], first[k] + counts[k]) for k in scanned])
            if len(scanned) < len(hints)
            else None
        )
        s_tags, k_hash, k_len, k_rec = scan_joined(body, lens, index is not None)
        tags[rec_map if rec_map is not None else slice(None)] = s_tags
        if len(k_hash):
            rec = rec_map[k_rec] if rec_map is not None else k_rec
            prefix = np.array([java_string_hash(h.topic + "#") & 0xFFFFFFFF for h in hints], dtype=np.int64)
            key_parts.append((rec, index_key_hashes(np.repeat(prefix, counts)[rec], k_hash, k_len)))
    for k, h in enumerate(hints):
        if h.tags_codes is not None:
            tags[first[k] : first[k] + counts[k]] = h.tags_codes
        if index is not None and h.keys is not None:
            key_parts.append(_given_keys(h, int(first[k])))
    units["tags_code"] = tags
    raw = units.tobytes()
    for k, h in enumerate(hints):
        r0, r1 = int(first[k]), int(first[k] + counts[k])
        if h.all_in_cq:
            data = raw[r0 * CQ_UNIT_SIZE : r1 * CQ_UNIT_SIZE]
        elif any(h.in_cq):
            data = units[r0:r1][np.asarray(h.in_cq, dtype=bool)].tobytes()
        else:
            continue
        rows = np.flatnonzero(np.asarray(h.in_cq, dtype=bool)) if not h.all_in_cq else None
        last = r1 - 1 if rows is None else r0 + int(rows[-1])
        _put_units(
            h,
            find_or_create_cq,
            data,
            len(data) // CQ_UNIT_SIZE,
            int(phys[last]) + int(units["size"][last]),
            touched,
        )
    if index is not None and key_parts:
        _index(hints, counts, phys, key_parts, index)


def _scan_uniform_runs(
    hints: Sequence[DispatchHint],
    scanned: list[int],
    first: I64,
    tags: I64,
    index_enabled: bool,
    key_parts: list[tuple[I64, I64]],
) -> list[int]:
    """Tags codes and index keys of the scanned hints whose properties are a column of one layout
    (a replicated batch, :func:`.props_scan.scan_uniform`), written into ``tags`` and
    ``key_parts``; returns the other scanned hints, for :func:`.props_scan.scan_joined`."""
    rest = []
    for k in scanned:
        h = hints[k]
        got = h.properties.uniform_scan(index_enabled) if isinstance(h.properties, PropsColumn) else None
        if got is None:
            rest.append(k)
            continue
        s_tags, k_hash, k_len, k_rec = got
        r0 = int(first[k])
        tags[r0 : r0 + len(s_tags)] = s_tags
        if len(k_hash):
            prefix = np.full(len(k_hash), java_string_hash(h.topic + "#") & 0xFFFFFFFF, dtype=np.int64)
            key_parts.append((r0 + k_rec, index_key_hashes(prefix, k_hash, k_len)))
    return rest


def _given_keys(h: DispatchHint, first: int) -> tuple[I64, I64]:
    assert h.keys is not None
    if not any(h.keys):  # none handed over (an unscanned topic): no per-message work
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    full = [f"{h.topic}#{key}" for keys in h.keys for key in keys if key]
    recs = [first + i for i, keys in enumerate(h.keys) for key in keys if key]
    hashes = bulk_index_key_hash(full) if full else np.zeros(0, dtype=np.int64)
    return np.array(recs, dtype=np.int64), hashes


def _index(
    hints: Sequence[DispatchHint],
    counts: I64,
    phys: I64,
    key_parts: list[tuple[I64, I64]],
    index: IndexService,
) -> None:
    if len(key_parts) == 1:
        rec, hashes = key_parts[0]
    else:
        rec, hashes = np.concatenate([p[0] for p in key_parts]), np.concatenate([p[1] for p in key_parts])
        order = np.argsort(rec, kind="stable")
        rec, hashes = rec[order], hashes[order]
    if any(h.unindexed is not None for h in hints):
        skip = np.concatenate(
            [
                np.asarray(h.unindexed, dtype=bool)
                if h.unindexed is not None
                else np.zeros(len(h.sizes), dtype=bool)
                for h in hints
            ]
        )
        keep = ~skip[rec]
        rec, hashes = rec[keep], hashes[keep]
    if len(rec):
        stamps = np.repeat(np.array([h.store_timestamp for h in hints], dtype=np.int64), counts)
        index.build_index_hashes(hashes, phys[rec], stamps[rec])
