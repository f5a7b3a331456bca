"""Errors raised by the broker.

Outcomes a client expects — a topic that does not exist, a pull that found nothing, a full request
queue — are answered with RocketMQ response codes and never raised.  These exceptions cover bad
configuration, request headers or bodies that cannot be decoded (the request processors turn them
into ``SYSTEM_ERROR`` or a more precise code) and broken invariants.
"""

from __future__ import annotations

from rocketq.client.errors import RocketQError


class BrokerError(RocketQError):
    """Root of the broker's errors."""


class BrokerConfigError(BrokerError):
    """A ``broker.conf`` key has a bad value, or the configuration is inconsistent.

    The message always names the offending key so that the operator can fix the file.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class RequestHeaderError(BrokerError):
    """A request's extFields miss a required field or carry a value of the wrong type."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"the custom field <{field}> {message}")
        self.field = field


class RequestBodyError(BrokerError):
    """A request body (heartbeat, lock batch, subscription group JSON) cannot be decoded."""
