"""5.x SDK credentials on the gRPC port, checked against the brokers' ``plain_acl.yml`` accounts.

Theory of operation.  A 5.x SDK signs every call with the metadata
``authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1(secretKey, x-mq-date-time)>`` (the Python SDK sends it with an empty
Credential when it has no credentials, the Node SDK leaves it out).  With ``enableACL`` the proxy
decides each call as the remoting ACL decides a request (:mod:`rocketq.server.acl`, the same file
and rules): a peer in ``globalWhiteRemoteAddresses`` passes; a call without an access key is
anonymous and refused; an unknown access key is refused; a peer in the account's
``whiteRemoteAddress`` passes; the signature must match (hex compared without case, no clock-skew
check, as RocketMQ's ``DefaultAuthenticationContextBuilder``); then every topic and group the
request names (in its namespace, as the brokers name them) must be granted to the account:
producing needs PUB on the topic, consuming SUB on the topic and on the group, QueryRoute either.
Telemetry streams are only authenticated: what a client then does is checked call by call.

A refusal is the call's answer with status ``UNAUTHORIZED``, as RocketMQ 5's proxy answers its
authentication and authorization failures (``ResponseBuilder``); nothing answered or logged holds
a secret or a signature.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message as ProtoMessage

from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from rocketq.proxy.naming import wrap_resources
from rocketq.proxy.status import status
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.server.acl import AclAccount, AclPerm, PlainAclValidator
from rocketq.server.acl.plain_config import perm_name
from rocketq.server.acl.validator import first_lacking, peer_ip

__all__ = [
    "AUTHORIZATION",
    "DATE_TIME",
    "AclInterceptor",
    "Credential",
    "GrpcAcl",
    "parse_authorization",
    "required_resources",
]

log = logging.getLogger("rocketq.proxy")

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_SCHEME = "MQv2-HMAC-SHA1"


@dataclass(frozen=True, slots=True)
class Credential:
    """What an ``authorization`` value says: the access key and the hex signature."""

    access_key: str
    signature: str


def parse_authorization(value: str) -> Credential | None:
    """``MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=..., Signature=hex``; None when it names no
    access key (anonymous).  The access key is Credential up to its first ``/``."""
    text = value.strip()
    if text.startswith(_SCHEME):
        text = text[len(_SCHEME) :]
    pairs = {}
    for part in text.split(","):
        key, sep, val = part.strip().partition("=")
        if sep:
            pairs[key.strip()] = val.strip()
    access_key = pairs.get("Credential", "").split("/", 1)[0]
    if not access_key:
        return None
    return Credential(access_key, pairs.get("Signature", ""))


def _topic(resource: pb.Resource, perm: AclPerm) -> list[tuple[str, AclPerm]]:
    return [(resource.name, perm)] if resource.name else []


def _group(resource: pb.Resource) -> list[tuple[str, AclPerm]]:
    return [(retry_topic(resource.name), AclPerm.SUB)] if resource.name else []


def required_resources(request: ProtoMessage) -> list[tuple[str, AclPerm]]:
    """The (resource, permission) pairs a request needs; groups as ``%RETRY%group`` (the rules' key)."""
    r: ProtoMessage = wrap_resources(request)[0]
    if isinstance(r, spb.SendMessageRequest):
        return [pair for m in r.messages for pair in _topic(m.topic, AclPerm.PUB)]
    if isinstance(r, spb.QueryRouteRequest):
        return _topic(r.topic, AclPerm.ANY)
    if isinstance(r, (spb.EndTransactionRequest, spb.RecallMessageRequest)):
        return _topic(r.topic, AclPerm.PUB)
    if isinstance(r, spb.ReceiveMessageRequest):
        return [*_topic(r.message_queue.topic, AclPerm.SUB), *_group(r.group)]
    if isinstance(
        r,
        (
            spb.AckMessageRequest,
            spb.ChangeInvisibleDurationRequest,
            spb.ForwardMessageToDeadLetterQueueRequest,
            spb.QueryAssignmentRequest,
        ),
    ):
        return [*_topic(r.topic, AclPerm.SUB), *_group(r.group)]
    if isinstance(r, (spb.HeartbeatRequest, spb.NotifyClientTerminationRequest)):
        return _group(r.group)
    return []


class GrpcAcl:
    """``refusal(metadata, peer, request)``: None when the call may go on, else why not."""

    def __init__(self, acl_file: Path) -> None:
        self.validator = PlainAclValidator(acl_file)

    def refusal(
        self, metadata: Iterable[tuple[str, str | bytes]], peer: str, request: ProtoMessage | None
    ) -> str | None:
        headers = {k.lower(): v if isinstance(v, str) else v.decode("latin-1") for k, v in metadata}
        self.validator.reload_if_changed()
        config = self.validator.config
        ip = _peer_address(peer)
        if any(p.matches(ip) for p in config.global_white_remote_addresses):
            return None
        credential = parse_authorization(headers.get(AUTHORIZATION, ""))
        if credential is None:
            return "anonymous access is refused: give the client Credentials(accessKey, secretKey)"
        account = config.accounts.get(credential.access_key)
        if account is None:
            return f"no ACL account for accessKey={credential.access_key}"
        if account.white_remote_address.matches(ip):
            return None
        expected = hmac.digest(account.secret_key.encode(), headers.get(DATE_TIME, "").encode(), "sha1").hex()
        if not hmac.compare_digest(expected, credential.signature.lower()):
            return f"check signature failed for accessKey={credential.access_key}"
        if request is None or (account.admin and not account.resource_perms):
            return None
        return _missing(account, required_resources(request))


def _peer_address(peer: str) -> str:
    """gRPC's ``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` -> the IP address."""
    _, _, address = peer.partition(":")
    return peer_ip(address or peer)


def _missing(account: AclAccount, needed: Sequence[tuple[str, AclPerm]]) -> str | None:
    """Why the account may not use one of ``needed`` (None: it may use them all)."""
    lacking = first_lacking(account, needed)
    if lacking is None:
        return None
    resource, perm = lacking
    is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
    what = f"group {resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}" if is_group else f"topic {resource}"
    return f"no {perm_name(perm)} permission on {what} for accessKey={account.access_key}"


def _refused(method: str, message: str) -> ProtoMessage:
    """The answer of a refused call: its response type with status UNAUTHORIZED."""
    answer = status(pb.Code.UNAUTHORIZED, message)
    if method == "Telemetry":
        return spb.TelemetryCommand(status=answer)
    response: ProtoMessage = getattr(spb, f"{method}Response")(status=answer)
    return response


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Runs :meth:`GrpcAcl.refusal` before each call of MessagingService; a refused call gets its
    response with status UNAUTHORIZED instead of reaching the service."""

    def __init__(self, acl: GrpcAcl, peer_of: Callable[[str], str] | None = None) -> None:
        """``peer_of`` maps gRPC's peer to the client's address (behind :mod:`.tls_front`'s relay)."""
        self.acl = acl
        self.peer_of = peer_of or (lambda peer: peer)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        metadata = list(handler_call_details.invocation_metadata or ())
        acl, peer_of = self.acl, self.peer_of

        def refusal(request: ProtoMessage | None, context: grpc.aio.ServicerContext) -> str | None:
            peer = peer_of(context.peer())
            why = acl.refusal(metadata, peer, request)
            if why is not None:
                log.info("ACL refused %s from %s: %s", method, peer, why)
            return why

        kinds = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: ProtoMessage, context: grpc.aio.ServicerContext) -> Any:
                why = refusal(request, context)
                return _refused(method, why) if why is not None else await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, **kinds)
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def unary_stream(request: ProtoMessage, context: grpc.aio.ServicerContext) -> Any:
                why = refusal(request, context)
                if why is not None:
                    yield _refused(method, why)
                    return
                async for answer in inner_stream(request, context):
                    yield answer

            return grpc.unary_stream_rpc_method_handler(unary_stream, **kinds)
        if handler.stream_stream is not None:
            inner_bidi = handler.stream_stream

            async def bidi(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                why = refusal(None, context)  # a stream is authenticated; its calls are checked one by one
                if why is not None:
                    yield _refused(method, why)
                    return
                async for answer in inner_bidi(requests, context):
                    yield answer

            return grpc.stream_stream_rpc_method_handler(bidi, **kinds)
        return handler
