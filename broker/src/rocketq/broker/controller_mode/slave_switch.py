"""Becoming the slave of a new master: agree on the shared log, cut the rest, find the HA port.

Steps (RocketMQ 5's ``AutoSwitchHAClient`` truncation, done here before replication starts):

1. GET_BROKER_EPOCH_CACHE from the new master, retried briefly until its last epoch is the one
   the controller announced (the master may still be switching);
2. :func:`~.epoch_file.find_consistent_point` between this broker's entries and the master's;
3. ``MessageStore.truncate_commit_log(point)`` when this log runs past it (ConsumeQueues and
   index entries beyond are dropped and rebuilt) — the divergent tail a stale master wrote under
   its old epoch, never acknowledged, disappears here;
4. the master's entries replace this broker's (its log is now a prefix of the master's);
5. the master's HA address, from its GET_BROKER_HA_STATUS (``haServerAddr``).

No shared epoch while this log holds data (a store from classic mode or from another group) is
refused with :class:`SlaveSwitchError`: nothing is truncated without proof it diverges.
"""

from __future__ import annotations

import asyncio
import json
import logging

from rocketq.broker.controller_mode.epoch_file import EpochFile, find_consistent_point
from rocketq.broker.errors import BrokerError
from rocketq.broker.store.message_store import MessageStore
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import EpochEntry, EpochEntryCache
from rocketq.client.transport.aio import RemotingClient

__all__ = ["SlaveSwitchError", "master_entries", "prepare_slave"]

log = logging.getLogger(__name__)

_ATTEMPTS = 25
_PAUSE_S = 0.2
_TIMEOUT_MS = 3_000


class SlaveSwitchError(BrokerError):
    """This broker cannot follow the new master (yet)."""


def master_entries(cache: EpochEntryCache) -> list[EpochEntry]:
    """The master's entries with real ends (its last entry ends at its max offset)."""
    entries = sorted(cache.epoch_list, key=lambda e: e.epoch)
    out = []
    for i, entry in enumerate(entries):
        end = entries[i + 1].start_offset if i + 1 < len(entries) else cache.max_offset
        out.append(EpochEntry(entry.epoch, entry.start_offset, end))
    return out


async def _fetch(client: RemotingClient, addr: str, code: int) -> bytes:
    answer = await client.invoke(addr, RemotingCommand.request(code), _TIMEOUT_MS)
    if answer.code != ResponseCode.SUCCESS:
        raise SlaveSwitchError(f"{addr} answered request {code} with code {answer.code}: {answer.remark}")
    return answer.body or b""


async def _master_cache(client: RemotingClient, addr: str, epoch: int) -> tuple[EpochEntryCache, str]:
    last_error = ""
    for _ in range(_ATTEMPTS):
        try:
            cache = EpochEntryCache.from_json(await _fetch(client, addr, RequestCode.GET_BROKER_EPOCH_CACHE))
            status = json.loads(await _fetch(client, addr, RequestCode.GET_BROKER_HA_STATUS))
        except (RocketQError, OSError, TimeoutError, ValueError) as exc:
            last_error = str(exc)
        else:
            last = max((e.epoch for e in cache.epoch_list), default=-1)
            ha_addr = str(status.get("haServerAddr") or "")
            if last >= epoch and ha_addr:
                return cache, ha_addr
            last_error = f"its last epoch is {last}, expected {epoch}"
        await asyncio.sleep(_PAUSE_S)
    raise SlaveSwitchError(f"master {addr} is not ready as master of epoch {epoch}: {last_error}")


async def prepare_slave(
    client: RemotingClient, store: MessageStore, epoch_file: EpochFile, master_addr: str, epoch: int
) -> str:
    """Truncate to the consistent point with ``master_addr``; returns the master's HA address."""
    cache, ha_addr = await _master_cache(client, master_addr, epoch)
    masters = master_entries(cache)
    max_offset = store.max_phy_offset
    mine = epoch_file.entries(max_offset)
    point = find_consistent_point(mine, masters)
    if point < 0:
        if max_offset > store.min_phy_offset:
            raise SlaveSwitchError(
                f"this CommitLog (up to {max_offset}) shares no epoch with master {master_addr}: it cannot "
                "be proven a prefix of the master's log; move the store away to resynchronise"
            )
        point = max_offset
    if point < max_offset:
        log.warning(
            "truncating the CommitLog from %d to %d (%d bytes): written under an epoch master %s "
            "(epoch %d) does not share",
            max_offset,
            point,
            max_offset - point,
            master_addr,
            epoch,
        )
        await asyncio.to_thread(store.truncate_commit_log, point)
    await asyncio.to_thread(epoch_file.replace_all, masters)
    return ha_addr
