"""The broker's request table: which processor answers each request code.

Each request family has its processor module in this package; this module maps the codes onto
them, wraps the admin writes a slave refuses and the pulls a refusing slave answers NO_PERMISSION,
and holds the few answers too small for a module of their own (GET_ALL_DELAY_OFFSET,
GET_BROKER_HA_STATUS) and the role checks around END_TRANSACTION.
"""

from __future__ import annotations

import json

from rocketq.broker.ha.replication import Replication
from rocketq.broker.pop.assignment import assignment_processors
from rocketq.broker.pop.processors import pop_processors
from rocketq.broker.pop.status import PopStatusProcessor
from rocketq.broker.processor.admin import AdminProcessor
from rocketq.broker.processor.broker_config import BrokerConfigProcessor
from rocketq.broker.processor.broker_stats import BrokerStatsProcessor
from rocketq.broker.processor.client_manage import ClientManageProcessor
from rocketq.broker.processor.consume_directly import ConsumeDirectlyProcessor
from rocketq.broker.processor.consumer_manage import ConsumerManageProcessor
from rocketq.broker.processor.consumer_running_info import ConsumerRunningInfoProcessor
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.processor.cq_producer_admin import CqProducerAdminProcessor
from rocketq.broker.processor.end_transaction import process_end_transaction
from rocketq.broker.processor.offsets import OffsetQueryProcessor
from rocketq.broker.processor.producer_connection import ProducerConnectionProcessor
from rocketq.broker.processor.pull import PullMessageProcessor
from rocketq.broker.processor.query import QueryMessageProcessor
from rocketq.broker.processor.rebalance import RebalanceProcessor
from rocketq.broker.processor.recall import RecallMessageProcessor
from rocketq.broker.processor.send import SendMessageProcessor
from rocketq.broker.processor.send_back import SendMessageBackProcessor
from rocketq.broker.processor.stats import StatsProcessor
from rocketq.broker.processor.store_admin import StoreAdminProcessor
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel, Processor

__all__ = ["processor_table"]

#: admin writes a slave refuses: its metadata is the master's copy
SLAVE_REFUSED_CODES = (
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
)


def processor_table(ctx: BrokerContext, replication: Replication | None = None) -> dict[int, Processor]:
    """Request code -> processor coroutine for every code the broker serves."""
    send = SendMessageProcessor(ctx, replication).process
    pull = _readable_only(PullMessageProcessor(ctx).process, replication)
    query = QueryMessageProcessor(ctx)
    offsets = OffsetQueryProcessor(ctx)
    consumer = ConsumerManageProcessor(ctx)
    client = ClientManageProcessor(ctx)
    admin = AdminProcessor(ctx, ha_runtime=replication.runtime_keys if replication is not None else None)
    stats = StatsProcessor(ctx)
    rebalance = RebalanceProcessor(ctx)
    store_admin = StoreAdminProcessor(ctx)
    send_back = SendMessageBackProcessor(ctx).process
    rc = RequestCode
    table: dict[int, Processor] = {
        rc.END_TRANSACTION: _end_transaction(ctx, replication),
        rc.SEND_MESSAGE: send,
        rc.SEND_MESSAGE_V2: send,
        rc.SEND_BATCH_MESSAGE: send,
        rc.PULL_MESSAGE: pull,
        rc.LITE_PULL_MESSAGE: pull,
        rc.CONSUMER_SEND_MSG_BACK: send_back,
        rc.GET_ALL_DELAY_OFFSET: _get_all_delay_offset(ctx),
        rc.QUERY_MESSAGE: query.query_message,
        rc.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
        rc.GET_MAX_OFFSET: offsets.get_max_offset,
        rc.GET_MIN_OFFSET: offsets.get_min_offset,
        rc.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset_by_timestamp,
        rc.GET_EARLIEST_MSG_STORETIME: offsets.get_earliest_msg_storetime,
        rc.QUERY_CONSUMER_OFFSET: consumer.query_consumer_offset,
        rc.UPDATE_CONSUMER_OFFSET: consumer.update_consumer_offset,
        rc.GET_CONSUMER_LIST_BY_GROUP: consumer.get_consumer_list_by_group,
        rc.HEART_BEAT: client.heart_beat,
        rc.UNREGISTER_CLIENT: client.unregister_client,
        rc.CHECK_CLIENT_CONFIG: client.check_client_config,
        rc.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
        rc.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
        rc.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
        rc.GET_TOPIC_CONFIG: admin.get_topic_config,
        rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
        rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group,
        rc.GET_SUBSCRIPTIONGROUP_CONFIG: admin.get_subscription_group,
        rc.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
        rc.GET_ALL_CONSUMER_OFFSET: admin.get_all_consumer_offset,
        rc.GET_BROKER_RUNTIME_INFO: admin.get_broker_runtime_info,
        rc.GET_BROKER_CONFIG: admin.get_broker_config,
        rc.UPDATE_BROKER_CONFIG: BrokerConfigProcessor(ctx).update_broker_config,
        rc.GET_TOPIC_STATS_INFO: stats.get_topic_stats_info,
        rc.GET_CONSUME_STATS: stats.get_consume_stats,
        rc.GET_CONSUMER_CONNECTION_LIST: stats.get_consumer_connection_list,
        rc.GET_PRODUCER_CONNECTION_LIST: ProducerConnectionProcessor(ctx).get_producer_connection_list,
        rc.INVOKE_BROKER_TO_RESET_OFFSET: stats.invoke_broker_to_reset_offset,
        rc.LOCK_BATCH_MQ: rebalance.lock_batch_mq,
        rc.UNLOCK_BATCH_MQ: rebalance.unlock_batch_mq,
        rc.GET_BROKER_HA_STATUS: _get_broker_ha_status(ctx, replication),
        rc.RECALL_MESSAGE: RecallMessageProcessor(ctx).process,
        rc.GET_CONSUMER_RUNNING_INFO: ConsumerRunningInfoProcessor(ctx).get_consumer_running_info,
        rc.CONSUME_MESSAGE_DIRECTLY: ConsumeDirectlyProcessor(ctx).consume_message_directly,
        rc.DELETE_EXPIRED_COMMITLOG: store_admin.delete_expired_commit_log,
        rc.CLEAN_EXPIRED_CONSUMEQUEUE: store_admin.clean_expired_consume_queue,
        rc.CLEAN_UNUSED_TOPIC: store_admin.clean_unused_topic,
        rc.RESET_MASTER_FLUSH_OFFSET: store_admin.reset_master_flush_offset,
    }
    broker_stats = BrokerStatsProcessor(ctx)  # mqadmin statsAll / exportMetrics
    table[rc.VIEW_BROKER_STATS_DATA] = broker_stats.view_broker_stats_data
    table[rc.QUERY_TOPIC_CONSUME_BY_WHO] = broker_stats.query_topic_consume_by_who
    table.update(pop_processors(ctx))  # RocketMQ 5 POP consumption (rocketq.broker.pop)
    table.update(assignment_processors(ctx))  # server-side rebalance (rocketq.broker.pop.assignment)
    table[rc.GET_POP_STATUS] = PopStatusProcessor(ctx).get_pop_status  # rocketq's code (mqadmin popStatus)
    cq_producer = CqProducerAdminProcessor(ctx)  # mqadmin queryCq / producer
    table[rc.QUERY_CONSUME_QUEUE] = cq_producer.query_consume_queue
    table[rc.GET_ALL_PRODUCER_INFO] = cq_producer.get_all_producer_info
    for code in SLAVE_REFUSED_CODES:
        table[code] = _slave_refuses(ctx, table[code])
    return table


