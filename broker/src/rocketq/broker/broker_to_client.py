"""Broker2Client: the oneway requests the broker sends to its clients over their own connections.

As in RocketMQ, the broker calls back into producers and consumers on the channels they opened: it
asks a live producer of a group for the state of a half message (CHECK_TRANSACTION_STATE) and tells
the consumers of a group that its members changed (NOTIFY_CONSUMER_IDS_CHANGED).  Both are oneway
and bounded by a timeout, so that a dead client holds up neither the broker nor the other clients.
"""

from __future__ import annotations

import asyncio
import logging
import random

from rocketq.broker.client_manager import ProducerManager
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader
from rocketq.server import Channel

__all__ = ["NOTIFY_TIMEOUT_MS", "Broker2Client", "send_oneway"]

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_MS = 3_000


async def send_oneway(channel: Channel, cmd: RemotingCommand) -> None:
    """Send ``cmd`` oneway; a failure or a timeout is logged at debug level and otherwise ignored."""
    try:
        await asyncio.wait_for(channel.invoke_oneway(cmd), NOTIFY_TIMEOUT_MS / 1000.0)
    except Exception as exc:  # a dead client must not disturb the others
        log.debug("notify %s failed: %s", channel.remote_address, exc)


class Broker2Client:
    """The broker's calls to its clients, sent from the broker's event loop ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()

    def notify_consumer_ids_changed(self, group: str, channels: list[Channel]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to each consumer channel of ``group`` (called on the loop)."""
        for ch in channels:
            cmd = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            task = self._loop.create_task(send_oneway(ch, cmd))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def check_transaction_state(
        self,
        producers: ProducerManager,
        group: str,
        body: bytes,
        header: CheckTransactionStateRequestHeader,
    ) -> bool:
        """CHECK_TRANSACTION_STATE to one live producer of ``group``; False when there is none.

        Runs on the transaction check thread: the request is handed to the loop, never awaited.
        """
        try:
            infos = list(producers.get(group).values())
        except RuntimeError:  # the table changed under us; the next pass retries
            return False
        if not infos:
            return False
        cmd = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body=body, oneway=True
        )
        channel = random.choice(infos).channel
        asyncio.run_coroutine_threadsafe(send_oneway(channel, cmd), self._loop)
        return True
