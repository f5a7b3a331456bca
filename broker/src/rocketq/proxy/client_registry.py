"""The 5.x clients of the proxy, made known to the brokers as remoting clients.

Theory of operation.  A 5.x SDK tells the proxy who it is in its Telemetry Settings (client type,
the topics it publishes to or its consumer group and subscriptions, ``user_agent`` language and
version) and in the ``x-mq-client-id`` / ``x-mq-language`` / ``x-mq-client-version`` metadata of
every call.  :class:`GrpcClients` keeps one :class:`GrpcClient` per client id and, as RocketMQ's
proxy registers its gRPC clients in the brokers' client managers, sends HEART_BEAT to the brokers
on the client's behalf: its client id, its language and version in the command header (what
``mqadmin consumerConnection`` / ``producerConnection`` and the dashboard show), a producer group
per topic it publishes to (the *topic* is the group, as RocketMQ's proxy names 5.x producers), or
its consumer group with the subscriptions, ``CLUSTERING`` and CONSUME_PASSIVELY (push consumers)
or CONSUME_ACTIVELY (simple consumers), as ``ClientActivity.buildConsumeType``.

Each client gets a remoting connection of its own to each broker (its own
:class:`~rocketq.client.api.MQClientAPI`), because a broker keeps one client per connection and
group (Java's ``ConsumerGroupInfo`` as rocketq's): one shared connection would show only the last
client heartbeating on it.  The broker calls the client back on that connection
(GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, CHECK_TRANSACTION_STATE); those requests
are handed to the ``on_broker_request`` handler with the client they are for
(:mod:`rocketq.proxy.telemetry_relay`).

Heartbeats go out when a client is first seen or changes its settings, and then every
``HEARTBEAT_INTERVAL_S`` while it is alive.  A client that says NotifyClientTermination, or whose
Telemetry stream is closed and that stays silent (no Heartbeat call, no Settings) for
``channelExpiredTimeout``, is unregistered from every broker it was announced to
(UNREGISTER_CLIENT per group) and its connections are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import LanguageCode, RemotingCommand
from rocketq.client.remoting.headers import UnregisterClientRequestHeader
from rocketq.client.remoting.mq_version import V5_0_0, release_ordinal
from rocketq.client.remoting.vocabulary import (
    MASTER_ID,
    ExpressionType,
    SubscriptionData,
    build_subscription,
)
from rocketq.client.transport.channel import Channel
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.naming import wrap_resources
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

__all__ = [
    "BROKER_REQUESTS",
    "CLIENT_ID",
    "HEARTBEAT_INTERVAL_S",
    "BrokerRequestHandler",
    "GrpcClient",
    "GrpcClients",
    "heartbeat_data",
    "metadata_of",
    "remoting_language",
    "remoting_version",
]

log = logging.getLogger("rocketq.proxy")

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
#: how often a live client's HEART_BEAT is sent again (a broker drops a client silent for 120 s)
HEARTBEAT_INTERVAL_S = 30.0

#: apache.rocketmq.v2.Language -> the remoting LanguageCode (no remoting code: OTHER)
_LANGUAGES = {
    pb.Language.JAVA: LanguageCode.JAVA,
    pb.Language.CPP: LanguageCode.CPP,
    pb.Language.DOT_NET: LanguageCode.DOTNET,
    pb.Language.GOLANG: LanguageCode.GO,
    pb.Language.RUST: LanguageCode.RUST,
    pb.Language.PYTHON: LanguageCode.PYTHON,
    pb.Language.PHP: LanguageCode.PHP,
    pb.Language.NODE_JS: LanguageCode.NODE_JS,
    pb.Language.RUBY: LanguageCode.RUBY,
}
#: the ``x-mq-language`` names the SDKs send that are not LanguageCode names
_HEADER_LANGUAGES = {
    "GOLANG": LanguageCode.GO,
    "DOT_NET": LanguageCode.DOTNET,
    "NODEJS": LanguageCode.NODE_JS,
}


def metadata_of(pairs: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    """A call's metadata as a dict (lower-case keys, text values)."""
    return {k.lower(): v if isinstance(v, str) else v.decode("latin-1") for k, v in pairs or ()}


def remoting_language(settings: pb.Settings | None, header: str = "") -> LanguageCode:
    """The client's language: Settings' ``user_agent.language``, else the ``x-mq-language`` header
    (the Node.js SDK's header says HTTP, its user agent NODE_JS)."""
    if settings is not None and settings.user_agent.language in _LANGUAGES:
        return _LANGUAGES[settings.user_agent.language]
    name = header.strip().upper()
    if name in _HEADER_LANGUAGES:
        return _HEADER_LANGUAGES[name]
    return LanguageCode.__members__.get(name, LanguageCode.OTHER)


def remoting_version(text: str) -> int:
    """The MQVersion ordinal of an SDK version ``x.y.z`` between 4.9.4 and 5.9.9; any other
    (the Node.js SDK's 1.0.8, say) counts as V5_0_0, the first version of the 5.x protocol."""
    found = release_ordinal(text)
    return V5_0_0 if found is None else found


