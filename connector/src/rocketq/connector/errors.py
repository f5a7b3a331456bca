"""Errors raised by the Spark connector.

Every error derives from :class:`rocketq.client.errors.RocketQError`.  Option problems are
reported when the query starts (the data source parses its options once, on the driver) and
always name the option; data loss names the topic, broker, queue and the offsets concerned, so
the message alone tells an operator which range retention removed.
"""

from __future__ import annotations

from rocketq.client.errors import RocketQError


class ConnectorError(RocketQError):
    """Root of the connector's errors."""


class OptionError(ConnectorError, ValueError):
    """A data source option is missing, unknown or malformed; the message names the option."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"rocketmq option '{option}': {problem}")
        self.option = option
        self.problem = problem


class DataLossError(ConnectorError):
    """Messages the query should read are gone (retention, a vanished queue).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the connector logs a
    warning and skips the range instead.
    """

    def __init__(self, topic: str, queue_key: str, detail: str) -> None:
        super().__init__(
            f"data loss in topic '{topic}' queue {queue_key}: {detail} "
            "(set failOnDataLoss=false to skip lost ranges with a warning)"
        )
        self.topic = topic
        self.queue_key = queue_key


class BrokerUnavailableError(ConnectorError):
    """The NameServer or a broker could not be reached or refused a request."""

    retriable = True


class SinkError(ConnectorError):
    """A row could not be turned into a message, or a send was not confirmed by the broker."""
