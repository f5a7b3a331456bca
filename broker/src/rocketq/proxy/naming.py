"""RocketMQ 5 namespaces: the ``resource_namespace`` of a request's resources and the names the
brokers know.

A 5.x client configured with a namespace sends every topic and group as a ``Resource`` with that
``resource_namespace``; on the brokers the resource is named ``<namespace>%<name>``
(``NamespaceUtil.wrapNamespace``), so two namespaces never share a topic or a group.
:func:`wrap_resources` rewrites a whole request that way before it is served (every ``Resource``
field, nested and repeated ones too); :func:`unwrap` gives an answer's resource back its namespace.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message as ProtoMessage

from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = ["NAMESPACE_SEPARATOR", "full_name", "unwrap", "wrap_resources"]

NAMESPACE_SEPARATOR = "%"
_M = TypeVar("_M", bound=ProtoMessage)


def full_name(namespace: str, name: str) -> str:
    """The broker-side name of ``name`` in ``namespace`` (unchanged without a namespace)."""
    if not namespace or name.startswith(namespace + NAMESPACE_SEPARATOR):
        return name
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}"


def unwrap(name: str, namespace: str) -> pb.Resource:
    """The client-side resource of the broker-side ``name``."""
    prefix = namespace + NAMESPACE_SEPARATOR
    if namespace and name.startswith(prefix):
        return pb.Resource(resource_namespace=namespace, name=name[len(prefix) :])
    return pb.Resource(name=name)


def wrap_resources(request: _M) -> tuple[_M, str]:
    """A copy of ``request`` with every Resource named as on the brokers, and the namespace found
    (the first non-empty one; a client has one)."""
    copy = type(request)()
    copy.CopyFrom(request)
    found: list[str] = []
    _wrap(copy, found)
    return copy, found[0] if found else ""


def _wrap(message: ProtoMessage, found: list[str]) -> None:
    if isinstance(message, pb.Resource):
        if message.resource_namespace:
            found.append(message.resource_namespace)
            message.name = full_name(message.resource_namespace, message.name)
            message.resource_namespace = ""
        return
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None or descriptor.message_type.GetOptions().map_entry:
            continue
        if descriptor.is_repeated:
            for item in value:
                _wrap(item, found)
        else:
            _wrap(value, found)
