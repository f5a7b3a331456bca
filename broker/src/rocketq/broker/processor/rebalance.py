"""Queue locks for ordered consumers: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42).

Bodies: ``{"consumerGroup","clientId","onlyThisBroker","mqSet":[{"brokerName","queueId","topic"}]}``;
the lock answer is ``{"lockOKMQSet":[...]}`` with the queues the client now holds.
"""

from __future__ import annotations

import json

from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.server import Channel

__all__ = ["RebalanceProcessor"]


def _parse_body(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    obj = json.loads(body.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("lock body is not a JSON object")
    group, client_id = obj.get("consumerGroup"), obj.get("clientId")
    if not isinstance(group, str) or not isinstance(client_id, str):
        raise ValueError("lock body needs consumerGroup and clientId")
    mqs = [MessageQueue.from_obj(m) for m in obj.get("mqSet") or () if isinstance(m, dict)]
    return group, client_id, mqs


class RebalanceProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def lock_batch_mq(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            group, client_id, mqs = _parse_body(request.body)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad LockBatchRequestBody: {exc}")
        locked = self.ctx.locks.try_lock_batch(group, mqs, client_id)
        body = {"lockOKMQSet": [mq.to_obj() for mq in sorted(locked)]}
        return request.make_response(
            ResponseCode.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode()
        )

    async def unlock_batch_mq(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            group, client_id, mqs = _parse_body(request.body)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad UnlockBatchRequestBody: {exc}")
        self.ctx.locks.unlock_batch(group, mqs, client_id)
        return request.make_response(ResponseCode.SUCCESS)
