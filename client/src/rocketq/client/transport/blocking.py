"""Blocking transport: ``BlockingRemotingClient`` for Spark executors, CLIs and plain threads.

The same sans-IO :class:`~rocketq.client.remoting.connection.RemotingConnection` as the asyncio
transport, driven by plain blocking sockets, so any number of threads can share one client.

Theory of operation: there is one connection per address, opened lazily and re-opened after a
failure.  A caller stamps its request (opaque allocation) under the connection's state lock,
registers a waiter, writes the frame under a separate write lock and sleeps on its waiter.  One
reader thread per connection receives bytes, feeds them to the connection under the state lock
and wakes the waiter of each response; requests the server sends us (transaction check-backs,
consumer-change notifications) run on a small thread pool so a processor may itself call
``invoke``.  The two locks are separate so a writer stuck on a full socket never stops the reader
from draining responses.  When the connection breaks, every waiter fails with
``RemotingError``; a process fork (Spark's Python workers) discards connections inherited from
the parent instead of sharing their sockets.

With an ``ssl_context`` (TLS, :mod:`rocketq.client.transport.tls`) each socket is wrapped after
connecting, the handshake counting against the connect timeout.  OpenSSL forbids reading and
writing one TLS connection from two threads at once, so the ``SSLSocket`` is put in non-blocking
mode behind :class:`_TlsSocket`: every TLS call holds one lock and returns at once, and waiting
for the socket to become readable or writable happens outside that lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rocketq.client.errors import ProtocolError, RemotingError, RocketQError
from rocketq.client.remoting.command import RPC_ONEWAY, RemotingCommand
from rocketq.client.remoting.connection import (
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
)
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, SerializeType
from rocketq.client.transport.common import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    closed_error,
    connect_error,
    not_supported_response,
    parse_addr,
    prepare_response,
    system_error_response,
    timeout_error,
)

__all__ = ["BlockingProcessor", "BlockingRemotingClient"]

log = logging.getLogger("rocketq.transport.blocking")

BlockingProcessor = Callable[[RemotingCommand, str], RemotingCommand | None]
"""Handles a request a server sent us: ``(request, server address) -> response or None``."""

_RECV_SIZE = 256 * 1024


class _Waiter:
    __slots__ = ("error", "event", "response")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.response: RemotingCommand | None = None
        self.error: BaseException | None = None


class _TlsSocket:
    """A non-blocking ``SSLSocket`` shared by the reader thread and the writers (module docstring)."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._lock = threading.Lock()

    def recv(self, size: int) -> bytes:
        while True:
            with self._lock:
                try:
                    return self._sock.recv(size)
                except ssl.SSLWantReadError:
                    readable = True
                except ssl.SSLWantWriteError:
                    readable = False
            self._wait(readable)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            readable = False
            with self._lock:
                try:
                    sent = self._sock.send(view)
                except ssl.SSLWantWriteError:
                    sent = 0
                except ssl.SSLWantReadError:
                    sent, readable = 0, True
            if sent:
                view = view[sent:]
            else:
                self._wait(readable)

    def _wait(self, readable: bool) -> None:
        # bounded, so a state change this thread could not see only costs a retry; a socket closed
        # meanwhile makes select fail and the next call raise OSError, which the callers handle
        watched = [self._sock]
        with contextlib.suppress(OSError, ValueError):
            select.select(watched if readable else [], [] if readable else watched, [], 0.5)

    def shutdown(self, how: int) -> None:
        with self._lock:
            self._sock.shutdown(how)

    def close(self) -> None:
        with self._lock:
            self._sock.close()


