"""Pieces shared by the asyncio and the blocking transports.

Address parsing (``"host:port"``, ``"[v6]:port"``), the errors a transport raises (each naming the
remote address, and for timeouts the request code and the timeout), and the standard answers a
server gives without a processor: ``REQUEST_CODE_NOT_SUPPORTED`` for an unregistered code,
``SYSTEM_ERROR`` for a processor that raised, ``SYSTEM_BUSY`` when the request queue is full.
Keeping them here means the two transports answer and fail in exactly the same words.
"""

from __future__ import annotations

from rocketq.client.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "busy_response",
    "closed_error",
    "connect_error",
    "format_addr",
    "not_supported_response",
    "parse_addr",
    "prepare_response",
    "system_error_response",
    "timeout_error",
]

DEFAULT_CONNECT_TIMEOUT_MS = 3000
"""RocketMQ's ``connectTimeoutMillis``."""


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` or ``"[ipv6]:port"``; raise RemotingConnectError when malformed."""
    text = addr.strip()
    host, sep, port_text = text.rpartition(":")
    if text.startswith("[") and "]" in text:
        host = text[1 : text.index("]")]
        port_text = text[text.index("]") + 1 :].lstrip(":")
        sep = ":" if port_text else ""
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RemotingConnectError(f"bad remoting address {addr!r}: expected host:port")
    return host, int(port_text)


def format_addr(host: str, port: int) -> str:
    """``"host:port"``, with IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def timeout_error(addr: str, cmd: RemotingCommand, timeout_ms: float) -> RemotingTimeoutError:
    return RemotingTimeoutError(
        f"wait response on the channel <{addr}> timeout, {timeout_ms:g} ms"
        f" (request code {cmd.code}, opaque {cmd.opaque})"
    )


def connect_error(addr: str, exc: BaseException | str) -> RemotingConnectError:
    return RemotingConnectError(f"connect to <{addr}> failed: {exc}")


def closed_error(addr: str, why: str = "connection closed") -> RemotingError:
    return RemotingError(f"channel <{addr}>: {why} before a response arrived")


def not_supported_response(request: RemotingCommand) -> RemotingCommand:
    return request.make_response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
    )


def system_error_response(request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    text = str(exc) or type(exc).__name__
    return request.make_response(ResponseCode.SYSTEM_ERROR, text)


def busy_response(request: RemotingCommand, queued: int) -> RemotingCommand:
    return request.make_response(
        ResponseCode.SYSTEM_BUSY,
        f"[REJECTREQUEST]system busy, start flow control for a while ({queued} requests queued)",
    )


def prepare_response(request: RemotingCommand, response: RemotingCommand) -> RemotingCommand:
    """Make a processor's answer a proper response to ``request`` (opaque echoed, RESPONSE flag)."""
    response.opaque = request.opaque
    response.flag = (response.flag | RPC_RESPONSE) & ~RPC_ONEWAY
    return response
