"""Sans-IO state of one remoting connection: opaque allocation and request/response matching.

A :class:`RemotingConnection` turns outgoing commands into bytes and incoming bytes into events;
it never touches a socket, so the asyncio and blocking transports (and the tests) drive the same
object.  Either side of a RocketMQ connection may send requests (the broker calls consumers and
producers back), so one connection handles both directions.

Theory of operation: ``send_request`` stamps the command with the next opaque and, unless it is
oneway, records the opaque as pending.  ``receive_data`` feeds the frame decoder and classifies
each decoded command: a request (RESPONSE flag clear) becomes :class:`RequestReceived`; a
response whose opaque is pending becomes :class:`ResponseReceived` and clears the opaque; any other
response (late after a timeout, or never asked for) becomes :class:`UnexpectedResponse`.  Opaques
are signed 32-bit and wrap around, skipping values still pending so a slow request is never
confused with a new one.  A malformed frame raises ``FrameError``/``ProtocolError``; the connection
is then unusable and the transport must close it and fail its pending requests (``fail_all``).
A request whose framing is sound and whose opaque is usable but whose other header fields are not
(see :class:`~rocketq.client.remoting.command.MalformedRequestError`) does not break the
connection: it becomes :class:`MalformedRequest`, which the transport answers ``SYSTEM_ERROR``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.client.errors import ClientError, ProtocolError
from rocketq.client.remoting.command import (
    RPC_ONEWAY,
    RPC_RESPONSE,
    MalformedRequestError,
    RemotingCommand,
    decode_command,
    encode_command,
)
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, FrameDecoder, SerializeType

__all__ = [
    "Event",
    "MalformedRequest",
    "RemotingConnection",
    "RequestReceived",
    "ResponseReceived",
    "UnexpectedResponse",
]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer sent a request; answer it with ``send_response`` unless it is oneway."""

    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The response to one of our pending requests (``command.opaque`` is no longer pending)."""

    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class UnexpectedResponse:
    """A response whose opaque is not pending: late after a timeout, cancelled, or bogus."""

    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class MalformedRequest:
    """A request with a usable opaque but a bad code/flag/version/extFields: answer SYSTEM_ERROR.

    ``command`` holds what could be read: the opaque, and the ONEWAY flag when the flag was
    readable (code 0, no fields); ``reason`` names the bad field.
    """

    command: RemotingCommand
    reason: str


Event = RequestReceived | ResponseReceived | UnexpectedResponse | MalformedRequest


class RemotingConnection:
    """Opaque allocation and request/response matching for one connection, without I/O."""

    __slots__ = ("_broken", "_decoder", "_next_opaque", "_pending", "serialize_type")

    def __init__(
        self,
        serialize_type: SerializeType = SerializeType.JSON,
        *,
        first_opaque: int = 1,
        max_frame_length: int = MAX_FRAME_LENGTH,
    ) -> None:
        if not _INT32_MIN <= first_opaque <= _INT32_MAX:
            raise ClientError(f"first_opaque {first_opaque} is not a signed int32")
        self.serialize_type = serialize_type
        self._decoder = FrameDecoder(max_frame_length)
        self._next_opaque = first_opaque
        self._pending: set[int] = set()
        self._broken: str | None = None

    # ------------------------------------------------------------------ outgoing

    def send_request(self, cmd: RemotingCommand) -> bytes:
        """Assign ``cmd.opaque``, record it as pending unless oneway, and return the frame bytes."""
        if cmd.is_response:
            raise ClientError(f"send_request got a response (flag {cmd.flag}); use send_response")
        opaque = self._allocate_opaque()
        cmd.opaque = opaque
        data = encode_command(cmd, self.serialize_type)
        if not cmd.is_oneway:
            self._pending.add(opaque)
        return data

    def send_response(self, cmd: RemotingCommand) -> bytes:
        """Return the frame bytes of a response (the RESPONSE flag is set if it was not)."""
        if not cmd.flag & RPC_RESPONSE:
            cmd.flag |= RPC_RESPONSE
        return encode_command(cmd, self.serialize_type)

    def _allocate_opaque(self) -> int:
        pending = self._pending
        if len(pending) > _INT32_MAX:  # pragma: no cover - 2**31 requests in flight
            raise ClientError("no free opaque: every 32-bit value is pending")
        opaque = self._next_opaque
        while opaque in pending:
            opaque = _INT32_MIN if opaque == _INT32_MAX else opaque + 1
        self._next_opaque = _INT32_MIN if opaque == _INT32_MAX else opaque + 1
        return opaque

    # ------------------------------------------------------------------ incoming

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Feed received bytes; return the events for every complete frame in them."""
        if self._broken is not None:
            raise ProtocolError(f"connection already failed: {self._broken}")
        try:
            payloads = self._decoder.feed(data)
            events: list[Event] = []
            pending = self._pending
            for payload in payloads:
                try:
                    cmd = decode_command(payload)
                except MalformedRequestError as exc:
                    flag = RPC_ONEWAY if exc.oneway else 0
                    events.append(
                        MalformedRequest(RemotingCommand(0, opaque=exc.opaque, flag=flag), str(exc))
                    )
                    continue
                if not cmd.flag & RPC_RESPONSE:
                    events.append(RequestReceived(cmd))
                elif cmd.opaque in pending:
                    pending.discard(cmd.opaque)
                    events.append(ResponseReceived(cmd))
                else:
                    events.append(UnexpectedResponse(cmd))
        except ProtocolError as exc:
            self._broken = str(exc)
            raise
        return events

    # ------------------------------------------------------------------ pending requests

    @property
    def pending_opaques(self) -> frozenset[int]:
        """Opaques of requests sent and not yet answered or cancelled."""
        return frozenset(self._pending)

    def is_pending(self, opaque: int) -> bool:
        return opaque in self._pending

    def cancel(self, opaque: int) -> bool:
        """Forget a pending request (e.g. on timeout); a later response becomes UnexpectedResponse."""
        if opaque in self._pending:
            self._pending.discard(opaque)
            return True
        return False

    def fail_all(self) -> list[int]:
        """Forget every pending request (connection closed); return their opaques, sorted."""
        opaques = sorted(self._pending)
        self._pending.clear()
        return opaques

    @property
    def buffered(self) -> int:
        """Bytes received and held for a frame not yet complete."""
        return self._decoder.buffered

    def release(self) -> None:
        """Drop the bytes held for an incomplete frame (the connection is closed)."""
        self._decoder.clear()

    @property
    def broken(self) -> bool:
        """True once a protocol error was raised; the transport must close the connection."""
        return self._broken is not None