class _Connection:
    """One socket with its reader thread; see the module docstring."""

    def __init__(self, client: BlockingRemotingClient, addr: str, sock: socket.socket | _TlsSocket) -> None:
        self.addr = addr
        self.closed = False
        self._client = client
        self._sock = sock
        self._conn = RemotingConnection(client.serialize_type, max_frame_length=client.max_frame_length)
        self._state_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._reader = threading.Thread(target=self._read_loop, name=f"rocketq-reader-{addr}", daemon=True)
        self._reader.start()

    def invoke(self, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        cmd.flag &= ~RPC_ONEWAY
        waiter = _Waiter()
        with self._state_lock:
            if self.closed:
                raise closed_error(self.addr, "connection already closed")
            data = self._conn.send_request(cmd)
            self._waiters[cmd.opaque] = waiter
        try:
            self._send(data)
            if not waiter.event.wait(timeout_ms / 1000):
                raise timeout_error(self.addr, cmd, timeout_ms)
        finally:
            with self._state_lock:
                if self._waiters.pop(cmd.opaque, None) is not None:
                    self._conn.cancel(cmd.opaque)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.response is not None
        return waiter.response

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= RPC_ONEWAY
        with self._state_lock:
            if self.closed:
                raise closed_error(self.addr, "connection already closed")
            data = self._conn.send_request(cmd)
        self._send(data)

    def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        with self._state_lock:
            data = self._conn.send_response(prepare_response(request, response))
        self._send(data)

    def _send(self, data: bytes) -> None:
        try:
            with self._write_lock:
                self._sock.sendall(data)
        except OSError as exc:
            self.close(f"send failed: {exc}")
            raise closed_error(self.addr, f"send failed ({exc})") from exc

    def _read_loop(self) -> None:
        why = "connection closed by peer"
        try:
            while True:
                data = self._sock.recv(_RECV_SIZE)
                if not data:
                    break
                with self._state_lock:
                    events = self._conn.receive_data(data)
                for event in events:
                    if isinstance(event, ResponseReceived):
                        self._complete(event.command)
                    elif isinstance(event, RequestReceived):
                        self._client._dispatch(self, event.command)
        except ProtocolError as exc:
            log.warning("closing connection to %s: malformed frame: %s", self.addr, exc)
            why = f"malformed frame ({exc})"
        except OSError as exc:
            why = f"connection error ({exc})"
        self.close(why)

    def _complete(self, response: RemotingCommand) -> None:
        with self._state_lock:
            waiter = self._waiters.pop(response.opaque, None)
        if waiter is not None:
            waiter.response = response
            waiter.event.set()

    def close(self, why: str = "connection closed") -> None:
        with self._state_lock:
            if self.closed:
                return
            self.closed = True
            self._conn.fail_all()
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.error = closed_error(self.addr, why)
            waiter.event.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        self._client._forget(self)

    def join(self, timeout_s: float) -> None:
        if self._reader is not threading.current_thread():
            self._reader.join(timeout_s)


class BlockingRemotingClient:
    """Thread-safe blocking remoting client; one connection per address, shared by all threads."""

    def __init__(
        self,
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        connect_timeout_ms: float = DEFAULT_CONNECT_TIMEOUT_MS,
        max_frame_length: int = MAX_FRAME_LENGTH,
        callback_threads: int = 4,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.serialize_type = serialize_type
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_length = max_frame_length
        self.ssl_context = ssl_context  # TLS on every connection (rocketq.client.transport.tls)
        self._callback_threads = callback_threads
        self._processors: dict[int, BlockingProcessor] = {}
        self._lock = threading.Lock()
        self._conns: dict[str, _Connection] = {}
        self._connect_locks: dict[str, threading.Lock] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._pid = os.getpid()
        self._closed = False

    def register(self, code: int, processor: BlockingProcessor) -> None:
        """Handle requests with ``code`` that servers send us, on the callback thread pool."""
        self._processors[int(code)] = processor

    def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send a request to ``addr`` and block until its response or ``timeout_ms``."""
        conn = self._connection(addr, timeout_ms)
        try:
            return conn.invoke(cmd, timeout_ms)
        except RemotingError as exc:
            if type(exc) is RemotingError:
                raise RemotingError(f"{exc} (request code {cmd.code} to {addr})") from exc
            raise

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a request that expects no response."""
        self._connection(addr, None).invoke_oneway(cmd)

    def _connection(self, addr: str, timeout_ms: float | None) -> _Connection:
        with self._lock:
            if self._pid != os.getpid():
                self._after_fork()
            if self._closed:
                raise RemotingError("the remoting client is closed")
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            connect_lock = self._connect_locks.setdefault(addr, threading.Lock())
        with connect_lock:
            with self._lock:
                conn = self._conns.get(addr)
                if conn is not None and not conn.closed:
                    return conn
            conn = _Connection(self, addr, self._open_socket(addr, timeout_ms))
            with self._lock:
                closed = self._closed
                if not closed:
                    self._conns[addr] = conn
            if closed:
                conn.close("client closed")
                raise RemotingError("the remoting client is closed")
            return conn

    def _open_socket(self, addr: str, timeout_ms: float | None) -> socket.socket | _TlsSocket:
        host, port = parse_addr(addr)
        limit_ms = self.connect_timeout_ms if timeout_ms is None else min(timeout_ms, self.connect_timeout_ms)
        try:
            sock = socket.create_connection((host, port), timeout=limit_ms / 1000)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                try:
                    return _TlsSocket(self.ssl_context.wrap_socket(sock, server_hostname=host))
                except OSError:
                    sock.close()
                    raise
        except TimeoutError:
            raise connect_error(addr, f"timed out after {limit_ms:g} ms") from None
        except OSError as exc:
            raise connect_error(addr, exc) from exc
        sock.settimeout(None)
        return sock

    def _after_fork(self) -> None:
        # Inherited sockets belong to the parent; forget them without shutting them down.
        self._conns = {}
        self._connect_locks = {}
        self._executor = None
        self._pid = os.getpid()

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            if self._conns.get(conn.addr) is conn:
                del self._conns[conn.addr]

    def _dispatch(self, conn: _Connection, request: RemotingCommand) -> None:
        with self._lock:
            if self._closed:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._callback_threads, thread_name_prefix="rocketq-callback"
                )
            executor = self._executor
        executor.submit(self._run_processor, conn, request)

    def _run_processor(self, conn: _Connection, request: RemotingCommand) -> None:
        processor = self._processors.get(request.code)
        if processor is None:
            response: RemotingCommand | None = not_supported_response(request)
        else:
            try:
                response = processor(request, conn.addr)
            except Exception as exc:
                trace = not isinstance(exc, RocketQError)
                log.warning(
                    "processor for code %d from %s raised: %r", request.code, conn.addr, exc, exc_info=trace
                )
                response = system_error_response(request, exc)
        if response is not None and not request.is_oneway and not conn.closed:
            with contextlib.suppress(RemotingError):
                conn.send_response(request, response)

    def close_connection(self, addr: str) -> None:
        with self._lock:
            conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close("closed by client")

    def close(self) -> None:
        """Close every connection (waiting calls fail with RemotingError) and the callback pool."""
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
            executor, self._executor = self._executor, None
        for conn in conns:
            conn.close("client closed")
        for conn in conns:
            conn.join(1.0)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> BlockingRemotingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
