"""The private background event loop that the blocking client APIs run on.

The client is written once, in asyncio.  The blocking classes (``Producer``, ``LitePullConsumer``,
``PushConsumer``, ``Admin``, ``BlockingMQClientAPI``) own an asyncio object that lives on a daemon
thread running an event loop (uvloop's when installed: :mod:`rocketq.client.transport.event_loop`),
and call it with :meth:`BackgroundLoop.run`, which submits the coroutine with
``asyncio.run_coroutine_threadsafe`` and waits for its result.

One loop thread is shared per process (:func:`acquire_loop` / :func:`release_loop` count its
users; the last release stops it).  The loop remembers the pid that started it: after a ``fork``
(PySpark's daemon forks its Python workers) the child gets a fresh loop instead of the parent's,
whose thread does not exist in the child.  Calling :meth:`run` from the loop thread itself would
deadlock, so it raises :class:`~rocketq.client.errors.ClientError` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar, cast

from rocketq.client.errors import ClientError
from rocketq.client.transport.event_loop import new_event_loop

__all__ = ["BackgroundLoop", "acquire_loop", "release_loop"]

T = TypeVar("T")


class BackgroundLoop:
    """An asyncio event loop running forever on a daemon thread."""

    def __init__(self, name: str = "rocketq-client-loop") -> None:
        self._name = name
        self._loop = new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.pid = os.getpid()
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        finally:
            self._finish()

    def _finish(self) -> None:
        tasks = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_running(self) -> bool:
        return self._thread.is_alive() and self.pid == os.getpid()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; returns a thread-safe future."""
        if not self.is_running():
            coro.close()
            raise ClientError("the client's background event loop is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes (or ``timeout_s`` passes: then it
        is cancelled and TimeoutError raised)."""
        if self.in_loop_thread():
            coro.close()
            raise ClientError(
                "a blocking rocketq API was called from its own event loop thread; "
                "use the Async* classes inside asyncio code"
            )
        if not self.is_running():
            coro.close()
            raise ClientError("the client's background event loop is not running")
        return _Call(self._loop, coro).wait(timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel what is still running, stop the loop and join the thread."""
        if not self.is_running():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_loop_thread():
            self._thread.join(timeout_s)


class _Call(Generic[T]):
    """One :meth:`BackgroundLoop.run`: the coroutine runs as a task on the loop, and the caller
    waits on a plain lock that the task's done callback releases.  One lock hand-off per call,
    where ``run_coroutine_threadsafe`` chains two futures and waits on a condition variable: the
    blocking APIs pay this on every request."""

    __slots__ = ("_coro", "_done", "_error", "_loop", "_result", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> None:
        self._loop = loop
        self._coro: Coroutine[Any, Any, T] | None = coro
        self._task: asyncio.Task[T] | None = None
        self._result: T | None = None
        self._error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()
        try:
            loop.call_soon_threadsafe(self._start)
        except RuntimeError:  # the loop closed meanwhile
            coro.close()
            raise ClientError("the client's background event loop is not running") from None

    def _start(self) -> None:  # on the loop
        coro, self._coro = self._coro, None
        if coro is None:  # cancelled before it started
            return
        self._task = self._loop.create_task(coro)
        self._task.add_done_callback(self._finish)

    def _finish(self, task: asyncio.Task[T]) -> None:  # on the loop
        if task.cancelled():
            self._error = concurrent.futures.CancelledError()
        elif (exc := task.exception()) is not None:
            self._error = exc
        else:
            self._result = task.result()
        self._done.release()

    def _cancel(self) -> None:  # on the loop
        if self._task is not None:
            self._task.cancel()
        elif self._coro is not None:
            self._coro.close()
            self._coro = None

    def _cancel_soon(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing runs any more
            self._loop.call_soon_threadsafe(self._cancel)

    def wait(self, timeout_s: float | None) -> T:
        try:
            finished = self._done.acquire(timeout=-1 if timeout_s is None else max(timeout_s, 0.0))
        except KeyboardInterrupt:
            self._cancel_soon()
            raise
        if not finished:
            self._cancel_soon()
            raise TimeoutError(f"the call did not finish within {timeout_s} s")
        error, self._error = self._error, None
        if error is not None:
            raise error
        return cast(T, self._result)


_lock = threading.Lock()
_shared: BackgroundLoop | None = None
_users = 0


def acquire_loop() -> BackgroundLoop:
    """The process-wide background loop, started on first use; pair with :func:`release_loop`."""
    global _shared, _users
    with _lock:
        if _shared is None or _shared.pid != os.getpid() or not _shared.is_running():
            _shared = BackgroundLoop()
            _users = 0
        _users += 1
        return _shared


def release_loop(loop: BackgroundLoop) -> None:
    """Drop one user of the shared loop; the last user stops it."""
    global _shared, _users
    with _lock:
        if loop is not _shared:
            loop.stop()
            return
        _users -= 1
        last = _users <= 0
        if last:
            _shared = None
            _users = 0
    if last:
        loop.stop()
