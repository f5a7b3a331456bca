"""The Raft replication of the controller's :class:`~rocketq.controller.state.ReplicaTable` (pysyncobj).

:class:`ControllerRaft` runs one pysyncobj node on its own Raft port (``raftPort`` of the self
peer, see ``config.py``) with a consumer, :class:`ReplicatedTable`, whose single replicated method
applies a state event.  pysyncobj's tick thread applies committed entries; the asyncio side reads
the table under a lock and submits events with :meth:`ControllerRaft.submit`, which resolves to
the :class:`~rocketq.controller.state.Outcome` of applying it, or to an outcome with
``CONTROLLER_NOT_LEADER`` when this node is not the leader, lost its leadership, or the entry was
not committed within ``commit_timeout_ms`` (no quorum).  A leader that has not heard from a
majority for ``raft_leader_fallback_timeout_ms`` steps down, so with 1 of 3 controllers up no node
is leader and every write is refused.  With ``controllerStorePath`` set the Raft log is journaled
to ``raft.journal`` and the table dumped to ``raft.dump`` there; a restarted node reloads both and
catches up from the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from rocketq.client.remoting.codes import ResponseCode
from rocketq.controller.config import ControllerConfig, ControllerPeer
from rocketq.controller.state import Event, Outcome, ReplicaTable

__all__ = ["ControllerRaft", "RaftStatus", "ReplicatedTable"]

log = logging.getLogger("rocketq.controller")

_STATE_NAMES = {0: "follower", 1: "candidate", 2: "leader"}


class ReplicatedTable(SyncObjConsumer):  # type: ignore[misc]
    """The pysyncobj consumer: the table, a lock for readers, and the replicated apply."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # set before SyncObjConsumer.__init__: not dumped
        super().__init__()
        self.table = ReplicaTable()

    @replicated  # type: ignore[untyped-decorator]
    def apply_event(self, event: Event) -> Outcome:
        with self.lock:
            return self.table.apply(event)

    @replicated  # type: ignore[untyped-decorator]
    def barrier(self) -> None:
        """A no-op entry: once applied here, this node has applied everything committed before it."""
        return None


@dataclass(frozen=True, slots=True)
class RaftStatus:
    """A snapshot of this node's Raft view."""

    state: str
    leader: ControllerPeer | None
    term: int
    commit_index: int
    last_applied: int
    has_quorum: bool


class ControllerRaft:
    """One controller's Raft node; ``start()`` binds the Raft port, ``stop()`` leaves the group."""

    def __init__(self, config: ControllerConfig) -> None:
        config.require_peers()
        self.config = config
        self.self_peer = config.self_peer
        self._by_raft_address = {p.raft_address: p for p in config.controller_dleger_peers}
        self.replicated = ReplicatedTable()
        self._sync: Any = None

    def start(self) -> None:
        conf = SyncObjConf(
            autoTick=True,
            raftMinTimeout=self.config.raft_min_timeout_ms / 1000,
            raftMaxTimeout=self.config.raft_max_timeout_ms / 1000,
            leaderFallbackTimeout=self.config.raft_leader_fallback_timeout_ms / 1000,
            connectionRetryTime=1.0,
            connectionTimeout=2.0,
            useFork=False,
            commandsWaitLeader=False,
            dynamicMembershipChange=False,
            bindAddress=self.self_peer.raft_address,
            **self._store_files(),
        )
        others = [p.raft_address for p in self.config.other_peers]
        self._sync = SyncObj(self.self_peer.raft_address, others, conf=conf, consumers=[self.replicated])

    def _store_files(self) -> dict[str, str]:
        if not self.config.controller_store_path:
            return {}
        store = Path(self.config.controller_store_path)
        store.mkdir(parents=True, exist_ok=True)
        return {"journalFile": str(store / "raft.journal"), "fullDumpFile": str(store / "raft.dump")}

    def stop(self) -> None:
        if self._sync is not None:
            self._sync.destroy()
            self._sync = None

    # -- views -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[ReplicaTable]:
        """The table, held still while the block runs (the tick thread applies under this lock)."""
        with self.replicated.lock:
            yield self.replicated.table

    @property
    def is_leader(self) -> bool:
        return self._sync is not None and bool(self._sync._isLeader())

    def leader(self) -> ControllerPeer | None:
        if self._sync is None:
            return None
        node = self._sync._getLeader()
        return None if node is None else self._by_raft_address.get(str(node.id))

    def status(self) -> RaftStatus:
        sync = self._sync
        if sync is None:
            return RaftStatus("stopped", None, 0, 0, 0, False)
        state = (
            "leader" if sync._isLeader() else ("follower" if sync._getLeader() is not None else "candidate")
        )
        return RaftStatus(
            state=state,
            leader=self.leader(),
            term=int(sync._getTerm()),
            commit_index=int(sync.raftCommitIndex),
            last_applied=int(sync.raftLastApplied),
            has_quorum=bool(sync.hasQuorum),
        )

    def not_leader_outcome(self) -> Outcome:
        leader = self.leader()
        where = (
            f"the leader is {leader.node_id} at {leader.address}"
            if leader
            else "no controller leader (no quorum)"
        )
        return Outcome(ResponseCode.CONTROLLER_NOT_LEADER, f"The controller is not in leader state; {where}")

    # -- writes ------------------------------------------------------------------------------

    async def submit(self, event: Event) -> Outcome:
        """Replicate ``event`` from the leader and wait for its outcome (see the module doc)."""
        if not self.is_leader:
            return self.not_leader_outcome()
        result = await self._call(self.replicated.apply_event, event)
        return result if isinstance(result, Outcome) else self._failed(result)

    async def barrier(self) -> Outcome:
        """Commit a no-op so that the leader's table holds every earlier committed event."""
        if not self.is_leader:
            return self.not_leader_outcome()
        result = await self._call(self.replicated.barrier)
        return Outcome() if result is None else self._failed(result)

    async def _call(self, method: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(result: Any, error: int) -> None:
            value = result if error == FAIL_REASON.SUCCESS else _Failure(error)
            loop.call_soon_threadsafe(_resolve, future, value)

        method(*args, callback=done)
        try:
            return await asyncio.wait_for(future, self.config.commit_timeout_ms / 1000)
        except TimeoutError:
            return _Failure(-1)

    def _failed(self, failure: object) -> Outcome:
        error = failure.error if isinstance(failure, _Failure) else -2
        if error == -1:
            remark = (
                f"the write was not committed within {self.config.commit_timeout_ms} ms:"
                " no quorum of controllers reachable"
            )
        else:
            remark = f"the Raft write failed (pysyncobj reason {error}); retry on the current leader"
        leader = self.leader()
        if leader is not None and leader != self.self_peer:
            remark += f"; the leader is {leader.node_id} at {leader.address}"
        log.warning("controller write refused: %s", remark)
        return Outcome(ResponseCode.CONTROLLER_NOT_LEADER, remark)


@dataclass(frozen=True, slots=True)
class _Failure:
    error: int


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)