@dataclasses.dataclass(slots=True)
class GrpcClient:
    """One 5.x client as the brokers are told about it; names are the brokers' (namespaced)."""

    client_id: str
    api: MQClientAPI
    language: LanguageCode = LanguageCode.OTHER
    version: int = V5_0_0
    sdk_version: str = ""
    client_type: int = pb.ClientType.CLIENT_TYPE_UNSPECIFIED
    #: the client's namespace (its resources are ``namespace%name`` on the brokers)
    namespace: str = ""
    producer_topics: tuple[str, ...] = ()
    group: str = ""
    subscriptions: tuple[SubscriptionData, ...] = ()
    stream: asyncio.Queue[spb.TelemetryCommand] | None = None
    last_seen: float = 0.0
    last_heartbeat: float = float("-inf")
    #: broker addresses told about this client (UNREGISTER_CLIENT goes there)
    announced: set[str] = dataclasses.field(default_factory=set)
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)

    @property
    def is_consumer(self) -> bool:
        return bool(self.group)

    @property
    def consume_type(self) -> str:
        simple = self.client_type == pb.ClientType.SIMPLE_CONSUMER
        return "CONSUME_ACTIVELY" if simple else "CONSUME_PASSIVELY"

    def topics(self) -> tuple[str, ...]:
        return tuple(s.topic for s in self.subscriptions) if self.is_consumer else self.producer_topics


def heartbeat_data(client: GrpcClient) -> dict[str, object]:
    """The HeartbeatData JSON object of ``client``."""
    consumers = []
    if client.is_consumer:
        consumers.append(
            {
                "groupName": client.group,
                "consumeType": client.consume_type,
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [s.to_obj() for s in client.subscriptions],
                "unitMode": False,
            }
        )
    producers = [{"groupName": topic} for topic in client.producer_topics]
    return {"clientID": client.client_id, "consumerDataSet": consumers, "producerDataSet": producers}


def _subscriptions(settings: pb.Settings, version: int) -> tuple[SubscriptionData, ...]:
    subs = []
    for entry in settings.subscription.subscriptions:
        kind = ExpressionType.SQL92 if entry.expression.type == pb.FilterType.SQL else ExpressionType.TAG
        try:
            subs.append(build_subscription(entry.topic.name, entry.expression.expression, kind, version))
        except RocketQError as exc:
            group = settings.subscription.group.name
            log.info("subscription of %s to %s left out: %s", group, entry.topic.name, exc)
    return tuple(subs)


BrokerRequestHandler = Callable[[GrpcClient, RemotingCommand, Channel], Awaitable[RemotingCommand | None]]
#: the requests a broker sends a client, handed to ``on_broker_request``
BROKER_REQUESTS = (
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
    RequestCode.CHECK_TRANSACTION_STATE,
)