def _get_all_delay_offset(ctx: BrokerContext) -> Processor:
    """GET_ALL_DELAY_OFFSET: the delay offsets of the ScheduleMessageService (none on a slave)."""

    async def get_all_delay_offset(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        doc = ctx.schedule.encode() if ctx.schedule is not None else {"offsetTable": {}}
        return request.make_response(ResponseCode.SUCCESS, body=json.dumps(doc).encode())

    return get_all_delay_offset


def _end_transaction(ctx: BrokerContext, replication: Replication | None) -> Processor:
    """END_TRANSACTION, refused on a slave, an unconfirmed master and a broker without transactions."""

    async def end_transaction(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if not ctx.config.is_master:
            return (
                None
                if request.is_oneway
                else request.make_response(
                    ResponseCode.SERVICE_NOT_AVAILABLE,
                    f"the broker[{ctx.broker_addr}] is a slave (brokerRole=SLAVE): "
                    "end the transaction on the master",
                )
            )
        fenced = replication.write_refusal() if replication is not None else None
        if fenced is not None:  # controller mode: an unconfirmed master (docs/failover.md)
            return (
                None
                if request.is_oneway
                else request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, fenced)
            )
        if ctx.txn is None:
            return (
                None
                if request.is_oneway
                else request.make_response(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{ctx.broker_addr}] does not serve transactions (slave?)",
                )
            )
        return await process_end_transaction(
            ctx.txn,
            request,
            offload=ctx.send_executor.run,
            is_slave=not ctx.config.is_master,
            replicated=replication.wait_offset if replication else None,
            on_ended=ctx.metrics.record_end_transaction if ctx.metrics is not None else None,
        )

    return end_transaction


def _get_broker_ha_status(ctx: BrokerContext, replication: Replication | None) -> Processor:
    """GET_BROKER_HA_STATUS: the replication status body."""

    async def get_broker_ha_status(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        doc = replication.status_body() if replication is not None else {"master": ctx.config.is_master}
        return request.make_response(ResponseCode.SUCCESS, body=json.dumps(doc).encode())

    return get_broker_ha_status


def _slave_refuses(ctx: BrokerContext, process: Processor) -> Processor:
    """Admin writes on a slave: its metadata is the master's copy (docs/replication.md).  The role
    is read per request: in controller mode it changes at runtime."""

    async def guarded(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if ctx.config.is_master:
            return await process(request, channel)
        return request.make_response(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{ctx.broker_addr}] is a slave (brokerRole=SLAVE): "
            "change topics and groups on the master",
        )

    return guarded


def _controller_mode(replication: Replication) -> bool:
    return replication.config.enable_controller_mode


def _readable_only(process: Processor, replication: Replication | None) -> Processor:
    """Pulls, answered NO_PERMISSION while a slave refuses its master's log."""
    if replication is None or (replication.client is None and not _controller_mode(replication)):
        return process

    async def guarded(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if replication.readable:
            return await process(request, channel)
        return request.make_response(
            ResponseCode.NO_PERMISSION, f"the broker is a slave that serves no reads: {replication.refusal}"
        )

    return guarded
