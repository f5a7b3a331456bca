"""Bounded waits for tests: poll a condition until it holds or a deadline passes.

Servers, brokers and clients in the tests work asynchronously (a route reaches the NameServer
after the broker's next registration, a slave catches up in the background), so a test waits for
the state it needs instead of sleeping a fixed time.  Every wait here is bounded and, when the
deadline passes, fails with an ``AssertionError`` that names what it waited for and how long.
The ``async_`` variants poll the same way inside an event loop (tests of asyncio components).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "async_wait_for", "async_wait_value", "wait_for", "wait_value"]

_T = TypeVar("_T")

#: how long a wait polls when the caller names no bound
DEFAULT_WAIT_S = 30.0


class WaitTimeout(AssertionError):
    """A wait's deadline passed before its condition held; ``what`` names the condition."""

    def __init__(self, what: str, timeout_s: float, last_error: BaseException | None = None) -> None:
        detail = f" (last error: {last_error!r})" if last_error is not None else ""
        super().__init__(f"timed out after {timeout_s:g} s waiting for {what}{detail}")
        self.what = what
        self.timeout_s = timeout_s
        self.last_error = last_error


def wait_for(
    predicate: Callable[[], bool],
    what: str,
    timeout_s: float = DEFAULT_WAIT_S,
    *,
    interval_s: float = 0.05,
) -> None:
    """Poll ``predicate`` every ``interval_s`` until it returns true; raise :class:`WaitTimeout`
    (naming ``what``) when it has not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise WaitTimeout(what, timeout_s)
        time.sleep(interval_s)


def wait_value(
    probe: Callable[[], _T | None],
    what: str,
    timeout_s: float = DEFAULT_WAIT_S,
    *,
    interval_s: float = 0.05,
    retry_on: tuple[type[BaseException], ...] = (),
) -> _T:
    """Poll ``probe`` until it returns something other than ``None`` or ``False`` and return it.

    Exceptions of the types in ``retry_on`` count as "not yet" (the last one is named in the
    :class:`WaitTimeout` raised after ``timeout_s``); any other exception ends the wait.
    """
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while True:
        try:
            value = probe()
        except retry_on as exc:
            value, last = None, exc
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(what, timeout_s, last)
        time.sleep(interval_s)


async def async_wait_for(
    predicate: Callable[[], bool],
    what: str,
    timeout_s: float = DEFAULT_WAIT_S,
    *,
    interval_s: float = 0.01,
) -> None:
    """:func:`wait_for` inside an event loop: the loop runs between the polls."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise WaitTimeout(what, timeout_s)
        await asyncio.sleep(interval_s)


async def async_wait_value(
    probe: Callable[[], Awaitable[_T | None]],
    what: str,
    timeout_s: float = DEFAULT_WAIT_S,
    *,
    interval_s: float = 0.05,
) -> _T:
    """Await ``probe`` until it returns something other than ``None`` or ``False`` and return it;
    raise :class:`WaitTimeout` (naming ``what``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(what, timeout_s)
        await asyncio.sleep(interval_s)