class GrpcClients:
    """The registry: ``on_settings`` / ``on_heartbeat`` / ``terminate`` from the RPCs, ``start()``
    runs the heartbeat and expiry loop, ``close()`` unregisters everyone."""

    def __init__(
        self,
        instance: ClientInstance,
        config: ProxyConfig,
        client_config: ClientConfig,
        on_broker_request: BrokerRequestHandler | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance
        self.config = config
        self.client_config = client_config
        self.on_broker_request = on_broker_request
        self.clock = clock
        self._clients: dict[str, GrpcClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ queries

    def get(self, client_id: str) -> GrpcClient | None:
        return self._clients.get(client_id)

    def all(self) -> list[GrpcClient]:
        return list(self._clients.values())

    # ------------------------------------------------------------------ events from the RPCs

    def on_settings(
        self,
        metadata: Mapping[str, str],
        settings: pb.Settings,
        stream: asyncio.Queue[spb.TelemetryCommand] | None,
    ) -> GrpcClient | None:
        """A Settings command on a Telemetry stream: (re)register the client it describes."""
        client_id = metadata.get(CLIENT_ID, "")
        if not client_id:
            return None
        client = self._clients.get(client_id)
        if client is None:
            client = GrpcClient(client_id, self._new_api())
            self._clients[client_id] = client
        named, client.namespace = wrap_resources(settings)
        before = heartbeat_data(client), client.language, client.version
        client.language = remoting_language(settings, metadata.get(LANGUAGE, ""))
        client.sdk_version = settings.user_agent.version or metadata.get(CLIENT_VERSION, "")
        client.version = remoting_version(client.sdk_version)
        client.client_type = settings.client_type
        kind = named.WhichOneof("pub_sub")
        if kind == "publishing":
            client.producer_topics = tuple(sorted({t.name for t in named.publishing.topics if t.name}))
        elif kind == "subscription":
            client.group = named.subscription.group.name
            old = {s.topic: s for s in client.subscriptions}
            subs = _subscriptions(named, int(time.time() * 1000))
            # a subscription that did not change keeps its version (the broker sees no change)
            client.subscriptions = tuple(
                old[s.topic] if s.topic in old and _same(old[s.topic], s) else s for s in subs
            )
        if stream is not None:
            client.stream = stream
        client.last_seen = self.clock()
        if (heartbeat_data(client), client.language, client.version) != before:
            self._heartbeat_soon(client)
        return client

    def on_heartbeat(self, metadata: Mapping[str, str]) -> None:
        """A Heartbeat call: the client is alive."""
        client = self._clients.get(metadata.get(CLIENT_ID, ""))
        if client is not None:
            client.last_seen = self.clock()

    def stream_closed(self, stream: asyncio.Queue[spb.TelemetryCommand]) -> None:
        """A Telemetry stream ended; its client stays registered until it terminates or expires."""
        for client in self._clients.values():
            if client.stream is stream:
                client.stream = None

    def terminate(self, metadata: Mapping[str, str]) -> None:
        """NotifyClientTermination: unregister the client from the brokers now."""
        client = self._clients.pop(metadata.get(CLIENT_ID, ""), None)
        if client is not None:
            self._spawn(self._unregister(client), f"unregister {client.client_id}")

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name="grpc-clients")

    async def close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        clients, self._clients = list(self._clients.values()), {}
        pending = [*self._tasks, *(asyncio.create_task(self._unregister(c)) for c in clients)]
        if pending:
            await asyncio.wait(pending, timeout=5.0)  # bounded: a stop never hangs on a broker

    async def _run(self) -> None:
        expiry_s = self.config.channel_expired_timeout / 1000
        tick = min(HEARTBEAT_INTERVAL_S, max(0.2, expiry_s / 4))
        while True:
            await asyncio.sleep(tick)
            now = self.clock()
            for client in list(self._clients.values()):
                if client.stream is not None:  # an open Telemetry stream: alive
                    client.last_seen = now
                elif now - client.last_seen > expiry_s:
                    silent = now - client.last_seen
                    log.info("5.x client %s silent for %.0f s: unregistered", client.client_id, silent)
                    del self._clients[client.client_id]
                    self._spawn(self._unregister(client), f"expire {client.client_id}")
                elif now - client.last_heartbeat >= HEARTBEAT_INTERVAL_S:
                    self._heartbeat_soon(client)

    # ------------------------------------------------------------------ remoting

    def _new_api(self) -> MQClientAPI:
        return MQClientAPI(self.instance.api.namesrv_addrs, config=self.client_config)

    def _attach(self, client: GrpcClient) -> None:
        handler = self.on_broker_request
        if handler is None:
            return

        def bind(cmd: RemotingCommand, channel: Channel) -> Awaitable[RemotingCommand | None]:
            return handler(client, cmd, channel)

        for code in BROKER_REQUESTS:
            client.api.register_processor(code, bind)

    def _spawn(self, job: Awaitable[None], name: str) -> None:
        async def run() -> None:
            await job

        task = asyncio.create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _heartbeat_soon(self, client: GrpcClient) -> None:
        client.last_heartbeat = self.clock()
        self._spawn(self._heartbeat(client), f"heartbeat {client.client_id}")

    async def _broker_addrs(self, client: GrpcClient) -> set[str]:
        addrs: set[str] = set()
        for topic in client.topics():
            try:
                route = await self.instance.get_route(topic)
            except RocketQError as exc:
                log.info("no route of %s for the heartbeat of %s: %s", topic, client.client_id, exc)
                continue
            for bd in route.broker_datas:
                for broker_id, addr in bd.broker_addrs.items():
                    if broker_id == MASTER_ID or client.is_consumer:
                        addrs.add(addr)
        return addrs

    async def _heartbeat(self, client: GrpcClient) -> None:
        async with client.lock:
            if not client.announced:
                self._attach(client)
            body = heartbeat_data(client)
            for addr in sorted(await self._broker_addrs(client)):
                cmd = RemotingCommand.request(RequestCode.HEART_BEAT, None, _json(body))
                cmd.language, cmd.version = client.language, client.version
                try:
                    client.api.check(await client.api.invoke(addr, cmd), addr)
                except RocketQError as exc:
                    log.warning("heartbeat of 5.x client %s to %s failed: %s", client.client_id, addr, exc)
                    continue
                client.announced.add(addr)
                log.debug("5.x client %s announced to %s", client.client_id, addr)

    async def _unregister(self, client: GrpcClient) -> None:
        async with client.lock:
            for addr in sorted(client.announced):
                for header in _unregister_headers(client):
                    cmd = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())
                    cmd.language, cmd.version = client.language, client.version
                    try:
                        client.api.check(await client.api.invoke(addr, cmd), addr)
                    except RocketQError as exc:
                        log.info("unregister of %s from %s failed: %s", client.client_id, addr, exc)
            client.announced.clear()
            await client.api.close()


def _unregister_headers(client: GrpcClient) -> Iterable[UnregisterClientRequestHeader]:
    if client.is_consumer:
        yield UnregisterClientRequestHeader(client_id=client.client_id, consumer_group=client.group)
    for topic in client.producer_topics:
        yield UnregisterClientRequestHeader(client_id=client.client_id, producer_group=topic)


def _same(a: SubscriptionData, b: SubscriptionData) -> bool:
    return (a.sub_string, a.expression_type, a.tags_set) == (b.sub_string, b.expression_type, b.tags_set)


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
