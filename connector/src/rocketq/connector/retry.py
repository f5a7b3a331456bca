"""Retries of the connector's look-ups and pulls: the policy, its options and the retry loop.

A streaming query asks the NameServer and the brokers something at every trigger (routes, max
offsets, committed offsets, the commit back) and in every task (pulls).  A broker restarting, a
master failing over to a slave or a NameServer restarting makes some of those requests fail for
a few seconds; Spark fails a query whose ``latestOffset`` raises, and fails a task (then, after
``spark.task.maxFailures``, the query) whose ``read`` raises.  So every such request is retried
with backoff (:func:`call_with_retries`), the caller refreshing its route between attempts, and
only when the budget is spent does the query see :class:`RetriesExhaustedError`, which names
what failed, where, for how long, and the options that give more time.

The budget comes from Kafka's option names: ``fetchOffset.numRetries`` retries after the first
attempt, waiting ``fetchOffset.retryIntervalMs`` before the first retry and twice as long before
each next one, at most :data:`MAX_BACKOFF_MS` (or the interval itself when it is larger).  The
defaults wait about 48 s in all, enough for a broker restarted within 10-15 s (plus its boot), a
controller-mode failover (heartbeat timeout, election, the new master's registration) and a
NameServer restart (the brokers register again within their ``registerNameServerPeriod``, 30 s
by default); docs/connector.md "Reliability".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from rocketq.client.errors import RocketQError
from rocketq.connector.errors import OptionError, RetriesExhaustedError
from rocketq.connector.option_text import get_req_int

__all__ = [
    "DEFAULT_NUM_RETRIES",
    "DEFAULT_RETRY_INTERVAL_MS",
    "MAX_BACKOFF_MS",
    "NO_RETRY",
    "NUM_RETRIES_OPTION",
    "RETRY_INTERVAL_OPTION",
    "RETRY_OPTION_KEYS",
    "RetryPolicy",
    "call_with_retries",
    "is_retriable",
    "retry_policy",
]

log = logging.getLogger("rocketq.connector")
_T = TypeVar("_T")

NUM_RETRIES_OPTION = "fetchOffset.numRetries"
RETRY_INTERVAL_OPTION = "fetchOffset.retryIntervalMs"
#: the options' keys as Spark hands them over (lower-cased)
RETRY_OPTION_KEYS = frozenset({NUM_RETRIES_OPTION.lower(), RETRY_INTERVAL_OPTION.lower()})
DEFAULT_NUM_RETRIES = 12
DEFAULT_RETRY_INTERVAL_MS = 500
#: the longest wait between two attempts (unless the interval itself is longer): a broker that is
#: back is used again within this long
MAX_BACKOFF_MS = 5_000
_MAX_NUM_RETRIES = 10_000
_MAX_RETRY_INTERVAL_MS = 600_000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failed request is made again."""

    num_retries: int = DEFAULT_NUM_RETRIES
    retry_interval_ms: int = DEFAULT_RETRY_INTERVAL_MS

    def __post_init__(self) -> None:
        if not 0 <= self.num_retries <= _MAX_NUM_RETRIES:
            raise OptionError(NUM_RETRIES_OPTION, f"expected 0..{_MAX_NUM_RETRIES}, got {self.num_retries}")
        if not 0 <= self.retry_interval_ms <= _MAX_RETRY_INTERVAL_MS:
            limit = _MAX_RETRY_INTERVAL_MS
            raise OptionError(RETRY_INTERVAL_OPTION, f"expected 0..{limit} ms, got {self.retry_interval_ms}")

    def delay_ms(self, retry: int) -> int:
        """The wait before retry number ``retry`` (0 = the first retry)."""
        cap = max(self.retry_interval_ms, MAX_BACKOFF_MS)
        return min(cap, self.retry_interval_ms << min(retry, 30))

    def budget_ms(self) -> int:
        """The total wait between attempts when every attempt fails."""
        return sum(self.delay_ms(k) for k in range(self.num_retries))

    def describe(self) -> str:
        return (
            f"{NUM_RETRIES_OPTION}={self.num_retries}, {RETRY_INTERVAL_OPTION}={self.retry_interval_ms} "
            f"(backoff doubling up to {max(self.retry_interval_ms, MAX_BACKOFF_MS)} ms)"
        )


#: one attempt, no retry: what a BrokerAccess built without a policy does (tools, tests)
NO_RETRY = RetryPolicy(0, 0)


def retry_policy(options: Mapping[str, str]) -> RetryPolicy:
    """The policy of ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs`` (lower-cased
    options, as Spark hands them over)."""
    return RetryPolicy(
        num_retries=get_req_int(options, NUM_RETRIES_OPTION, DEFAULT_NUM_RETRIES, low=0),
        retry_interval_ms=get_req_int(options, RETRY_INTERVAL_OPTION, DEFAULT_RETRY_INTERVAL_MS, low=0),
    )


def is_retriable(exc: BaseException) -> bool:
    """Whether another attempt may succeed: transport errors, an absent route or broker, and the
    broker answers RocketMQ's clients retry (busy, not available, ...); never an option error."""
    if isinstance(exc, OptionError):
        return False
    if isinstance(exc, RocketQError):
        return bool(exc.retriable)
    return isinstance(exc, TimeoutError)


def call_with_retries(
    policy: RetryPolicy,
    what: str,
    where: Callable[[], str],
    attempt: Callable[[], _T],
    *,
    before_retry: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> _T:
    """``attempt()``, made again after a retriable failure as ``policy`` says.

    ``before_retry`` runs before each new attempt (a route refresh: a restarted or failed-over
    broker may have a new address, a group a new master).  A failure that is not retriable is
    raised as it is; when the budget is spent, :class:`RetriesExhaustedError` names ``what``,
    ``where()`` (the broker or NameServer of the last attempt), the attempts and the time taken.
    """
    started = clock()
    retry = 0
    while True:
        try:
            return attempt()
        except Exception as exc:
            if not is_retriable(exc):
                raise
            if retry >= policy.num_retries:
                raise RetriesExhaustedError(
                    what, where(), attempts=retry + 1, elapsed_s=clock() - started, policy=policy.describe()
                ) from exc
            delay_ms = policy.delay_ms(retry)
            log.warning(
                "rocketmq: %s on %s failed (%s); retry %d of %d in %d ms",
                what,
                where(),
                exc,
                retry + 1,
                policy.num_retries,
                delay_ms,
            )
            sleep(delay_ms / 1000)
            retry += 1
            if before_retry is not None:
                try:
                    before_retry()
                except Exception as refresh_exc:  # the next attempt reports what is still wrong
                    if not is_retriable(refresh_exc):
                        raise
