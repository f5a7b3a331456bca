"""TimerConfig: the timer keys of ``broker.conf`` (RocketMQ's ``MessageStoreConfig`` timer fields).

``timerPrecisionMs`` is snapped as RocketMQ's setter does: to the largest of 100, 200, 500 and
1000 that is not above the value (100 for anything smaller).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Final

from rocketq.broker.config import BrokerConfig
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.timer.layout import WHEEL_SLOTS_TOTAL

__all__ = ["PRECISION_CANDIDATES_MS", "TimerConfig", "snap_precision_ms", "timer_config_of"]

PRECISION_CANDIDATES_MS: Final = (100, 200, 500, 1000)


def snap_precision_ms(value: int) -> int:
    """``MessageStoreConfig.setTimerPrecisionMs``."""
    for lower, upper in itertools.pairwise(PRECISION_CANDIDATES_MS):
        if value < upper:
            return lower
    return PRECISION_CANDIDATES_MS[-1]


@dataclass(frozen=True, kw_only=True, slots=True)
class TimerConfig:
    """Timer settings; ``precision_ms`` is already snapped (use :meth:`of`)."""

    wheel_enable: bool = True
    precision_ms: int = 1000
    max_delay_sec: int = 259_200
    roll_window_slots: int = 172_800
    timer_log_file_size: int = 100 * 1024 * 1024
    flush_interval_ms: int = 1000
    slots_total: int = WHEEL_SLOTS_TOTAL

    def __post_init__(self) -> None:
        if self.precision_ms not in PRECISION_CANDIDATES_MS:
            raise BrokerConfigError("timerPrecisionMs", f"must be one of {PRECISION_CANDIDATES_MS}")
        if self.max_delay_sec <= 0:
            raise BrokerConfigError("timerMaxDelaySec", f"must be > 0, got {self.max_delay_sec}")
        if self.roll_window_slots < 1:
            raise BrokerConfigError("timerRollWindowSlot", f"must be >= 1, got {self.roll_window_slots}")
        if self.timer_log_file_size < 4096:
            raise BrokerConfigError(
                "mappedFileSizeTimerLog", f"must be >= 4096 bytes, got {self.timer_log_file_size}"
            )
        if self.flush_interval_ms <= 0:
            raise BrokerConfigError("timerFlushIntervalMs", f"must be > 0, got {self.flush_interval_ms}")

    @classmethod
    def of(
        cls,
        *,
        wheel_enable: bool = True,
        precision_ms: int = 1000,
        max_delay_sec: int = 259_200,
        roll_window_slots: int = 172_800,
        timer_log_file_size: int = 100 * 1024 * 1024,
        flush_interval_ms: int = 1000,
    ) -> TimerConfig:
        """The configuration with ``precision_ms`` snapped as RocketMQ does."""
        return cls(
            wheel_enable=wheel_enable,
            precision_ms=snap_precision_ms(precision_ms),
            max_delay_sec=max_delay_sec,
            roll_window_slots=roll_window_slots,
            timer_log_file_size=timer_log_file_size,
            flush_interval_ms=flush_interval_ms,
        )


def timer_config_of(config: BrokerConfig) -> TimerConfig:
    """The timer settings of a broker configuration (precision snapped)."""
    return TimerConfig.of(
        wheel_enable=config.timer_wheel_enable,
        precision_ms=config.timer_precision_ms,
        max_delay_sec=config.timer_max_delay_sec,
        roll_window_slots=config.timer_roll_window_slot,
        timer_log_file_size=config.mapped_file_size_timer_log,
        flush_interval_ms=config.timer_flush_interval_ms,
    )
