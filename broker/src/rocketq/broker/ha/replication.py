"""Replication: the one object the broker holds for its role in a broker group.

A master (ASYNC_MASTER, SYNC_MASTER) runs an :class:`~.master.HAService`; a slave runs an
:class:`~.slave.HAClient`.  This module builds the right one from the broker's configuration,
answers the send path's question "may this put be acknowledged?" (:meth:`Replication.after_put`:
SYNC_MASTER waits for a slave, ASYNC_MASTER only wakes the senders) and renders the HA status for
GET_BROKER_HA_STATUS and GET_BROKER_RUNTIME_INFO (field names in docs/replication.md, "Admin API").

In controller mode (docs/failover.md) nothing is built at construction: the replicas manager
starts and stops the HA service or client at runtime (:meth:`Replication.start_master`,
:meth:`Replication.start_slave`) and installs an :class:`AckGate` that decides, instead of the
fixed SYNC_MASTER rule, whether a write may be taken and acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.ha.master import HAService, SlaveConnection
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.client.remoting.ha_status import HAStatus

__all__ = ["AckGate", "Replication"]

log = logging.getLogger(__name__)


class AckGate(Protocol):
    """Controller mode's write rules (implemented by the replicas manager)."""

    def write_refusal(self) -> str | None:
        """Why this broker must not take a write now (None: it may)."""

    async def after_put(self, result: PutMessageResult) -> PutMessageResult:
        """The result to answer for a stored write (waits for the SyncStateSet)."""

    async def wait_offset(self, offset: int) -> PutMessageStatus:
        """PUT_OK once ``offset`` may be acknowledged."""

    def status_keys(self) -> dict[str, object]:
        """Extra GET_BROKER_HA_STATUS fields (epochs, SyncStateSet)."""


class Replication:
    """The HA side of one broker; runs on the broker's event loop."""

    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.master: HAService | None = None
        self.client: HAClient | None = None
        #: controller mode: the replicas manager's write rules (None: the classic fixed role)
        self.gate: AckGate | None = None
        if config.enable_controller_mode:
            pass  # the replicas manager starts the HA side once the controller named the role
        elif config.is_master:
            self.master = self._new_master(config.ha_listen_port)
        else:
            self.client = self._new_client(config.ha_master_address)
        self.ha_port = config.ha_listen_port

    def _new_master(self, port: int) -> HAService:
        config = self.config
        return HAService(
            self.store,
            host=config.bind_address,
            port=port,
            batch_size=config.ha_transfer_batch_size,
            heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_interval_s=config.ha_housekeeping_interval_ms / 1000,
            max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
            tls_mode=config.tls.mode,
            ssl_context=config.tls.server_context(),
        )

    def _new_client(self, master_address: str) -> HAClient:
        config = self.config
        return HAClient(
            self.store,
            master_address=master_address,
            batch_size=config.ha_transfer_batch_size,
            heartbeat_interval_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_interval_s=config.ha_housekeeping_interval_ms / 1000,
            truncate_divergent=config.ha_slave_truncate_divergent,
            ssl_context=config.tls.client_context(),
        )

    # -- controller mode: roles at runtime ---------------------------------------------------------
    async def start_master(
        self,
        handshake: Callable[[asyncio.StreamReader], Awaitable[int]],
        on_ack: Callable[[SlaveConnection], None],
        confirm_offset: Callable[[], int],
    ) -> int:
        """Stop replicating and serve slaves on ``haListenPort``; returns the bound HA port.
        ``confirm_offset`` is sent to the slaves in confirm frames as it advances."""
        await self.stop()
        master = self.master = self._new_master(self.config.ha_listen_port)
        master.handshake = handshake
        master.ack_listeners.append(on_ack)
        master.confirm_offset = confirm_offset
        self.ha_port = await master.start()
        return self.ha_port

    async def start_slave(
        self, ha_master_address: str, handshake: bytes, on_confirm: Callable[[int], None]
    ) -> None:
        """Stop serving slaves and replicate from ``ha_master_address``; ``on_confirm`` gets the
        master's confirm offset from its confirm frames."""
        await self.stop()
        client = self.client = self._new_client(ha_master_address)
        client.handshake = handshake
        client.on_confirm = on_confirm
        client.start()

    def write_refusal(self) -> str | None:
        """Controller mode: why a write must be refused now (None in classic mode)."""
        return self.gate.write_refusal() if self.gate is not None else None

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
        master, client, self.master, self.client = self.master, self.client, None, None
        if master is not None:
            await master.stop()
        if client is not None:
            await client.stop()

    def on_register_result(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """A REGISTER_BROKER response: a slave learns its master's HA address from it."""
        if self.client is not None:
            self.client.update_master_address(ha_server_addr)

    async def after_put(self, result: PutMessageResult) -> PutMessageResult:
        """The result to acknowledge once an append is stored (and flushed, with SYNC_FLUSH).

        SYNC_MASTER: wait until a slave has the bytes; SLAVE_NOT_AVAILABLE when no slave is in
        sync, FLUSH_SLAVE_TIMEOUT after ``syncFlushTimeout`` (the message is stored either way).
        """
        if self.gate is not None:
            return await self.gate.after_put(result)
        master = self.master
        append = result.append_result
        if master is None or append is None or result.status is not PutMessageStatus.PUT_OK:
            return result
        if not self.sync_master:
            # ASYNC_MASTER: nobody waits for the slave, so its writers are not woken per put (as
            # Java's are not): they send what accumulated every POLL_INTERVAL_S, in fewer and
            # larger transfers, which costs master and slave less CPU per message
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
        if self.gate is not None:
            return await self.gate.wait_offset(offset)
        if self.master is None or not self.sync_master:
            return PutMessageStatus.PUT_OK  # (ASYNC_MASTER: the writers send at their next poll)
        return await self.master.wait_replicated(offset, self.store.config.sync_flush_timeout_ms / 1000)

    def status_body(self) -> dict[str, object]:
        """The GET_BROKER_HA_STATUS document."""
        max_offset, in_sync, connections = (
            self.master.runtime_info() if self.master is not None else (0, 0, ())
        )
        status = HAStatus(
            master=self.config.is_master,
            broker_role=self.config.broker_role.value,
            ha_listen_port=self.ha_port,
            master_commit_log_max_offset=max_offset,
            in_sync_slave_nums=in_sync,
            connections=connections,
            client=self.client.runtime_info() if self.client is not None else None,
        )
        doc = status.to_obj()
        if self.gate is not None:
            doc.update(self.gate.status_keys())
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
