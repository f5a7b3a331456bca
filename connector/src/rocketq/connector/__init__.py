"""rocketq.connector — see docs/architecture.md.

:func:`lag` (offsets behind latest of a streaming query's rocketmq sources) is the one function
exported here; it imports nothing heavy.
"""

from rocketq.connector.lag import lag

__all__ = ["lag"]
