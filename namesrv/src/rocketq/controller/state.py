"""The controller's replicated state: broker groups, their masters, epochs and SyncStateSets.

This is RocketMQ 5's ``ReplicasInfoManager`` without the I/O.  :class:`ReplicaTable` holds one
:class:`GroupState` per broker name (Java's ``BrokerReplicaInfo`` plus ``SyncStateInfo``) and
changes only through :meth:`ReplicaTable.apply` of an *event*, which every controller applies in
the same Raft log order (see ``raft.py``).  Expected outcomes are :class:`Outcome` values carrying
a ``ResponseCode``; nothing here raises for a refused request.

Theory of operation.  A write is validated twice.  The leader first *plans* it (``plan_*``) with
what only the leader knows, broker liveness from heartbeats, and turns it into an event that
names the epochs it was planned against.  The event is then applied on every node, where
:meth:`ReplicaTable.apply` re-checks everything that depends on the state alone (epochs, ids,
membership); a plan made against a state that moved on in between is refused there with the
fencing code, so two racing writes can never both act on the same epoch.  Electing a master bumps
``masterEpoch`` and ``syncStateSetEpoch`` and makes the SyncStateSet ``{new master}``; an election
that finds no candidate clears the master and still bumps ``masterEpoch``, which fences the old
master out.  Events and the table are plain picklable data: pysyncobj journals the one and dumps
the other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.controller import FIRST_BROKER_CONTROLLER_ID, ReplicaIdentity, ReplicasInfo

__all__ = [
    "AlterSyncStateSetEvent",
    "ApplyBrokerIdEvent",
    "CandidateInfo",
    "CleanBrokerDataEvent",
    "ElectMasterEvent",
    "Event",
    "GroupState",
    "Outcome",
    "ReplicaTable",
    "UpdateBrokerAddressEvent",
    "choose_master",
]

OK = ResponseCode.SUCCESS


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to a planned or applied write: a response code, a remark, and a value."""

    code: ResponseCode = OK
    remark: str = ""
    new_epoch: int | None = None  # the new syncStateSetEpoch of an alter, the new masterEpoch of an elect

    @property
    def ok(self) -> bool:
        return self.code == OK


