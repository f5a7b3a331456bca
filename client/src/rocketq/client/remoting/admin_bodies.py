"""Wire bodies of admin answers that more than one client layer reads.

``ResetOffsetBody`` comes back from INVOKE_BROKER_TO_RESET_OFFSET (the admin's offset reset) and
arrives in RESET_CONSUMER_CLIENT_OFFSET (the broker telling a live consumer to move): both carry
``{"offsetTable": {<MessageQueue object>: offset}}``, where fastjson writes each key as a JSON
object.  :func:`parse_offset_table` reads it through :mod:`rocketq.client.remoting.lenient_json`
(object keys arrive frozen as tuples and are thawed back into dicts).
"""

from __future__ import annotations

from rocketq.client.remoting.lenient_json import loads, thaw
from rocketq.client.remoting.vocabulary import MessageQueue

__all__ = ["parse_offset_table"]


def parse_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """ResetOffsetBody ``{"offsetTable":{<MessageQueue object>: offset}}`` (fastjson object keys)."""
    if not body:
        return {}
    data = loads(body)
    table: dict[MessageQueue, int] = {}
    for key, value in (data.get("offsetTable") or {}).items():
        obj = thaw(key) if isinstance(key, tuple) else key
        if isinstance(obj, dict):
            table[MessageQueue.from_obj(obj)] = int(value)
    return table
