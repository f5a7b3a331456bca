"""TransactionConfig: the knobs of transactional (half) messages, with RocketMQ's defaults.

A frozen keyword-only dataclass with the unit in each name.  :meth:`TransactionConfig.from_broker_conf`
reads RocketMQ's ``BrokerConfig`` keys as found in ``broker.conf`` (``transactionTimeOut``,
``transactionCheckMax``, ``transactionCheckInterval``, all in the units RocketMQ uses: milliseconds
and a count) so a RocketMQ user's file works unchanged, plus the limits of rocketq's ranged
END_TRANSACTION (``transactionBatchMaxMessages``, ``transactionBatchMaxBytes``); other keys are
ignored by that loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TransactionConfig", "TransactionConfigError"]


class TransactionConfigError(ValueError):
    """A transaction setting is out of range or does not parse."""


#: broker.conf key -> TransactionConfig field
_JAVA_KEYS = {
    "transactionTimeOut": "transaction_timeout_ms",
    "transactionCheckMax": "transaction_check_max",
    "transactionCheckInterval": "transaction_check_interval_ms",
    "transactionBatchMaxMessages": "transaction_batch_max_messages",
    "transactionBatchMaxBytes": "transaction_batch_max_bytes",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TransactionConfig:
    #: A half message younger than this (by born timestamp) is not checked back yet.
    transaction_timeout_ms: int = 6_000
    #: Check-backs per half message before it is parked in TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    #: How often the broker runs a check pass (RocketMQ 4.9.x: 60 s).
    transaction_check_interval_ms: int = 60_000
    #: Upper bound of one check pass; the rest of the half queue waits for the next pass.
    max_check_pass_ms: int = 60_000
    #: Most half messages one ranged END_TRANSACTION may end (rocketq extension).
    transaction_batch_max_messages: int = 100_000
    #: Most bytes of half records (as stored) one ranged END_TRANSACTION may load.
    transaction_batch_max_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.transaction_timeout_ms < 0:
            raise TransactionConfigError("transaction_timeout_ms must be >= 0")
        if self.transaction_check_max < 0:
            raise TransactionConfigError("transaction_check_max must be >= 0")
        if self.transaction_check_interval_ms <= 0:
            raise TransactionConfigError("transaction_check_interval_ms must be > 0")
        if self.max_check_pass_ms <= 0:
            raise TransactionConfigError("max_check_pass_ms must be > 0")
        if self.transaction_batch_max_messages <= 0:
            raise TransactionConfigError("transaction_batch_max_messages must be > 0")
        if self.transaction_batch_max_bytes <= 0:
            raise TransactionConfigError("transaction_batch_max_bytes must be > 0")

    @classmethod
    def from_broker_conf(cls, conf: Mapping[str, str], **overrides: Any) -> TransactionConfig:
        """Build a config from ``broker.conf`` keys (camelCase, string values) plus overrides."""
        kwargs: dict[str, Any] = {}
        for java_key, name in _JAVA_KEYS.items():
            if java_key in conf:
                raw = str(conf[java_key]).strip()
                try:
                    kwargs[name] = int(raw)
                except ValueError as exc:
                    raise TransactionConfigError(f"bad value for {java_key}: {raw!r}") from exc
        kwargs.update(overrides)
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise TransactionConfigError(str(exc)) from exc
