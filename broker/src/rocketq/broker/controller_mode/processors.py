"""The two requests a broker in controller mode answers: GET_BROKER_EPOCH_CACHE (1007) and
NOTIFY_BROKER_ROLE_CHANGED (1008, pushed by the controller leader).

GET_BROKER_EPOCH_CACHE is answered with an ``EpochEntryCache`` body: the epoch entries, the last
one ending at the CommitLog's max offset, which is what a new slave compares its own entries with.
NOTIFY_BROKER_ROLE_CHANGED is applied like a polled replica info (a stale or repeated one changes
nothing) and answered SUCCESS at once; the role change itself runs in the background.
"""

from __future__ import annotations

import asyncio

from rocketq.broker.controller_mode.replicas_manager import ReplicaInfo, ReplicasManager
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import (
    EpochEntryCache,
    NotifyBrokerRoleChangedRequestHeader,
    SyncStateSet,
)
from rocketq.server import Channel, Processor

__all__ = ["controller_mode_processors"]


def controller_mode_processors(manager: ReplicasManager) -> dict[int, Processor]:
    pending: set[asyncio.Task[None]] = set()

    async def epoch_cache(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        max_offset = manager.store.max_phy_offset
        cache = EpochEntryCache(
            cluster_name=manager.config.broker_cluster_name,
            broker_name=manager.config.broker_name,
            broker_id=manager.broker_id,
            epoch_list=tuple(manager.epoch_file.entries(max_offset)),
            max_offset=max_offset,
        )
        return request.make_response(ResponseCode.SUCCESS, body=cache.to_json())

    async def role_changed(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            header = NotifyBrokerRoleChangedRequestHeader.from_ext_fields(request.ext_fields)
            sss = SyncStateSet.from_json(request.body) if request.body else SyncStateSet(frozenset(), 0)
        except RocketQError as exc:
            return None if request.is_oneway else request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        info = ReplicaInfo(
            header.master_broker_id,
            header.master_address,
            header.master_epoch or 0,
            sss.sync_state_set,
            header.sync_state_set_epoch or sss.sync_state_set_epoch,
        )
        task = asyncio.get_running_loop().create_task(manager.apply(info))
        pending.add(task)
        task.add_done_callback(pending.discard)
        return None if request.is_oneway else request.make_response(ResponseCode.SUCCESS)

    return {
        RequestCode.GET_BROKER_EPOCH_CACHE: epoch_cache,
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED: role_changed,
    }
