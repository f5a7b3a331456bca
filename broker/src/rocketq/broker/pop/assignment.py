"""Server-side rebalance: QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401), messageRequestMode.json.

RocketMQ 5's ``QueryAssignmentProcessor`` and ``MessageRequestModeManager``.  A consumer that lets
the broker rebalance (Java's ``clientRebalance=false``) asks which queues of a topic it should
read and in which mode.  The mode of a (topic, group) is the one stored by SET_MESSAGE_REQUEST_MODE,
else PULL for a retry topic and ``defaultMessageRequestMode`` (PULL) with
``defaultPopShareQueueNum`` (-1) otherwise.

Theory of operation (Java's rules).  BROADCASTING: every readable queue.  CLUSTERING: with
``serverLoadBalancerEnable=false`` every readable queue; else the queues and the group's client
ids are sorted and the strategy named in the request (``AVG`` or ``AVG_BY_CIRCLE``; anything else
gives no answer, the client keeps its queues) allocates:

- PULL: the strategy's share of the client, exactly as a client-side rebalance would compute it;
- POP with ``popShareQueueNum <= 0`` or ``>= consumers - 1``: every queue, each with queue id -1
  (the client pops "any queue" of the broker);
- POP otherwise, with no more consumers than queues: the client's own share plus the shares of
  the ``popShareQueueNum`` consumers after it in the sorted id list (wrapping around);
- POP with more consumers than queues: one queue, ``mqAll[index % len(mqAll)]``, so every
  consumer has one.

A client not (yet) known to the group gets no answer.  rocketq differs from Java in one place:
the queues are this broker's own readable queues of the topic (Java asks the NameServer for the
topic's route and includes every broker's); a client asks each broker of the topic's route.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from rocketq.broker.metadata import load_json_file, persist_text_file
from rocketq.broker.processor.context import BrokerContext
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.allocate import (
    AllocateFn,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
)
from rocketq.client.remoting.assignment import (
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, MessageQueue, Perm
from rocketq.server import Channel, Processor

__all__ = [
    "MESSAGE_REQUEST_MODE_JSON",
    "STRATEGIES",
    "AssignmentProcessor",
    "MessageRequestModeManager",
    "allocate_for_pop",
    "assignment_processors",
]

MESSAGE_REQUEST_MODE_JSON = "messageRequestMode.json"

#: the strategies Java's broker registers, under their ``getName()``
STRATEGIES: dict[str, AllocateFn] = {
    "AVG": AllocateMessageQueueAveragely(),
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle(),
}


class MessageRequestModeManager:
    """The modes set by SET_MESSAGE_REQUEST_MODE, ``{topic: {group: body}}``, persisted as Java's file."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._modes: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}

    def load(self) -> None:
        """Read the file if there is one; a file that is not the table is an error naming it."""
        if self.path is None:
            return
        doc = load_json_file(self.path)
        if doc is None:
            return
        try:
            table = doc.get("messageRequestModeMap") or {}
            self._modes = {
                str(topic): {str(g): SetMessageRequestModeRequestBody.from_json(b) for g, b in groups.items()}
                for topic, groups in table.items()
            }
        except (AttributeError, ProtocolError) as exc:
            raise ProtocolError(
                f"{self.path}: not a messageRequestMode.json table ({exc}); move it away"
            ) from exc

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self._modes.get(topic, {}).get(group)

    def set(self, body: SetMessageRequestModeRequestBody) -> None:
        self._modes.setdefault(body.topic, {})[body.consumer_group] = body
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {
            "messageRequestModeMap": {
                topic: {group: body.to_json() for group, body in groups.items()}
                for topic, groups in self._modes.items()
            }
        }

    def persist(self) -> None:
        if self.path is not None:
            persist_text_file(self.path, json.dumps(self.encode(), indent=4, sort_keys=True))


