"""Send round trips to one broker group (Java's ``sendMsgStatus``).

Every broker serves a topic named after its broker name (one queue), as RocketMQ's brokers do;
``send_msg_status`` sends ``count`` messages of ``message_size`` bytes there through a producer
of group ``PID_SMSC``, after one warm-up send of 16 bytes that is not timed, and returns each
send's wall time (ms) with its result.
"""

from __future__ import annotations

import time

from rocketq.client.admin import AsyncAdmin
from rocketq.client.errors import MQClientError
from rocketq.client.model import Message, SendResult
from rocketq.client.producer.core import AsyncProducer

__all__ = ["SEND_STATUS_GROUP", "send_msg_status"]

SEND_STATUS_GROUP = "PID_SMSC"


async def send_msg_status(
    admin: AsyncAdmin, broker_name: str, *, message_size: int = 128, count: int = 50
) -> list[tuple[int, SendResult]]:
    """``count`` timed sends of ``message_size`` bytes to the topic ``broker_name``."""
    if message_size < 1 or count < 0:
        raise MQClientError(f"messageSize must be >= 1 and count >= 0, got {message_size} and {count}")
    producer = AsyncProducer(
        admin.api.namesrv_addrs, producer_group=SEND_STATUS_GROUP, client=admin.api.config
    )
    await producer.start()
    try:
        await producer.send(Message(broker_name, b"h" * 16))
        timed: list[tuple[int, SendResult]] = []
        for _ in range(count):
            began = time.monotonic()
            result = await producer.send(Message(broker_name, b"h" * message_size))
            timed.append((int((time.monotonic() - began) * 1000), result))
        return timed
    finally:
        await producer.shutdown()
