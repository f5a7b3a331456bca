"""MappedFileQueue: the ordered list of fixed-size segments that make up one logical file.

The CommitLog and every ConsumeQueue are a MappedFileQueue: segments named by the 20-digit byte
offset at which they start, each exactly ``mapped_file_size`` bytes.  The list is replaced
copy-on-write (a tuple), so readers take a snapshot without a lock while the single writer rolls
to a new segment.  Loading checks that the names are contiguous and the sizes match the config:
a short *last* segment (a torn copy or a crash during creation) is extended with zeros for
recovery to validate, a short or missing segment in the middle is reported as corruption.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from rocketq.broker.store.errors import StoreConfigError, StoreCorruptError
from rocketq.broker.store.mapped_file import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)


class MappedFileQueue:
    """Segments of one logical file, oldest first."""

    def __init__(
        self, store_path: str, mapped_file_size: int, *, preallocate: bool = True, page_cache_window: int = 0
    ) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.preallocate = preallocate
        self.files: tuple[MappedFile, ...] = ()
        self.flushed_where = 0
        #: bytes behind ``flushed_where`` left in the page cache after a flush; older pages are
        #: dropped from it (0: none are, the kernel decides; ``commitLogPageCacheWindow``)
        self.page_cache_window = page_cache_window
        self._released_where = 0  # where the pages before have been dropped

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Map the existing segments (all marked fully written; recovery sets the real tail)."""
        if not os.path.isdir(self.store_path):
            self.files = ()
            return
        names = sorted(n for n in os.listdir(self.store_path) if len(n) == 20 and n.isdigit())
        files: list[MappedFile] = []
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            size = os.path.getsize(path)
            expected_offset = files[-1].file_from_offset + self.mapped_file_size if files else int(name)
            if int(name) != expected_offset:
                raise StoreCorruptError(
                    f"segment missing before {path}: expected a segment starting at {expected_offset}",
                    path=path,
                    position=0,
                )
            if size > self.mapped_file_size:
                raise StoreConfigError(
                    f"segment {path} is {size} bytes but the configured size is {self.mapped_file_size}; "
                    "check mapped_file_size settings"
                )
            if size < self.mapped_file_size:
                if i != len(names) - 1:
                    raise StoreCorruptError(
                        f"segment {path} is truncated to {size} of {self.mapped_file_size} bytes and is not "
                        "the last one",
                        path=path,
                        position=size,
                    )
                log.warning(
                    "last segment %s is truncated to %d of %d bytes; extending it for recovery",
                    path,
                    size,
                    self.mapped_file_size,
                )
            mf = MappedFile(path, self.mapped_file_size, create=False, preallocate=False)
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            files.append(mf)
        self.files = tuple(files)

    # -- segment access --------------------------------------------------------------------
    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The segment to write into, creating one if there is none or the last is full."""
        last = self.last()
        if last is not None and not last.is_full:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        return self._create(create_offset)

    def create_next(self) -> MappedFile:
        """Create the segment after the last one even if the last is not full yet.

        The CommitLog uses this to roll over in the middle of a batch: the new segment exists
        before the old one's tail (records and blank marker) is published.
        """
        last = self.last()
        return self._create(last.file_from_offset + self.mapped_file_size if last is not None else 0)

    def _create(self, offset: int) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        mf = MappedFile(
            os.path.join(self.store_path, offset_to_file_name(offset)),
            self.mapped_file_size,
            preallocate=self.preallocate,
        )
        if not self.files:
            self.flushed_where = offset
        self.files = (*self.files, mf)
        return mf

    def find_mapped_file_by_offset(
        self, offset: int, return_first_on_not_found: bool = False
    ) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        idx = (offset - first.file_from_offset) // self.mapped_file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return first if return_first_on_not_found else None

    # -- bounds ----------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first is not None else 0

    @property
    def max_offset(self) -> int:
        last = self.last()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    @property
    def max_wrote_position(self) -> int:
        return self.max_offset

    # -- flushing --------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """Flush the segment holding ``flushed_where`` (and any full ones before the tail); then,
        with a ``page_cache_window``, drop the pages more than that far behind it from the page cache."""
        flushed = self._flush_segments(least_pages)
        if self.page_cache_window > 0:
            self._release_page_cache(self.flushed_where - self.page_cache_window)
        return flushed

    def _release_page_cache(self, limit: int) -> None:
        files = self.files
        if not files:
            return
        where = max(self._released_where, files[0].file_from_offset)
        while where < limit:
            mf = self.find_mapped_file_by_offset(where)
            if mf is None:
                break
            end = min(limit, mf.file_from_offset + self.mapped_file_size)
            mf.release_page_cache(where - mf.file_from_offset, end - mf.file_from_offset)
            where = end
        self._released_where = where

    def _flush_segments(self, least_pages: int) -> bool:
        flushed = False
        while True:
            mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
            if mf is None:
                return flushed
            did = mf.flush(least_pages)
            flushed = flushed or did
            where = mf.file_from_offset + mf.flushed_position
            if where <= self.flushed_where:
                return flushed
            self.flushed_where = where
            if mf.flushed_position < self.mapped_file_size:
                return flushed

    # -- truncation and deletion -----------------------------------------------------------
    def set_max_offset(self, offset: int, *, zero_tail: bool = True) -> None:
        """Make ``offset`` the end of the data: later segments are deleted, the tail is zeroed."""
        keep: list[MappedFile] = []
        for mf in self.files:
            end = mf.file_from_offset + self.mapped_file_size
            if end <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                mf.truncate_to(offset - mf.file_from_offset, zero_tail=zero_tail)
                keep.append(mf)
            else:
                log.info("deleting segment %s beyond the recovered end %d", mf.path, offset)
                mf.destroy()
        self.files = tuple(keep)
        if (
            keep
            and offset % self.mapped_file_size == 0
            and keep[-1].file_from_offset + self.mapped_file_size == offset
        ):
            keep[-1].wrote_position = keep[-1].flushed_position = self.mapped_file_size
        self.flushed_where = min(self.flushed_where, offset) if keep else offset
        self._released_where = min(self._released_where, offset)

    def delete_files_if(
        self,
        predicate: Callable[[MappedFile], bool],
        max_count: int,
        interval_s: float = 0.0,
        keep_last: bool = True,
    ) -> int:
        """Delete leading segments while ``predicate`` holds (never the one being written)."""
        deleted = 0
        while deleted < max_count:
            files = self.files
            if not files or (keep_last and len(files) == 1):
                break
            mf = files[0]
            if not predicate(mf):
                break
            self.files = files[1:]
            mf.destroy()
            deleted += 1
            if interval_s and deleted < max_count:
                time.sleep(interval_s)
        return deleted

    def destroy(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files = ()
        self.flushed_where = 0
        if os.path.isdir(self.store_path):
            try:
                os.rmdir(self.store_path)
            except OSError:
                pass

    def close(self) -> None:
        for mf in self.files:
            mf.close()