def allocate_for_pop(
    strategy: AllocateFn,
    group: str,
    client_id: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    pop_share_queue_num: int,
) -> list[MessageQueue]:
    """Java's ``allocate4Pop`` over sorted ``mq_all`` and ``cid_all`` (see the module docstring)."""
    if pop_share_queue_num <= 0 or pop_share_queue_num >= len(cid_all) - 1:
        return [MessageQueue(mq.topic, mq.broker_name, -1) for mq in mq_all]
    if len(cid_all) <= len(mq_all):
        result = strategy(group, client_id, mq_all, cid_all)
        if client_id in cid_all:
            index = list(cid_all).index(client_id)
            for _ in range(pop_share_queue_num):
                index = (index + 1) % len(cid_all)
                result += strategy(group, cid_all[index], mq_all, cid_all)
        return result
    if client_id not in cid_all:
        return []
    return [mq_all[list(cid_all).index(client_id) % len(mq_all)]]


class AssignmentProcessor:
    """QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE over the context's topics, groups and consumers."""

    def __init__(self, ctx: BrokerContext, modes: MessageRequestModeManager) -> None:
        self.ctx = ctx
        self.modes = modes

    def _effective_mode(self, topic: str, group: str) -> SetMessageRequestModeRequestBody:
        stored = self.modes.get(topic, group)
        if stored is not None:
            return stored
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # a retry topic is always pulled
            return SetMessageRequestModeRequestBody(topic, group, MessageRequestMode.PULL)
        mode = self.ctx.config.default_message_request_mode
        share = self.ctx.config.default_pop_share_queue_num if mode is MessageRequestMode.POP else 0
        return SetMessageRequestModeRequestBody(topic, group, mode, share)

    def _readable_queues(self, topic: str) -> list[MessageQueue] | None:
        tc = self.ctx.topics.select(topic)
        if tc is None or not tc.perm & Perm.READ:
            return None
        name = self.ctx.config.broker_name
        return [MessageQueue(topic, name, qid) for qid in range(tc.read_queue_nums)]

    def assign(self, req: QueryAssignmentRequestBody) -> QueryAssignmentResponseBody:
        """The answer to one QUERY_ASSIGNMENT (``None`` assignments: the client keeps its queues)."""
        mode = self._effective_mode(req.topic, req.consumer_group)
        mq_all = self._readable_queues(req.topic)
        if mq_all is None:
            return QueryAssignmentResponseBody(None)
        if req.message_model == "BROADCASTING" or not self.ctx.config.server_load_balancer_enable:
            return QueryAssignmentResponseBody.of(mq_all, mode.mode)
        info = self.ctx.consumers.get(req.consumer_group)
        strategy = STRATEGIES.get(req.strategy_name)
        if info is None or strategy is None:
            return QueryAssignmentResponseBody(None)
        cid_all = info.client_ids()
        if not mq_all or not cid_all:
            return QueryAssignmentResponseBody.of((), mode.mode)
        if mode.mode is MessageRequestMode.POP:
            queues = allocate_for_pop(
                strategy, req.consumer_group, req.client_id, mq_all, cid_all, mode.pop_share_queue_num
            )
        else:
            queues = strategy(req.consumer_group, req.client_id, mq_all, cid_all)
        return QueryAssignmentResponseBody.of(queues, mode.mode)

    async def query_assignment(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            req = QueryAssignmentRequestBody.decode(request.body)
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad QueryAssignmentRequestBody: {exc}")
        return request.make_response(ResponseCode.SUCCESS, body=self.assign(req).encode())

    async def set_message_request_mode(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            body = SetMessageRequestModeRequestBody.decode(request.body)
        except ProtocolError as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"bad SetMessageRequestModeRequestBody: {exc}"
            )
        if body.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.make_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.ctx.topics.select(body.topic) is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if self.ctx.groups.find(body.consumer_group) is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist"
            )
        self.modes.set(body)
        return request.make_response(ResponseCode.SUCCESS)


def assignment_processors(ctx: BrokerContext) -> dict[int, Processor]:
    """QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE, the modes loaded from the store's config directory."""
    modes = MessageRequestModeManager(os.path.join(ctx.store.config.config_dir, MESSAGE_REQUEST_MODE_JSON))
    modes.load()
    processor = AssignmentProcessor(ctx, modes)
    return {
        RequestCode.QUERY_ASSIGNMENT: processor.query_assignment,
        RequestCode.SET_MESSAGE_REQUEST_MODE: processor.set_message_request_mode,
    }
