"""QueryRoute's answer: a topic's remoting route as the 5.x SDKs want it (``RouteActivity``).

Every queue of the route becomes a ``MessageQueue`` whose broker endpoints are the *proxy's own*
gRPC address (the SDKs send every request of that queue there).  Per broker, as RocketMQ numbers
them, the queues that can only be read come first, then those that can only be written, then the
read-write ones; ids start at 0, so queue 0 is read-write whenever the broker's topic is (the Node
SDK only uses queue 0).  Each queue's ``accept_message_types`` is the topic's ``message.type``
(:func:`accepted_types`): the SDKs check it before sending; a MIXED or untyped topic accepts
:data:`ACCEPTED_TYPES`, as the proxy's send check does.

QueryAssignment's answer (a push consumer's share) is, as RocketMQ's proxy answers it for POP
consumption, one queue per readable broker with the id -1 ("every queue of that broker"): push
consumers of a group all receive from every broker, and the broker's POP spreads the messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.topic_attributes import TopicMessageType
from rocketq.client.remoting.vocabulary import MASTER_ID, Perm
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = ["ACCEPTED_TYPES", "accepted_types", "grpc_assignments", "grpc_queues"]

#: the message types every topic accepts through the proxy
ACCEPTED_TYPES = (
    pb.MessageType.NORMAL,
    pb.MessageType.FIFO,
    pb.MessageType.DELAY,
    pb.MessageType.TRANSACTION,
)

_ONE_TYPE = {
    TopicMessageType.NORMAL: (pb.MessageType.NORMAL,),
    TopicMessageType.FIFO: (pb.MessageType.FIFO,),
    TopicMessageType.DELAY: (pb.MessageType.DELAY,),
    TopicMessageType.TRANSACTION: (pb.MessageType.TRANSACTION,),
}


def accepted_types(kind: TopicMessageType | None) -> tuple[pb.MessageType, ...]:
    """The message types a topic of type ``kind`` accepts (None: no ``message.type`` attribute)."""
    if kind is None:
        return ACCEPTED_TYPES
    return _ONE_TYPE.get(kind, ACCEPTED_TYPES)  # MIXED: every type


def _permission(readable: bool, writable: bool) -> pb.Permission:
    if readable and writable:
        return pb.Permission.READ_WRITE
    if readable:
        return pb.Permission.READ
    if writable:
        return pb.Permission.WRITE
    return pb.Permission.NONE


def grpc_queues(
    topic: pb.Resource,
    route: TopicRouteData,
    endpoints: pb.Endpoints,
    accept: Sequence[pb.MessageType] = ACCEPTED_TYPES,
) -> list[pb.MessageQueue]:
    """The message queues of ``route``; brokers without a master are left out (nothing to serve)."""
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    queues: list[pb.MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.broker_name not in masters:
            continue
        readable = bool(qd.perm & Perm.READ)
        writable = bool(qd.perm & Perm.WRITE)
        both = min(qd.read_queue_nums, qd.write_queue_nums)
        kinds = [
            (qd.read_queue_nums - both, readable, False),
            (qd.write_queue_nums - both, False, writable),
            (both, readable, writable),
        ]
        broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
        queue_id = 0
        for count, r, w in kinds:
            for _ in range(count):
                queues.append(
                    pb.MessageQueue(
                        topic=topic,
                        id=queue_id,
                        permission=_permission(r, w),
                        broker=broker,
                        accept_message_types=accept,
                    )
                )
                queue_id += 1
    return queues


def grpc_assignments(
    topic: pb.Resource,
    route: TopicRouteData,
    endpoints: pb.Endpoints,
    accept: Sequence[pb.MessageType] = ACCEPTED_TYPES,
) -> list[pb.Assignment]:
    """One assignment per broker with a master and a readable queue of the topic."""
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    names = sorted(
        {qd.broker_name for qd in route.queue_datas if qd.broker_name in masters and qd.perm & Perm.READ}
    )
    return [
        pb.Assignment(
            message_queue=pb.MessageQueue(
                topic=topic,
                id=-1,
                permission=pb.Permission.READ_WRITE,
                broker=pb.Broker(name=name, id=MASTER_ID, endpoints=endpoints),
                accept_message_types=accept,
            )
        )
        for name in names
    ]