@dataclass
class GroupState:
    """One broker group (broker name): its replicas and its master/SyncStateSet record."""

    cluster_name: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    check_codes: dict[int, str] = field(default_factory=dict)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    @property
    def next_broker_id(self) -> int:
        return max(self.broker_addrs, default=FIRST_BROKER_CONTROLLER_ID - 1) + 1

    @property
    def master_address(self) -> str | None:
        return None if self.master_broker_id is None else self.broker_addrs.get(self.master_broker_id)

    @property
    def first_election(self) -> bool:
        return self.master_epoch == 0

    def replicas_info(self, alive: Callable[[int], bool]) -> ReplicasInfo:
        in_sync: list[ReplicaIdentity] = []
        not_in_sync: list[ReplicaIdentity] = []
        for broker_id, addr in sorted(self.broker_addrs.items()):
            replica = ReplicaIdentity(self.broker_name, broker_id, addr, alive(broker_id))
            (in_sync if broker_id in self.sync_state_set else not_in_sync).append(replica)
        return ReplicasInfo(
            master_broker_id=self.master_broker_id,
            master_address=self.master_address,
            master_epoch=self.master_epoch,
            sync_state_set_epoch=self.sync_state_set_epoch,
            in_sync_replicas=tuple(in_sync),
            not_in_sync_replicas=tuple(not_in_sync),
        )


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdEvent:
    """A broker claims ``broker_id`` (first registration, or a restart with the same check code)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    register_check_code: str


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddressEvent:
    """A registered broker came back at another address."""

    broker_name: str
    broker_id: int
    broker_address: str


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetEvent:
    """The master changes its SyncStateSet; planned against both epochs."""

    broker_name: str
    master_broker_id: int
    master_epoch: int
    sync_state_set_epoch: int
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True)
class ElectMasterEvent:
    """A new master (or none: the old one is gone and nobody can take over)."""

    broker_name: str
    new_master_broker_id: int | None
    expected_master_epoch: int
    expected_sync_state_set_epoch: int


@dataclass(frozen=True, slots=True)
class CleanBrokerDataEvent:
    """Forget some replicas of a group, or the whole group when ``broker_ids`` is empty."""

    broker_name: str
    broker_ids: frozenset[int]


Event = (
    ApplyBrokerIdEvent
    | UpdateBrokerAddressEvent
    | AlterSyncStateSetEvent
    | ElectMasterEvent
    | CleanBrokerDataEvent
)


# --------------------------------------------------------------------------- election policy


@dataclass(frozen=True, slots=True)
class CandidateInfo:
    """What the last heartbeat of a replica said (Java's ``BrokerLiveInfo`` fields used to rank)."""

    broker_id: int
    epoch: int = 0
    max_offset: int = 0
    election_priority: int = 0


def _rank(info: CandidateInfo) -> tuple[int, int, int, int]:
    # highest epoch, then the longest log, then the lowest priority value, then the lowest id
    return (-info.epoch, -info.max_offset, info.election_priority, info.broker_id)


def choose_master(
    candidates: Iterable[int],
    *,
    alive: Callable[[int], bool],
    live_info: Callable[[int], CandidateInfo | None],
    old_master: int | None,
    preferred: int | None,
) -> int | None:
    """Java's ``DefaultElectPolicy.tryElect`` over one candidate set (the SyncStateSet, or all).

    Only alive candidates count.  The old master stays if alive (unless another is preferred); a
    preferred id wins if alive, otherwise nobody does; else the best ranked alive candidate.
    """
    valid = sorted(b for b in candidates if alive(b))
    if not valid:
        return None
    if old_master in valid and (preferred is None or preferred == old_master):
        return old_master
    if preferred is not None:
        return preferred if preferred in valid else None
    infos = [live_info(b) or CandidateInfo(b) for b in valid]
    return min(infos, key=_rank).broker_id


# --------------------------------------------------------------------------- the table


class ReplicaTable:
    """Every broker group the controller knows; changed only by :meth:`apply`."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupState] = {}

    def group(self, broker_name: str) -> GroupState | None:
        return self.groups.get(broker_name)

    # -- reads -------------------------------------------------------------------------------

    def next_broker_id(self, broker_name: str) -> int:
        group = self.groups.get(broker_name)
        return FIRST_BROKER_CONTROLLER_ID if group is None else group.next_broker_id

    def sync_state_data(
        self, broker_names: Iterable[str], alive: Callable[[str, int], bool]
    ) -> dict[str, ReplicasInfo]:
        result: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            group = self.groups.get(name)
            if group is not None:
                result[name] = group.replicas_info(functools.partial(alive, name))
        return result

    # -- planning (leader side) --------------------------------------------------------------

    def plan_apply_broker_id(self, event: ApplyBrokerIdEvent) -> Outcome:
        return self._check_apply_broker_id(event)

    def plan_alter_sync_state_set(
        self, event: AlterSyncStateSetEvent, alive: Callable[[int], bool]
    ) -> Outcome:
        outcome = self._check_alter(event)
        if not outcome.ok:
            return outcome
        for replica in sorted(event.new_sync_state_set):
            if not alive(replica):
                return Outcome(
                    ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                    f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive",
                )
        return outcome

    def plan_election(
        self,
        broker_name: str,
        *,
        broker_id: int | None,
        designate: bool,
        alive: Callable[[int], bool],
        live_info: Callable[[int], CandidateInfo | None],
        unclean: bool,
    ) -> tuple[Outcome, ElectMasterEvent | None]:
        """Java's ``electMaster``: who should be master now, as an event, or why nobody changes.

        ``broker_id`` None or -1 is the controller's own trigger (the master went inactive).
        """
        group = self.groups.get(broker_name)
        if group is None:
            return Outcome(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
            ), None
        requested = None if broker_id is None or broker_id < 0 else broker_id
        new_master: int | None = requested if group.first_election else None
        if new_master is not None and new_master not in group.broker_addrs:
            new_master = None
        if new_master is None:
            preferred = requested if designate else None
            old = group.master_broker_id
            new_master = choose_master(
                group.sync_state_set, alive=alive, live_info=live_info, old_master=old, preferred=preferred
            )
            if new_master is None and unclean:
                new_master = choose_master(
                    group.broker_addrs, alive=alive, live_info=live_info, old_master=old, preferred=preferred
                )
        if new_master is not None and new_master == group.master_broker_id:
            remark = (
                f"The old master {new_master} is still alive, "
                f"not need to elect new master for broker {broker_name}"
            )
            return Outcome(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, remark), None
        event = ElectMasterEvent(broker_name, new_master, group.master_epoch, group.sync_state_set_epoch)
        if new_master is not None:
            return Outcome(new_epoch=group.master_epoch + 1), event
        if requested is None:
            remark = "Old master has down and failed to elect a new broker master"
            if group.master_broker_id is None:
                return Outcome(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, remark), None
            return Outcome(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, remark), event
        return Outcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master"), None

    def plan_clean(
        self,
        broker_name: str,
        broker_ids: frozenset[int],
        *,
        clean_living: bool,
        alive: Callable[[int], bool],
    ) -> tuple[Outcome, CleanBrokerDataEvent | None]:
        group = self.groups.get(broker_name)
        if group is None:
            remark = f"Broker {broker_name} is not existed, clean broker data failure"
            return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, remark), None
        if not clean_living:
            if not broker_ids and group.master_broker_id is not None:
                remark = f"Broker {broker_name} is still alive, clean up failure"
                return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, remark), None
            targets = broker_ids or frozenset(group.broker_addrs)
            living = sorted(b for b in targets if alive(b))
            if living:
                remark = f"Broker {broker_name} ids {living} are still alive, clean up failure"
                return Outcome(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, remark), None
        return Outcome(), CleanBrokerDataEvent(broker_name, broker_ids)

    # -- applying (every node, in log order) -------------------------------------------------

    def apply(self, event: Event) -> Outcome:
        """Apply one committed event; a refused event changes nothing and says why."""
        if isinstance(event, ApplyBrokerIdEvent):
            return self._apply_broker_id(event)
        if isinstance(event, UpdateBrokerAddressEvent):
            return self._apply_update_address(event)
        if isinstance(event, AlterSyncStateSetEvent):
            return self._apply_alter(event)
        if isinstance(event, ElectMasterEvent):
            return self._apply_elect(event)
        return self._apply_clean(event)

    def _check_apply_broker_id(self, event: ApplyBrokerIdEvent) -> Outcome:
        group = self.groups.get(event.broker_name)
        if group is None:
            if event.broker_id == FIRST_BROKER_CONTROLLER_ID:
                return Outcome()
            return Outcome(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {event.broker_name} hasn't been registered in controller, but broker try to"
                f" apply brokerId: {event.broker_id}",
            )
        if event.broker_id < FIRST_BROKER_CONTROLLER_ID:
            return Outcome(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID, f"brokerId must be >= {FIRST_BROKER_CONTROLLER_ID}"
            )
        known = group.check_codes.get(event.broker_id)
        if event.broker_id not in group.broker_addrs or known == event.register_check_code:
            return Outcome()
        return Outcome(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {event.broker_id} in broker-set: {event.broker_name}",
        )

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> Outcome:
        outcome = self._check_apply_broker_id(event)
        if outcome.ok:
            group = self.groups.setdefault(
                event.broker_name, GroupState(event.cluster_name, event.broker_name)
            )
            group.broker_addrs[event.broker_id] = event.broker_address
            group.check_codes[event.broker_id] = event.register_check_code
        return outcome

    def _apply_update_address(self, event: UpdateBrokerAddressEvent) -> Outcome:
        group = self.groups.get(event.broker_name)
        if group is None or event.broker_id not in group.broker_addrs:
            return Outcome(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "the broker is not registered"
            )
        group.broker_addrs[event.broker_id] = event.broker_address
        return Outcome()

    def _check_alter(self, event: AlterSyncStateSetEvent) -> Outcome:
        group = self.groups.get(event.broker_name)
        if group is None:
            return Outcome(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"
            )
        if event.new_sync_state_set == group.sync_state_set:
            return Outcome(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
            )
        if group.master_broker_id is None or group.master_broker_id != event.master_broker_id:
            return Outcome(
                ResponseCode.CONTROLLER_INVALID_MASTER,
                "Rejecting alter syncStateSet request because the current leader is:"
                f"{{{group.master_broker_id}}}, not {{{event.master_broker_id}}}",
            )
        if event.master_epoch != group.master_epoch:
            return Outcome(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                "Rejecting alter syncStateSet request because the current master epoch is:"
                f"{{{group.master_epoch}}}, not {{{event.master_epoch}}}",
            )
        if event.sync_state_set_epoch != group.sync_state_set_epoch:
            return Outcome(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                "Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                f"{{{group.sync_state_set_epoch}}}, not {{{event.sync_state_set_epoch}}}",
            )
        unknown = sorted(event.new_sync_state_set - set(group.broker_addrs))
        if unknown:
            return Outcome(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"Rejecting alter syncStateSet request because the replicas {unknown} don't exist",
            )
        if group.master_broker_id not in event.new_sync_state_set:
            return Outcome(
                ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "Rejecting alter syncStateSet request because the newSyncStateSet "
                f"don't contains origin leader {{{group.master_broker_id}}}",
            )
        return Outcome(new_epoch=group.sync_state_set_epoch + 1)

    def _apply_alter(self, event: AlterSyncStateSetEvent) -> Outcome:
        outcome = self._check_alter(event)
        if outcome.ok:
            group = self.groups[event.broker_name]
            group.sync_state_set = event.new_sync_state_set
            group.sync_state_set_epoch += 1
        return outcome

    def _apply_elect(self, event: ElectMasterEvent) -> Outcome:
        group = self.groups.get(event.broker_name)
        if group is None:
            return Outcome(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
            )
        if event.expected_master_epoch != group.master_epoch:
            return Outcome(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                f"election planned at master epoch {event.expected_master_epoch}, now {group.master_epoch}",
            )
        if event.expected_sync_state_set_epoch != group.sync_state_set_epoch:
            return Outcome(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"election planned at syncStateSet epoch {event.expected_sync_state_set_epoch},"
                f" now {group.sync_state_set_epoch}",
            )
        new_master = event.new_master_broker_id
        if new_master is not None and new_master not in group.broker_addrs:
            return Outcome(
                ResponseCode.CONTROLLER_INVALID_REPLICAS, f"broker id {new_master} is not a replica"
            )
        group.master_broker_id = new_master
        group.master_epoch += 1
        if new_master is not None:
            group.sync_state_set = frozenset({new_master})
            group.sync_state_set_epoch += 1
        return Outcome(new_epoch=group.master_epoch)

    def _apply_clean(self, event: CleanBrokerDataEvent) -> Outcome:
        group = self.groups.get(event.broker_name)
        if group is None:
            return Outcome(
                ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "the group is not registered"
            )
        if not event.broker_ids:
            del self.groups[event.broker_name]
            return Outcome()
        for broker_id in event.broker_ids:
            group.broker_addrs.pop(broker_id, None)
            group.check_codes.pop(broker_id, None)
        if group.master_broker_id in event.broker_ids:
            group.master_broker_id = None
        group.sync_state_set = group.sync_state_set - event.broker_ids
        if not group.broker_addrs:
            del self.groups[event.broker_name]
        return Outcome()
