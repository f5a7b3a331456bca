"""``apache.rocketmq.v2.Status`` answers, and the client library's errors mapped onto its ``Code``s.

The table follows RocketMQ's proxy (``ResponseBuilder.buildStatus``): a broker's remoting
response code becomes the gRPC-side code the SDKs act on (TOO_MANY_REQUESTS stops their retries,
TOPIC_NOT_FOUND and CONSUMER_GROUP_NOT_FOUND raise NotFoundException, the persistence timeouts
and INTERNAL_SERVER_ERROR are retried).  Every answer carries a sentence a user can act on.
"""

from __future__ import annotations

from rocketq.client.errors import (
    MQBrokerError,
    NameServerUnreachableError,
    NoRouteError,
    RemotingError,
    RocketQError,
)
from rocketq.client.remoting.codes import ResponseCode
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = ["code_of_error", "ok", "status"]

_BROKER_CODES: dict[int, pb.Code] = {
    ResponseCode.SYSTEM_BUSY: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.FLOW_CONTROL: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.Code.NOT_IMPLEMENTED,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.MESSAGE_ILLEGAL: pb.Code.BAD_REQUEST,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.Code.INTERNAL_SERVER_ERROR,
    ResponseCode.VERSION_NOT_SUPPORTED: pb.Code.VERSION_UNSUPPORTED,
    ResponseCode.NO_PERMISSION: pb.Code.FORBIDDEN,
    ResponseCode.TOPIC_NOT_EXIST: pb.Code.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: pb.Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.INVALID_PARAMETER: pb.Code.BAD_REQUEST,
    ResponseCode.NO_MESSAGE: pb.Code.INVALID_RECEIPT_HANDLE,
    ResponseCode.ILLEGAL_OPERATION: pb.Code.BAD_REQUEST,
}


def status(code: pb.Code, message: str) -> pb.Status:
    return pb.Status(code=code, message=message)


def ok() -> pb.Status:
    return pb.Status(code=pb.Code.OK, message="OK")


def code_of_error(exc: RocketQError) -> pb.Code:
    """The ``Code`` answering a failed call of the client library."""
    if isinstance(exc, NameServerUnreachableError):
        return pb.Code.INTERNAL_SERVER_ERROR
    if isinstance(exc, NoRouteError):
        return pb.Code.TOPIC_NOT_FOUND
    if isinstance(exc, MQBrokerError):
        return _BROKER_CODES.get(exc.code, pb.Code.INTERNAL_SERVER_ERROR)
    if isinstance(exc, RemotingError):
        return pb.Code.PROXY_TIMEOUT
    return pb.Code.INTERNAL_SERVER_ERROR
