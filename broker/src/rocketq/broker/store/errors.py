"""Errors raised by the broker storage engine.

Expected outcomes of appends and reads are status enums (:mod:`.status`); the exceptions here are
for broken invariants and I/O: a corrupt segment in the middle of the CommitLog, a store locked by
another broker, a configuration that does not match the files on disk.  All derive from
:class:`rocketq.client.errors.RocketQError`.
"""

from __future__ import annotations

from rocketq.client.errors import RocketQError


class StoreError(RocketQError):
    """Root of the storage engine's errors."""


class StoreConfigError(StoreError):
    """A StoreConfig value is invalid, or the files on disk do not match it."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock file."""


class StoreCorruptError(StoreError):
    """A segment is damaged where truncation would lose acknowledged data.

    Carries the file path, the byte position in that file and a short hex dump of the bytes found
    there, so that the operator can decide what to do.
    """

    def __init__(self, message: str, *, path: str = "", position: int = -1, found: bytes = b"") -> None:
        detail = message
        if path:
            detail += f" (file={path}, position={position}, bytes={found[:32].hex()})"
        super().__init__(detail)
        self.path = path
        self.position = position
        self.found = found


class StoreIOError(StoreError):
    """An operating-system error while creating, mapping, flushing or deleting a file."""


class MetadataError(StoreError):
    """A config/*.json file (and its .bak) cannot be read or parsed."""
