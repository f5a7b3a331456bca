"""The NameServer's request processors: one method per request code, wired to a RemotingServer.

Each handler is plain synchronous code over the route registry and the KV store (both guarded by
their own locks), wrapped once into the transport's async processor signature.  Bad or missing
headers raise ``HeaderError`` and corrupt bodies ``RegisterBodyError``; the transport turns them
into ``SYSTEM_ERROR`` with the exception text.  Answers follow RocketMQ 4.9's
``DefaultRequestProcessor``: ``TOPIC_NOT_EXIST`` with "No topic route info in name server for
the topic: X", ``QUERY_NOT_FOUND`` for missing KV items, a ``SYSTEM_ERROR`` "crc32 not match" for
a register body whose ``bodyCrc32`` is wrong, and the ``ORDER_TOPIC_CONFIG`` KV table as the body
of a successful registration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketq.client.remoting import headers as h
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import BrokerHeartbeatRequestHeader
from rocketq.client.remoting.vocabulary import NAMESPACE_ORDER_TOPIC_CONFIG
from rocketq.namesrv import bodies
from rocketq.namesrv.config import NamesrvConfig, config_to_properties
from rocketq.namesrv.config_update import apply_update
from rocketq.namesrv.kvconfig import KvConfigManager
from rocketq.namesrv.routeinfo import RouteInfoManager
from rocketq.server import Channel, Processor, RemotingServer

log = logging.getLogger("rocketq.namesrv")

Handler = Callable[[RemotingCommand, Channel | None], RemotingCommand]


def _ok(request: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, None, ext, body)


class NamesrvProcessor:
    """Answers every NameServer request code; ``handlers()`` maps codes to methods."""

    def __init__(
        self, config: NamesrvConfig, route_info: RouteInfoManager, kv_config: KvConfigManager
    ) -> None:
        self.config = config
        self.route_info = route_info
        self.kv_config = kv_config

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
        }

    def register_all(self, server: RemotingServer) -> None:
        """Install every handler on ``server``."""
        for code, handler in self.handlers().items():
            server.register(code, _as_async(handler))

    # -- KV config ---------------------------------------------------------------------------

    def put_kv_config(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv_config.put(hdr.namespace, hdr.key, hdr.value)
        return _ok(request)

    def get_kv_config(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv_config.get(hdr.namespace, hdr.key)
        if value is None:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}"
            )
        return _ok(request, h.GetKVConfigResponseHeader(value=value).to_ext_fields())

    def delete_kv_config(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv_config.delete(hdr.namespace, hdr.key)
        return _ok(request)

    def get_kv_list_by_namespace(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.kv_config.namespace(hdr.namespace)
        if not table:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace}"
            )
        return _ok(request, body=bodies.encode_kv_table(table))

    # -- brokers -----------------------------------------------------------------------------

    def register_broker(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        if hdr.body_crc32 != 0 and hdr.body_crc32 != bodies.body_crc32(request.body):
            log.warning(
                "REGISTER_BROKER from %s (%s): bodyCrc32 %d does not match the body (%d)",
                hdr.broker_addr, _peer(channel), hdr.body_crc32, bodies.body_crc32(request.body),
            )  # fmt: skip
            return request.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = bodies.decode_register_body(request.body, compressed=hdr.compressed)
        result = self.route_info.register_broker(
            cluster_name=hdr.cluster_name,
            broker_addr=hdr.broker_addr,
            broker_name=hdr.broker_name,
            broker_id=hdr.broker_id,
            ha_server_addr=hdr.ha_server_addr,
            topic_queues=body.topic_queues if body else None,
            data_version=body.data_version if body else (0, 0, 0),
            filter_server_list=body.filter_server_list if body else (),
            channel=channel,
        )
        if not result.accepted:
            log.warning(
                "REGISTER_BROKER refused: %s (%s id=%d) is stale, another address holds that id "
                "with a newer stateVersion (master epoch) than %d",
                hdr.broker_addr, hdr.broker_name, hdr.broker_id, body.data_version[2] if body else 0,
            )  # fmt: skip
        elif result.replaced_addr is not None:
            log.warning(
                "broker %s id=%d moved from %s to %s (an elected master or a replaced replica)",
                hdr.broker_name, hdr.broker_id, result.replaced_addr, hdr.broker_addr,
            )  # fmt: skip
        elif result.first_registration:
            log.info(
                "new broker registered: cluster=%s name=%s id=%d addr=%s ha=%s topics=%d",
                hdr.cluster_name, hdr.broker_name, hdr.broker_id, hdr.broker_addr, hdr.ha_server_addr,
                len(body.topic_queues) if body else 0,
            )  # fmt: skip
        else:
            log.debug("broker %s (%s) re-registered", hdr.broker_name, hdr.broker_addr)
        ext = h.RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_ext_fields()
        order_conf = self.kv_config.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return _ok(request, ext, bodies.encode_kv_table(order_conf) if order_conf else b"")

    def unregister_broker(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        known = self.route_info.unregister_broker(
            cluster_name=hdr.cluster_name, broker_addr=hdr.broker_addr, broker_name=hdr.broker_name,
            broker_id=hdr.broker_id,
        )  # fmt: skip
        log.info(
            "broker unregistered: cluster=%s name=%s id=%d addr=%s%s",
            hdr.cluster_name,
            hdr.broker_name,
            hdr.broker_id,
            hdr.broker_addr,
            "" if known else " (was unknown)",
        )
        return _ok(request)

    def broker_heartbeat(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        """BROKER_HEARTBEAT (904): a broker's liveness between registrations (RocketMQ 5)."""
        hdr = BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        if not self.route_info.update_broker_info_update_timestamp(hdr.broker_addr):
            log.debug("BROKER_HEARTBEAT from unregistered broker %s", hdr.broker_addr)
        return _ok(request)

    def query_data_version(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        hdr = h.QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        version = bodies.decode_data_version(request.body)
        changed, ours = self.route_info.query_data_version_changed(hdr.broker_addr, version)
        ext = h.QueryDataVersionResponseHeader(changed=changed).to_ext_fields()
        return _ok(request, ext, bodies.data_version_json(ours) if ours is not None else b"")

    # -- routes and topics -------------------------------------------------------------------

    def get_route_info_by_topic(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.route_info.pick_topic_route(hdr.topic)
        if route is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {hdr.topic}"
            )
        order_conf = (
            self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, hdr.topic)
            if self.config.order_message_enable
            else None
        )
        return _ok(request, body=bodies.encode_topic_route(route, order_conf))

    def get_broker_cluster_info(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        return _ok(request, body=bodies.encode_cluster_info(self.route_info.cluster_info()))

    def get_all_topic_list(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        return _ok(request, body=bodies.encode_topic_list(self.route_info.all_topics()))

    def get_topics_by_cluster(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return _ok(request, body=bodies.encode_topic_list(self.route_info.topics_by_cluster(hdr.cluster)))

    def delete_topic_in_namesrv(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        if self.route_info.delete_topic(hdr.topic, hdr.cluster_name):
            log.info(
                "topic %s deleted%s",
                hdr.topic,
                f" from cluster {hdr.cluster_name}" if hdr.cluster_name else "",
            )
        return _ok(request)

    def wipe_write_perm_of_broker(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_info.update_write_perm(hdr.broker_name, writable=False)
        log.info("write permission of broker %s wiped on %d topics", hdr.broker_name, count)
        return _ok(request, h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields())

    def add_write_perm_of_broker(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        hdr = h.AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.route_info.update_write_perm(hdr.broker_name, writable=True)
        log.info("write permission of broker %s added on %d topics", hdr.broker_name, count)
        return _ok(request, h.AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext_fields())

    def get_namesrv_config(self, request: RemotingCommand, channel: Channel | None = None) -> RemotingCommand:
        return _ok(request, body=config_to_properties(self.config).encode())

    def update_namesrv_config(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        response, self.config = apply_update(request, self.config)  # rocketq.namesrv.config_update
        return response


def _peer(channel: Channel | None) -> str:
    return channel.remote_address if channel is not None else "local"


def _as_async(handler: Handler) -> Processor:
    async def processor(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return handler(request, channel)

    return processor
