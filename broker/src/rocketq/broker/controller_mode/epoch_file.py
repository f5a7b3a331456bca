"""The epoch file: which master epoch wrote which part of the CommitLog (RocketMQ 5's EpochFileCache).

Every time a broker becomes master under a new epoch it appends ``(epoch, startOffset)``, where
``startOffset`` is its CommitLog max offset at that moment: the bytes from ``startOffset`` up to the
next entry's start were written by the master of ``epoch``.  A broker that rejoins a group as slave
compares its entries with the new master's (:func:`find_consistent_point`) and truncates its
CommitLog to the last offset both logs share, which removes a divergent tail written under an
epoch the group abandoned.

File format (``<storePathRootDir>/epochFileCheckpoint``, Java's ``CheckpointFile`` layout)::

    <number of entries>\\n
    <CRC32 of the entry lines, as a signed Java int>\\n
    <epoch>-<startOffset>\\n          one line per entry, epochs and start offsets increasing

Theory of operation.  A write goes to ``<file>.tmp`` and is fsynced; the current file is renamed
to ``<file>.bak``, the temp file renamed over it and the directory fsynced.  So at every instant
either the file or its ``.bak`` is a complete version, and a torn write (a crash in the middle)
leaves only a ``.tmp`` that loading ignores.  Loading reads the file, falls back to the ``.bak``
if the file is missing or fails its count or CRC check, and raises :class:`EpochFileError` naming
the file, the line and its bytes when neither is usable.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

from rocketq.broker.store.errors import StoreError
from rocketq.client.remoting.controller import INFINITE_END_OFFSET, EpochEntry

__all__ = [
    "EPOCH_FILE_NAME",
    "NO_END",
    "AppendStatus",
    "EpochEntry",
    "EpochFile",
    "EpochFileError",
    "find_consistent_point",
]

log = logging.getLogger(__name__)

EPOCH_FILE_NAME = "epochFileCheckpoint"
#: the end offset of an entry nothing follows yet (Java's Long.MAX_VALUE)
NO_END = INFINITE_END_OFFSET


class EpochFileError(StoreError):
    """Neither the epoch file nor its backup can be read."""


class AppendStatus(enum.Enum):
    APPENDED = "APPENDED"
    #: the epoch or start offset does not exceed the last entry's (the entry was not written)
    NOT_NEWER = "NOT_NEWER"


def _java_crc(text: bytes) -> int:
    crc = zlib.crc32(text)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def _with_ends(pairs: Sequence[tuple[int, int]], last_end: int) -> list[EpochEntry]:
    out = []
    for i, (epoch, start) in enumerate(pairs):
        end = pairs[i + 1][1] if i + 1 < len(pairs) else last_end
        out.append(EpochEntry(epoch, start, end))
    return out


def _parse(path: Path, data: bytes) -> list[tuple[int, int]]:
    lines = data.decode("utf-8", "replace").splitlines()
    if len(lines) < 2:
        raise EpochFileError(f"{path}: truncated header: {data[:64]!r}")
    try:
        count, crc = int(lines[0]), int(lines[1])
    except ValueError:
        raise EpochFileError(f"{path}: bad header lines {lines[:2]!r}") from None
    body = lines[2:]
    if count != len(body):
        raise EpochFileError(f"{path}: header says {count} entries, found {len(body)}")
    content = "".join(line + "\n" for line in body).encode()
    if _java_crc(content) != crc:
        raise EpochFileError(f"{path}: CRC mismatch over {content[:64]!r}")
    pairs: list[tuple[int, int]] = []
    for number, line in enumerate(body, start=3):
        epoch_text, sep, start_text = line.partition("-")
        if not sep or not epoch_text.isdigit() or not start_text.isdigit():
            raise EpochFileError(f"{path}: line {number} is not <epoch>-<startOffset>: {line!r}")
        pair = (int(epoch_text), int(start_text))
        if pairs and (pair[0] <= pairs[-1][0] or pair[1] < pairs[-1][1]):
            raise EpochFileError(f"{path}: line {number} {line!r} does not follow {pairs[-1]}")
        pairs.append(pair)
    return pairs


def _render(pairs: Sequence[tuple[int, int]]) -> bytes:
    content = "".join(f"{epoch}-{start}\n" for epoch, start in pairs).encode()
    return f"{len(pairs)}\n{_java_crc(content)}\n".encode() + content


class EpochFile:
    """The epoch entries of one store, kept in memory and persisted on every change."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._pairs: list[tuple[int, int]] = []

    @classmethod
    def open(cls, store_root: str | os.PathLike[str]) -> EpochFile:
        """Load ``<store_root>/epochFileCheckpoint`` (empty when it does not exist yet)."""
        epoch_file = cls(Path(store_root) / EPOCH_FILE_NAME)
        epoch_file.load()
        return epoch_file

    def load(self) -> None:
        errors: list[str] = []
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            try:
                self._pairs = _parse(candidate, data)
            except EpochFileError as exc:
                log.error("epoch file unusable: %s", exc)
                errors.append(str(exc))
                continue
            if candidate != self.path:
                log.warning("epoch entries loaded from the backup %s", candidate)
            return
        if errors:
            raise EpochFileError("; ".join(errors))
        self._pairs = []

    def _persist(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_render(self._pairs))
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- queries ---------------------------------------------------------------------------------
    def entries(self, max_offset: int = NO_END) -> list[EpochEntry]:
        """The entries that start at or below ``max_offset`` (the CommitLog's max offset), the
        last one ending there; entries beyond describe bytes this log does not hold (yet)."""
        return _with_ends([p for p in self._pairs if p[1] <= max_offset], max_offset)

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry, -1 when there is none."""
        return self._pairs[-1][0] if self._pairs else -1

    def last_entry(self) -> EpochEntry | None:
        entries = self.entries()
        return entries[-1] if entries else None

    def entry_for_offset(self, offset: int, max_offset: int = NO_END) -> EpochEntry | None:
        """The entry whose ``[start, end)`` holds ``offset``."""
        for entry in self.entries(max_offset):
            if entry.start_offset <= offset < entry.end_offset:
                return entry
        return None

    # -- changes ---------------------------------------------------------------------------------
    def append(self, epoch: int, start_offset: int) -> AppendStatus:
        """Record that ``epoch`` writes from ``start_offset`` on (persisted before returning).

        An entry with the last entry's start offset replaces it when its epoch is newer: the
        previous master epoch wrote nothing, and both would claim an empty range.
        """
        if self._pairs:
            last_epoch, last_start = self._pairs[-1]
            if epoch <= last_epoch or start_offset < last_start:
                log.error(
                    "epoch entry %d-%d is not newer than the last one %d-%d: not appended",
                    epoch,
                    start_offset,
                    last_epoch,
                    last_start,
                )
                return AppendStatus.NOT_NEWER
            if start_offset == last_start:
                self._pairs.pop()
        self._pairs.append((epoch, start_offset))
        self._persist()
        return AppendStatus.APPENDED

    def truncate_suffix(self, offset: int) -> None:
        """Drop the entries that start at or beyond ``offset`` (after the CommitLog was cut there)."""
        kept = [pair for pair in self._pairs if pair[1] < offset]
        if kept != self._pairs:
            self._pairs = kept
            self._persist()

    def replace_all(self, entries: Sequence[EpochEntry]) -> None:
        """Take another broker's entries (a slave that starts from an empty store)."""
        self._pairs = [(e.epoch, e.start_offset) for e in entries]
        self._persist()

    def remove_files(self) -> None:
        for suffix in ("", ".bak", ".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path.with_name(self.path.name + suffix))
        self._pairs = []


def find_consistent_point(mine: Sequence[EpochEntry], masters: Sequence[EpochEntry]) -> int:
    """The highest CommitLog offset up to which both logs hold the same bytes, by epoch.

    Both lists carry real end offsets (each broker's last entry ends at its max offset).  Walking
    my entries from the newest epoch down, the first one the master has with the same start
    offset gives ``min(my end, master's end)``: below it both logs were written by the same
    master epoch from the same start.  -1 when they share no epoch (Java's
    ``EpochFileCache.findConsistentPoint``).
    """
    by_epoch = {entry.epoch: entry for entry in masters}
    for entry in sorted(mine, key=lambda e: e.epoch, reverse=True):
        other = by_epoch.get(entry.epoch)
        if other is not None and other.start_offset == entry.start_offset:
            return min(entry.end_offset, other.end_offset)
    return -1
