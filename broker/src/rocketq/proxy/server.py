"""ProxyServer: the gRPC server of the proxy, its client instance and producer, start and stop.

``start()`` connects nothing up front: the client instance reaches the NameServers and brokers on
the first request.  The gRPC server (grpcio's asyncio API) listens on ``grpcServerPort`` in
plaintext (h2c, what the Python and Node SDKs use by default); a connection that sends anything
but HTTP/2 is closed by gRPC's transport and the server keeps serving the others.  ``stop()``
gives running calls ``grpc_shutdown_grace_millis`` to finish, then closes the broker connections.
"""

from __future__ import annotations

import ipaddress
import logging

import grpc

from rocketq.client.instance import ClientInstance
from rocketq.client.producer import AsyncProducer
from rocketq.client.transport.tls import TlsMode
from rocketq.proxy.auth import AclInterceptor, GrpcAcl
from rocketq.proxy.broker_auth import broker_client_config
from rocketq.proxy.client_registry import GrpcClients
from rocketq.proxy.config import ProxyConfig, ProxyConfigError
from rocketq.proxy.groups import SubscriptionGroups
from rocketq.proxy.metrics import MetricsInterceptor, ProxyMetrics
from rocketq.proxy.service import MessagingService
from rocketq.proxy.telemetry_relay import TelemetryRelay
from rocketq.proxy.tls_front import TlsFront
from rocketq.proxy.topics import TopicTypes
from rocketq.proxy.transaction import ProxyTransactions, TelemetryHub
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2.service_pb2_grpc import add_MessagingServiceServicer_to_server
from rocketq.server.acl import AclConfigError, resolve_acl_file_path

__all__ = ["PRODUCER_GROUP", "ProxyServer", "boot_line"]

log = logging.getLogger("rocketq.proxy")

#: the producer group of the proxy's sends (RocketMQ's proxy also sends on behalf of its clients)
PRODUCER_GROUP = "rocketq_proxy_producer"


def boot_line(address: str, config: ProxyConfig) -> str:
    """The line printed on stdout once the proxy listens (the launcher reads the address from it)."""
    return (
        f"The proxy boot success. mode={config.proxy_mode.value}, grpc listening on {address},"
        f" namesrv={config.namesrv_addr}"
    )


def _endpoints(host: str, port: int) -> pb.Endpoints:
    try:
        scheme = pb.AddressScheme.IPv6 if ipaddress.ip_address(host).version == 6 else pb.AddressScheme.IPv4
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


class ProxyServer:
    """``await start()``, then ``address`` is where the SDKs connect; ``await stop()`` at the end."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        # signed with the proxy's account when enableAclRpcHookForClusterMode (broker_auth)
        self.client_config = broker_client_config(config)
        self.instance = ClientInstance(config.namesrv_addr, config=self.client_config)
        self.relay = TelemetryRelay(config)
        self.clients = GrpcClients(self.instance, config, self.client_config, self.relay.handle)
        self.producer = AsyncProducer(
            config.namesrv_addr,
            instance=self.instance,
            producer_group=PRODUCER_GROUP,
            max_message_size=config.max_message_size,
        )
        self.hub = TelemetryHub()
        self.transactions = ProxyTransactions(
            config.namesrv_addr, self.instance, self.hub, config.max_message_size
        )
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._front: TlsFront | None = None
        self._service: MessagingService | None = None
        #: metricsExporterType=PROM: the tables and exporter (docs/observability.md)
        self.metrics = ProxyMetrics(config) if config.metrics_enabled else None

    @property
    def address(self) -> str:
        return f"{self._advertised_host()}:{self.port}"

    def _advertised_host(self) -> str:
        if self.config.advertised_address:
            return self.config.advertised_address.rpartition(":")[0] or self.config.advertised_address
        bind = self.config.grpc_server_bind_address
        return "127.0.0.1" if bind in ("0.0.0.0", "::", "") else bind

    async def start(self) -> None:
        await self.producer.start()
        size = self.config.grpc_max_inbound_message_size
        tls = self.config.tls()
        front = TlsFront(tls) if tls.mode is not TlsMode.DISABLED else None
        interceptors: list[grpc.aio.ServerInterceptor] = []
        if self.metrics is not None:  # outermost: it also times the ACL's refusals
            await self.metrics.start()
            interceptors.append(MetricsInterceptor(self.metrics))
        if self.config.enable_acl:
            try:
                acl_file = resolve_acl_file_path(self.config.acl_file_path)
                peer_of = front.real_peer if front is not None else None
                interceptors.append(AclInterceptor(GrpcAcl(acl_file), peer_of))
            except (OSError, AclConfigError) as exc:
                raise ProxyConfigError(f"enableACL=true but the ACL rules cannot be read: {exc}") from None
            log.info("ACL on: 5.x credentials are checked against %s", acl_file)
        server = grpc.aio.server(
            interceptors=interceptors,
            options=[("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size)],
        )
        bind = f"{self.config.grpc_server_bind_address}:{self.config.grpc_server_port}"
        if front is None:
            self.port = server.add_insecure_port(bind)
        else:  # the front owns the port and relays to gRPC on loopback (tls_front)
            front.backend_port = server.add_insecure_port("127.0.0.1:0")
            try:
                self.port = await front.start(
                    self.config.grpc_server_bind_address, self.config.grpc_server_port
                )
            except OSError:
                self.port = 0
            self._front = front
        if self.port == 0:
            raise OSError(
                f"cannot listen on {bind} (grpcServerPort): the port is taken or the address invalid"
            )
        advertised = self.config.advertised_address
        port = int(advertised.rpartition(":")[2]) if advertised and ":" in advertised else self.port
        endpoints = _endpoints(self._advertised_host(), port)
        service = MessagingService(
            self.config,
            self.instance,
            self.producer,
            self.transactions,
            self.hub,
            endpoints,
            SubscriptionGroups(self.instance, self.config),
            TopicTypes(self.instance, self.config),
            clients=self.clients,
            relay=self.relay,
        )
        add_MessagingServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        await server.start()
        self._server = server
        self._service = service
        self.clients.start()

    async def stop(self, grace_s: float | None = None) -> None:
        grace = self.config.grpc_shutdown_grace_millis / 1000 if grace_s is None else grace_s
        if self._front is not None:
            await self._front.stop()
            self._front = None
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._service is not None and self._service.renewer is not None:
            await self._service.renewer.close()  # the renew loop ends with the server
        self._service = None
        await self.clients.close()  # UNREGISTER_CLIENT for every 5.x client still registered
        await self.transactions.close()
        await self.producer.shutdown()
        await self.instance.close()
        if self.metrics is not None:
            await self.metrics.stop()
