"""Recovery: validate the CommitLog tail, cut torn records, and re-derive ConsumeQueues and index.

Theory of operation (RocketMQ's ``recoverNormally`` / ``recoverAbnormally``).  The CommitLog is the
only truth.  After a clean shutdown (no ``abort`` file) the scan starts at the third-last segment;
after a crash it starts at the newest segment whose first record was stored before the
checkpoint's timestamps (minus 3 s).  Every record is checked: magic, sizes, and the body CRC when
``check_crc_on_recover``.  The first bad record ends the log *only if nothing valid follows it*
(a torn tail): the tail is zeroed and later segments are removed.  A bad record followed by valid
data is corruption in the middle: :class:`StoreCorruptError` names the file, position and bytes,
and nothing is truncated.  ConsumeQueues are then cut to the recovered end and everything from
the checkpoint's dispatched offset is re-dispatched (idempotently); if a ConsumeQueue turns out to
be missing data, every queue is rebuilt from the start of the CommitLog.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rocketq.broker.store.checkpoint import StoreCheckpoint
from rocketq.broker.store.commit_log import CommitLog
from rocketq.broker.store.consume_queue import ConsumeQueue
from rocketq.broker.store.errors import StoreCorruptError
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.record_batch import enters_consume_queue
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, record_header_fields

log = logging.getLogger(__name__)


def _scan_file(mf: MappedFile, check_crc: bool, seen: dict[tuple[str, int], int]) -> tuple[int, bool, str]:
    """(valid end position, reached a blank/end marker cleanly, reason for stopping).

    ``seen`` collects the highest queue offset of each queue met on the way.
    """
    buf = mf.buffer
    size = mf.file_size
    pos = 0
    while pos + 8 <= size:
        total, magic = (
            int.from_bytes(buf[pos : pos + 4], "big", signed=True),
            int.from_bytes(buf[pos + 4 : pos + 8], "big"),
        )
        if magic == BLANK_MAGIC and total == size - pos:
            return size, True, "blank"
        if total == 0 and magic == 0:
            return pos, True, "end"
        try:
            h = record_header_fields(buf[:size], pos, check_crc=check_crc)
        except MessageFormatError as exc:
            return pos, False, str(exc)
        if enters_consume_queue(h.sys_flag):
            key = (h.topic, h.queue_id)
            if seen.get(key, -1) < h.queue_offset:
                seen[key] = h.queue_offset
        pos += total
    return pos, True, "end"


def _valid_data_after(files: tuple[MappedFile, ...], idx: int, pos: int, check_crc: bool) -> bool:
    """Whether a valid record follows a bad one at ``pos`` of ``files[idx]`` (corruption, not a tear)."""
    mf = files[idx]
    buf = mf.buffer
    total = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
    magic = int.from_bytes(buf[pos + 4 : pos + 8], "big")
    if magic in (MAGIC_V1, MAGIC_V2) and 0 < total and pos + total + 8 <= mf.file_size:
        nxt = pos + total
        try:
            record_header_fields(buf, nxt, check_crc=check_crc)
            return True
        except MessageFormatError:
            pass
        if int.from_bytes(buf[nxt + 4 : nxt + 8], "big") == BLANK_MAGIC:
            return True
    for later in files[idx + 1 :]:
        if any(later.buffer[:8]):
            return True
    return False


def _start_index(files: tuple[MappedFile, ...], last_exit_ok: bool, checkpoint: StoreCheckpoint) -> int:
    if last_exit_ok:
        return max(0, len(files) - 3)
    min_ts = checkpoint.min_timestamp
    dispatched = checkpoint.dispatched_phy_offset
    for i in range(len(files) - 1, -1, -1):
        mf = files[i]
        if dispatched >= 0 and mf.file_from_offset > dispatched:
            continue
        try:
            h = record_header_fields(mf.buffer, 0)
        except MessageFormatError:
            continue
        if min_ts > 0 and h.store_timestamp <= min_ts:
            return i
    return 0


def recover_commit_log(
    commit_log: CommitLog, *, last_exit_ok: bool, checkpoint: StoreCheckpoint
) -> tuple[int, dict[tuple[str, int], int]]:
    """Validate the tail, truncate a torn one.

    Returns the recovered end offset and, for each queue met in the scanned segments, its highest
    queue offset (recovery checks the ConsumeQueues reach it).
    """
    mfq = commit_log.mfq
    files = mfq.files
    seen: dict[tuple[str, int], int] = {}
    if not files:
        return 0, seen
    check_crc = commit_log.config.check_crc_on_recover
    start = _start_index(files, last_exit_ok, checkpoint)
    log.info(
        "recovering the commit log %s from segment %s (%s exit)",
        mfq.store_path,
        files[start].file_name,
        "clean" if last_exit_ok else "abnormal",
    )
    end = files[start].file_from_offset
    torn = False
    for i in range(start, len(files)):
        mf = files[i]
        pos, clean, reason = _scan_file(mf, check_crc, seen)
        end = mf.file_from_offset + pos
        if clean and reason == "blank":
            mf.wrote_position = mf.flushed_position = mf.file_size
            continue
        if not clean:
            if _valid_data_after(files, i, pos, check_crc):
                raise StoreCorruptError(
                    f"corrupt CommitLog record at offset {end} followed by valid data ({reason}); "
                    "refusing to truncate; repair or move the segment",
                    path=mf.path,
                    position=pos,
                    found=bytes(mf.buffer[pos : pos + 32]),
                )
            log.warning(
                "commit log: torn or corrupt tail at offset %d in %s (%s); truncating %d bytes",
                end,
                mf.path,
                reason,
                mf.file_size - pos,
            )
            torn = True
        break
    # Beyond the written end a segment is all zeros (preallocation and earlier truncations keep it
    # so); after a crash or a torn record the rest is zeroed again so nothing stale resurfaces.
    mfq.set_max_offset(end, zero_tail=torn or not last_exit_ok)
    mfq.flushed_where = end
    return end, seen


def recover_consume_queues(queues: Iterable[ConsumeQueue], commit_log_end: int, commit_log_min: int) -> None:
    for cq in queues:
        cq.recover()
        cq.truncate_dirty(commit_log_end)
        cq.correct_min_offset(commit_log_min)
