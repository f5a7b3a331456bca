"""Error hierarchy shared by every rocketq component.

``RocketQError`` is the root; each component's ``errors.py`` derives from it.  Errors that come
from the wire carry the RocketMQ response code and remark, and say whether a retry may help.
Expected outcomes (a pull that found nothing, a send that timed out flushing) are status enums,
not exceptions.
"""

from __future__ import annotations


class RocketQError(Exception):
    """Root of all rocketq errors."""

    retriable: bool = False


class ProtocolError(RocketQError):
    """Bytes on the wire or on disk do not follow the RocketMQ format."""


class FrameError(ProtocolError):
    """A remoting frame is malformed (bad length, oversize, bad header)."""


class HeaderError(ProtocolError):
    """A command header is missing a required field or has a value of the wrong type."""


class MessageFormatError(ProtocolError):
    """A stored message record, properties string or batch body is malformed."""


class RemotingError(RocketQError):
    """A transport-level failure: connect, send, timeout, closed connection."""

    retriable = True


class RemotingTimeoutError(RemotingError):
    """No response arrived within the request timeout."""


class RemotingConnectError(RemotingError):
    """Could not connect to the remote address."""


class ClientError(RocketQError):
    """A client API was used wrongly (bad argument, wrong state)."""
