"""A child process's output lines for tests, read on a thread as they come.

Programs such as ``rocketq dev`` print what a test needs (``NAMESRV_ADDR=...``,
``BROKER_METRICS_URL=...``) and keep running.  :class:`ProcessOutput` reads the process's stdout
on a daemon thread and lets a test wait, bounded in time, for the ``KEY=VALUE`` lines it needs;
when the process ends or the deadline passes first, the failure shows the output so far.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import IO

from rocketq.client.testing.wait import DEFAULT_WAIT_S, WaitTimeout, wait_for

__all__ = ["ProcessOutput"]


class ProcessOutput:
    """The lines (without their newline) of ``stream``, collected until it ends."""

    def __init__(self, stream: IO[str]) -> None:
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._ended = False
        self._stream = stream
        threading.Thread(target=self._read, name="process-output", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                with self._lock:
                    self._lines.append(line.rstrip("\n"))
        finally:
            with self._lock:
                self._ended = True

    def ended(self) -> bool:
        """Whether the stream ended (the process closed its stdout or exited)."""
        with self._lock:
            return self._ended

    def wait_ended(self, timeout_s: float = DEFAULT_WAIT_S) -> None:
        """Wait until the stream ended, after the process was told to stop."""
        wait_for(self.ended, "the end of the process's output", timeout_s)

    def lines(self) -> list[str]:
        """The lines read so far."""
        with self._lock:
            return list(self._lines)

    def text(self) -> str:
        return "\n".join(self.lines())

    def assignments(self) -> dict[str, str]:
        """Every ``KEY=VALUE`` line read so far (a later line wins)."""
        out: dict[str, str] = {}
        for line in self.lines():
            key, sep, value = line.partition("=")
            if sep and key and " " not in key:
                out[key] = value
        return out

    def values(self, keys: Collection[str], timeout_s: float = DEFAULT_WAIT_S) -> dict[str, str]:
        """Wait until a ``KEY=VALUE`` line was read for each of ``keys``; every assignment read."""

        def complete() -> bool:
            ended = self.ended()
            if set(keys) <= self.assignments().keys():
                return True
            if ended:
                raise AssertionError(f"the output ended without {sorted(keys)}:\n{self.text()}")
            return False

        try:
            wait_for(complete, f"the lines {sorted(keys)}", timeout_s)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc.what} in the output:\n{self.text()}", timeout_s) from None
        return self.assignments()
