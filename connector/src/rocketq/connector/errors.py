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
            "(set the option failOnDataLoss=false to log a warning and carry on from the offsets still "
            "stored, or restart the query with a new checkpointLocation)"
        )
        self.topic = topic
        self.queue_key = queue_key


class BrokerUnavailableError(ConnectorError):
    """The NameServer or a broker could not be reached or refused a request.

    ``retriable`` says whether another attempt may succeed (a transport error, a broker that is
    restarting or busy); a broker refusing the request itself (a bad SQL92 filter) is not.
    """

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class NameServerUnavailableError(BrokerUnavailableError):
    """No NameServer answered while the query runs, or it does not list the topic's brokers yet
    (restarting, or restarted and not yet told by the brokers).  Before the query first reached
    a NameServer the same trouble is an :class:`OptionError` naming ``nameServer``."""


class RetriesExhaustedError(BrokerUnavailableError):
    """A request kept failing until the retry budget (``fetchOffset.numRetries`` and
    ``fetchOffset.retryIntervalMs``) was spent; ``__cause__`` is the last failure."""

    def __init__(self, what: str, where: str, *, attempts: int, elapsed_s: float, policy: str) -> None:
        super().__init__(
            f"{what} on {where} failed {attempts} times in {elapsed_s:.1f} s ({policy}); the broker or "
            "NameServer did not come back in time. Raise fetchOffset.numRetries or "
            "fetchOffset.retryIntervalMs to wait longer (docs/connector.md, 'Reliability')",
            retriable=False,
        )
        self.what = what
        self.where = where
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.policy = policy

    def __reduce__(self) -> tuple[object, ...]:
        # picklable (a task's error may cross processes): rebuilt from its parts, not its message
        kwargs = {"attempts": self.attempts, "elapsed_s": self.elapsed_s, "policy": self.policy}
        return (_rebuild_exhausted, (self.what, self.where, kwargs))


def _rebuild_exhausted(what: str, where: str, kwargs: dict[str, object]) -> RetriesExhaustedError:
    return RetriesExhaustedError(what, where, **kwargs)  # type: ignore[arg-type]


class SinkError(ConnectorError):
    """A row could not be turned into a message, or a send was not confirmed by the broker."""
