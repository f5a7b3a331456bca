"""Errors raised by the NameServer.

Route-registry outcomes that a client expects (an unknown topic, a stale data version) are
answered with response codes, not raised; these exceptions cover bad configuration and request
bodies that cannot be decoded, which the request processor turns into ``SYSTEM_ERROR``.
"""

from __future__ import annotations

from rocketq.client.errors import RocketQError


class NamesrvError(RocketQError):
    """Root of the NameServer's errors."""


class NamesrvConfigError(NamesrvError):
    """A configuration value or file is invalid."""


class RegisterBodyError(NamesrvError):
    """A REGISTER_BROKER body is corrupt (bad CRC32, bad zlib stream, bad JSON)."""
