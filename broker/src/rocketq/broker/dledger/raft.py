"""The group's Raft (pysyncobj) on the ``dLegerPeers`` ports: the log of :mod:`.state` events.

:class:`GroupRaft` runs one pysyncobj node on this member's peer address with a consumer,
:class:`ReplicatedGroup`, whose replicated method applies an event to the :class:`GroupState`.
pysyncobj's tick thread applies committed entries; the asyncio side reads a copy of the state
(:meth:`GroupRaft.snapshot`) and submits events with :meth:`GroupRaft.submit`, which resolves to
True once the entry is committed and applied here, False when it was refused (no leader known,
leadership lost) or not committed within the timeout (no quorum).  ``on_applied`` is called on the
tick thread with each applied event and the local monotonic time: the manager measures the
master's liveness and its own lease with it.  The Raft log is journaled under
``<storePathRootDir>/dledger-raft`` so that a restarted member keeps its vote and the group's
epochs (Java's DLedger keeps its own files under ``dledger-<selfId>``, which rocketq does not read).
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from rocketq.broker.dledger.peers import DLedgerPeer
from rocketq.broker.dledger.state import Event, GroupState

__all__ = ["RAFT_DIR", "GroupRaft", "ReplicatedGroup"]

#: the Raft journal's folder under storePathRootDir
RAFT_DIR = "dledger-raft"

AppliedListener = Callable[[Event, bool, float], None]


class ReplicatedGroup(SyncObjConsumer):  # type: ignore[misc]
    """The pysyncobj consumer: the state, a lock for readers, and the replicated apply."""

    def __init__(self, group_size: int, listener: AppliedListener) -> None:
        self.lock = threading.Lock()  # set before SyncObjConsumer.__init__: not dumped
        self.listener = listener
        super().__init__()
        self.state = GroupState(group_size=group_size)

    @replicated  # type: ignore[untyped-decorator]
    def apply_event(self, event: Event) -> bool:
        with self.lock:
            changed = self.state.apply(event)
        self.listener(event, changed, time.monotonic())
        return changed


class GroupRaft:
    """One member's Raft node; ``start()`` binds the peer port, ``stop()`` leaves the group."""

    def __init__(
        self,
        self_peer: DLedgerPeer,
        peers: tuple[DLedgerPeer, ...],
        store_root: str,
        *,
        heartbeat_ms: int,
        listener: AppliedListener,
    ) -> None:
        self.self_peer = self_peer
        self.peers = peers
        self.heartbeat_ms = heartbeat_ms
        self._by_address = {p.raft_address: p for p in peers}
        self._store = Path(store_root) / RAFT_DIR
        self.replicated = ReplicatedGroup(len(peers), listener)
        self._sync: Any = None

    def start(self) -> None:
        self._store.mkdir(parents=True, exist_ok=True)
        hb_s = self.heartbeat_ms / 1000
        conf = SyncObjConf(
            autoTick=True,
            appendEntriesPeriod=min(0.1, hb_s / 4),
            raftMinTimeout=hb_s * 0.6,
            raftMaxTimeout=hb_s * 1.2,
            leaderFallbackTimeout=hb_s * 3,
            connectionRetryTime=min(1.0, hb_s),
            connectionTimeout=max(1.0, hb_s * 2),
            useFork=False,
            commandsWaitLeader=False,
            dynamicMembershipChange=False,
            bindAddress=self.self_peer.raft_address,
            journalFile=str(self._store / "raft.journal"),
            fullDumpFile=str(self._store / "raft.dump"),
        )
        others = [p.raft_address for p in self.peers if p != self.self_peer]
        self._sync = SyncObj(self.self_peer.raft_address, others, conf=conf, consumers=[self.replicated])

    def stop(self) -> None:
        if self._sync is not None:
            self._sync.destroy()
            self._sync = None

    # -- views ------------------------------------------------------------------------------------
    def snapshot(self) -> GroupState:
        """A copy of the state as applied here."""
        with self.replicated.lock:
            return copy.deepcopy(self.replicated.state)

    @property
    def is_leader(self) -> bool:
        return self._sync is not None and bool(self._sync._isLeader())

    def leader(self) -> DLedgerPeer | None:
        node = self._sync._getLeader() if self._sync is not None else None
        return None if node is None else self._by_address.get(str(node.id))

    def term(self) -> int:
        return int(self._sync._getTerm()) if self._sync is not None else 0

    def connected(self, peer: DLedgerPeer) -> bool:
        """Whether this node holds a Raft connection to ``peer`` (a killed process's closes at once)."""
        if self._sync is None:
            return False
        if peer == self.self_peer:
            return True
        for node in self._sync.otherNodes:
            if str(node.id) == peer.raft_address:
                return bool(self._sync.isNodeConnected(node))
        return False

    # -- writes -----------------------------------------------------------------------------------
    async def submit(self, event: Event, timeout_s: float) -> bool:
        """Commit ``event``: True once applied here, False if refused or not committed in time."""
        if self._sync is None:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()

        def done(_result: object, error: int) -> None:
            loop.call_soon_threadsafe(_resolve, future, error == FAIL_REASON.SUCCESS)

        self.replicated.apply_event(event, callback=done)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
