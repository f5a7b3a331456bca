"""Brokers' requests for a 5.x client, relayed over the client's Telemetry stream.

Theory of operation.  A broker asks a connected client things over the client's remoting
connection (the one :mod:`rocketq.proxy.client_registry` opened for it):

* GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus -g G -i clientId``).  The proxy answers it
  from what it knows of the client (its language, version, consume type and subscriptions).  With
  ``jstackEnable`` (``-s``) it first sends the client a PrintThreadStackTraceCommand with a fresh
  nonce and waits for the ThreadStackTrace carrying that nonce; its text becomes the ``jstack`` of
  the answer.
* CONSUME_MESSAGE_DIRECTLY (``queryMsgById -g G -d clientId`` in RocketMQ's mqadmin): the message
  goes to the client in a VerifyMessageCommand; its VerifyMessageResult's status becomes the
  ConsumeMessageDirectlyResult (OK: CR_SUCCESS, FAILED_TO_CONSUME_MESSAGE: CR_LATER,
  MESSAGE_CORRUPTED: CR_RETURN_NULL, remark "from gRPC client"), as ``ClientActivity`` builds it.
* CHECK_TRANSACTION_STATE for the client's producer group (its topic): a
  RecoverOrphanedTransactionCommand to that client, as ``GrpcClientChannel`` writes it; the broker
  gets no answer (the client ends the transaction with EndTransaction).

A client that does not answer within ``grpcProxyRelayRequestTimeoutInSeconds`` is reported as
RocketMQ's proxy reports it, SYSTEM_BUSY "call remote timeout"; a ThreadStackTrace whose status is
not OK becomes SYSTEM_ERROR (NO_PERMISSION for VERIFY_FIFO_MESSAGE_UNSUPPORTED), as
``ClientActivity.reportThreadStackTrace``.  The Python SDK 5.1.2 answers neither command (it
reads only Settings and transaction checks from the stream); the Node.js SDK 1.0.8 answers the
thread-stack request with the text ``mock stack`` and a verify request with its own
VerifyMessageCommand echoed back with status NOT_IMPLEMENTED, which the proxy passes on as
REQUEST_CODE_NOT_SUPPORTED instead of waiting out the time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import time

from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.mq_version import version_name
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.transport.channel import Channel
from rocketq.proxy.client_registry import GrpcClient
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.convert import to_grpc_message
from rocketq.proxy.transaction import ProxyTransactionId
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

__all__ = ["TelemetryRelay", "consume_result_of", "running_info_body"]

log = logging.getLogger("rocketq.proxy")

#: ConsumeMessageDirectlyResult.consumeResult by the client's status (others: none)
_CONSUME_RESULTS: dict[int, str] = {
    pb.Code.OK: "CR_SUCCESS",
    pb.Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    pb.Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}


def consume_result_of(code: int) -> str | None:
    return _CONSUME_RESULTS.get(code)


def running_info_body(client: GrpcClient, jstack: str | None = None) -> bytes:
    """The ConsumerRunningInfo JSON of a 5.x client (the proxy holds no queue of it: no mqTable)."""
    properties = {
        "PROP_CLIENT_VERSION": version_name(client.version),
        "PROP_CONSUME_TYPE": client.consume_type,
        "PROP_CLIENT_LANGUAGE": client.language.name,
        "PROP_CLIENT_SDK_VERSION": client.sdk_version,
        "PROP_CLIENT_PROTOCOL": "gRPC (RocketMQ 5 SDK through mqproxy)",
    }
    doc: dict[str, object] = {
        "properties": properties,
        "subscriptionSet": [s.to_obj() for s in client.subscriptions],
        "mqTable": {},
        "statusTable": {},
    }
    if jstack is not None:
        doc["jstack"] = jstack
    return json.dumps(doc, sort_keys=True).encode()


class TelemetryRelay:
    """``await handle(client, request, channel)`` for the brokers' requests; ``on_reply(command)``
    for the client's telemetry answers."""

    def __init__(self, config: ProxyConfig) -> None:
        self.timeout_s = float(config.grpc_proxy_relay_request_timeout_in_seconds)
        self._nonces = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[spb.TelemetryCommand]] = {}

    @property
    def pending(self) -> int:
        return len(self._waiting)

    async def handle(
        self, client: GrpcClient, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return await self._running_info(client, request)
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return await self._consume_directly(client, request)
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction(client, request, getattr(channel, "remote_address", "?"))
            return None
        return None if request.is_oneway else request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

    def on_reply(self, command: spb.TelemetryCommand) -> bool:
        """A client's ThreadStackTrace / VerifyMessageResult (or a VerifyMessageCommand it echoed
        back); True when it answered a waiting request."""
        kind = command.WhichOneof("command")
        if kind not in ("thread_stack_trace", "verify_message_result", "verify_message_command"):
            return False
        nonce = getattr(command, kind).nonce
        future = self._waiting.pop(nonce, None)
        if future is None or future.done():
            log.info("telemetry %s with nonce %r answers nothing waiting (late or unknown)", kind, nonce)
            return False
        future.set_result(command)
        return True

    # ------------------------------------------------------------------ asking the client

    async def _ask(
        self, client: GrpcClient, command: spb.TelemetryCommand, nonce: str
    ) -> spb.TelemetryCommand:
        """Send ``command`` and wait for the answer with ``nonce``; TimeoutError when none comes."""
        stream = client.stream
        if stream is None:
            raise LookupError(f"the 5.x client {client.client_id} has no open Telemetry stream on this proxy")
        future: asyncio.Future[spb.TelemetryCommand] = asyncio.get_running_loop().create_future()
        self._waiting[nonce] = future
        try:
            stream.put_nowait(command)
            return await asyncio.wait_for(future, self.timeout_s)
        finally:
            self._waiting.pop(nonce, None)

    def _nonce(self) -> str:
        return str(next(self._nonces))

    async def _running_info(self, client: GrpcClient, request: RemotingCommand) -> RemotingCommand:
        if request.ext_fields.get("jstackEnable", "false").lower() != "true":
            return request.make_response(ResponseCode.SUCCESS, body=running_info_body(client))
        nonce = self._nonce()
        ask = spb.TelemetryCommand(
            print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
        )
        try:
            answer = await self._ask(client, ask, nonce)
        except LookupError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except TimeoutError:
            return request.make_response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        code = answer.status.code if answer.HasField("status") else pb.Code.OK
        if answer.WhichOneof("command") != "thread_stack_trace" or code != pb.Code.OK:
            if code == pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
                return request.make_response(ResponseCode.NO_PERMISSION, "forbidden to verify message")
            return request.make_response(ResponseCode.SYSTEM_ERROR, "print thread stack failed")
        body = running_info_body(client, answer.thread_stack_trace.thread_stack_trace)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def _consume_directly(self, client: GrpcClient, request: RemotingCommand) -> RemotingCommand:
        try:
            msg = next(iter_stored_messages(request.body), None)
        except (RocketQError, ValueError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"the message cannot be decoded: {exc}")
        if msg is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "CONSUME_MESSAGE_DIRECTLY carries no message"
            )
        nonce = self._nonce()
        verify = spb.VerifyMessageCommand(nonce=nonce, message=to_grpc_message(msg, None, client.namespace))
        started = time.monotonic()
        try:
            answer = await self._ask(client, spb.TelemetryCommand(verify_message_command=verify), nonce)
        except LookupError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except TimeoutError:
            return request.make_response(ResponseCode.SYSTEM_BUSY, "call remote timeout")
        code = answer.status.code if answer.HasField("status") else pb.Code.OK
        if answer.WhichOneof("command") == "verify_message_command":  # echoed back: not served
            return request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"the 5.x client {client.client_id} does not verify messages"
                f" ({pb.Code.Name(code)}: {answer.status.message})",
            )
        result: dict[str, object] = {
            "order": False,
            "autoCommit": True,
            "remark": "from gRPC client",
            "spentTimeMills": int((time.monotonic() - started) * 1000),
        }
        consume_result = consume_result_of(code)
        if consume_result is not None:
            result["consumeResult"] = consume_result
        return request.make_response(ResponseCode.SUCCESS, body=json.dumps(result, sort_keys=True).encode())

    def _check_transaction(self, client: GrpcClient, request: RemotingCommand, peer: str) -> None:
        try:
            msg = next(iter_stored_messages(request.body), None)
        except (RocketQError, ValueError) as exc:
            log.warning("CHECK_TRANSACTION_STATE from %s cannot be decoded: %s", peer, exc)
            return
        if msg is None or client.stream is None:
            log.info(
                "check of a transaction from %s: no message, or client %s has no stream",
                peer,
                client.client_id,
            )
            return
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC, msg.topic)
        tid = ProxyTransactionId(msg.offset_msg_id, msg.queue_offset, msg.msg_id)
        message = to_grpc_message(dataclasses.replace(msg, topic=real_topic), None, client.namespace)
        command = spb.RecoverOrphanedTransactionCommand(message=message, transaction_id=str(tid))
        client.stream.put_nowait(spb.TelemetryCommand(recover_orphaned_transaction_command=command))
