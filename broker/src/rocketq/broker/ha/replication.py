"""Replication: the one object the broker holds for its role in a broker group.

A master (ASYNC_MASTER, SYNC_MASTER) runs an :class:`~.master.HAService`; a slave runs an
:class:`~.slave.HAClient`.  This module builds the right one from the broker's configuration,
answers the send path's question "may this put be acknowledged?" (:meth:`Replication.after_put`:
SYNC_MASTER waits for a slave, ASYNC_MASTER only wakes the senders) and renders the HA status for
GET_BROKER_HA_STATUS and GET_BROKER_RUNTIME_INFO (field names in docs/replication.md, "Admin API").
"""

from __future__ import annotations

import logging

from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus

__all__ = ["Replication"]

log = logging.getLogger(__name__)


class Replication:
    """The HA side of one broker; runs on the broker's event loop."""

    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.master: HAService | None = None
        self.client: HAClient | None = None
        if config.is_master:
            self.master = HAService(
                store,
                host=config.bind_address,
                port=config.ha_listen_port,
                batch_size=config.ha_transfer_batch_size,
                heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
                housekeeping_interval_s=config.ha_housekeeping_interval_ms / 1000,
                max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
            )
        else:
            self.client = HAClient(
                store,
                master_address=config.ha_master_address,
                batch_size=config.ha_transfer_batch_size,
                heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
                housekeeping_interval_s=config.ha_housekeeping_interval_ms / 1000,
                truncate_divergent=config.ha_slave_truncate_divergent,
            )
        self.ha_port = config.ha_listen_port

    @property
    def sync_master(self) -> bool:
        return self.config.broker_role is BrokerRole.SYNC_MASTER

    @property
    def readable(self) -> bool:
        """False on a slave that refuses its master's log (docs/replication.md)."""
        return self.client is None or self.client.readable

    @property
    def refusal(self) -> str:
        return self.client.status_detail if self.client is not None else ""

    async def start(self) -> int:
        """Start serving (master) or replicating (slave); returns the HA port to advertise."""
        if self.master is not None:
            self.ha_port = await self.master.start()
        if self.client is not None:
            self.client.start()
        return self.ha_port

    async def stop(self) -> None:
        if self.master is not None:
            await self.master.stop()
        if self.client is not None:
            await self.client.stop()

    def on_register_result(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """A REGISTER_BROKER response: a slave learns its master's HA address from it."""
        if self.client is not None:
            self.client.update_master_address(ha_server_addr)

    async def after_put(self, result: PutMessageResult) -> PutMessageResult:
        """The result to acknowledge once an append is stored (and flushed, with SYNC_FLUSH).

        SYNC_MASTER: wait until a slave has the bytes; SLAVE_NOT_AVAILABLE when no slave is in
        sync, FLUSH_SLAVE_TIMEOUT after ``syncFlushTimeout`` (the message is stored either way).
        """
        master = self.master
        append = result.append_result
        if master is None or append is None or result.status is not PutMessageStatus.PUT_OK:
            return result
        if not self.sync_master:
            master.wakeup()
            return result
        status = await master.wait_replicated(
            append.wrote_offset + append.wrote_bytes, self.store.config.sync_flush_timeout_ms / 1000
        )
        return (
            result
            if status is PutMessageStatus.PUT_OK
            else PutMessageResult(status=status, append_result=append)
        )

    async def wait_offset(self, offset: int) -> PutMessageStatus:
        """SYNC_MASTER: wait until a slave has ``offset`` (PUT_OK at once on other roles)."""
        if self.master is None or not self.sync_master:
            if self.master is not None:
                self.master.wakeup()
            return PutMessageStatus.PUT_OK
        return await self.master.wait_replicated(offset, self.store.config.sync_flush_timeout_ms / 1000)

    def status_body(self) -> dict[str, object]:
        """The GET_BROKER_HA_STATUS document."""
        doc: dict[str, object] = {
            "master": self.config.is_master,
            "brokerRole": self.config.broker_role.value,
            "haListenPort": self.ha_port,
            "masterCommitLogMaxOffset": 0,
            "inSyncSlaveNums": 0,
            "haConnectionInfo": [],
            "haClientRuntimeInfo": None,
        }
        if self.master is not None:
            doc.update(self.master.runtime_info())
        if self.client is not None:
            doc["haClientRuntimeInfo"] = self.client.runtime_info()
        return doc

    def runtime_keys(self) -> dict[str, str]:
        """The HA keys of GET_BROKER_RUNTIME_INFO."""
        keys = {"brokerId": str(self.config.broker_id), "haListenPort": str(self.ha_port)}
        if self.master is not None:
            m = self.master
            max_offset = self.store.max_phy_offset
            lags = [max_offset - c.acked for c in m.connections if c.acked >= 0]
            keys.update(
                {
                    "slaveFallBehindMuch": str(max(max_offset - m.push_to_slave_max_offset, 0)),
                    "haInSyncSlaveNums": str(m.in_sync_slaves(max_offset)),
                    "haSlaveCount": str(len(m.connections)),
                    "haMaxSlaveLagBytes": str(max(lags) if lags else 0),
                }
            )
        if self.client is not None:
            keys.update({"masterAddr": self.client.master_address, "haStatus": self.client.status.value})
        return keys
