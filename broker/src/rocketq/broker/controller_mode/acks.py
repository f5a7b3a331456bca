"""The SyncStateSet on a master: when a write may be acknowledged, who joins and who leaves the set.

Pure logic, no I/O: the replicas manager feeds it acks (from the HA service, keyed by the broker id
each slave named in its handshake) and asks it questions.

The ack rule (RocketMQ 5's ``CommitLog.handleHA`` with ``AutoSwitchHAService``).  The master
itself always holds what it stored.  Only acks of SyncStateSet members count, because only
members can be elected master after a failover (Java also counts slaves outside the set; rocketq
does not, so an acknowledged write always survives on an electable replica):

* fewer members than ``minInSyncReplicas`` → :attr:`AckVerdict.NOT_ENOUGH` (answered at once, the
  write is not acknowledged);
* ``allAckInSyncStateSet=true`` → every member holds the offset;
* otherwise → ``inSyncReplicas`` members (the master included) hold it.

A set that is just the master therefore acknowledges alone unless ``minInSyncReplicas`` > 1:
that keeps a group writable after losing its slaves, at the price of writes that exist on one
machine only until a slave rejoins (docs/failover.md, "What is promised").

Membership (Java's ``maybeExpandInSyncStateSet`` / ``maybeShrinkSyncStateSet``).  A slave is
*caught up* when an ack reaches the master's max offset as it was at that slave's previous ack.
A non-member joins once its ack reaches the confirm offset (the lowest offset every member holds)
and the start of the current epoch; a member leaves when it has not been caught up for
``haMaxTimeSlaveNotCatchup``.  The controller approves every change (ALTER_SYNC_STATE_SET).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["AckPolicy", "AckVerdict", "SyncStateSetTracker", "ack_verdict"]


class AckVerdict(enum.Enum):
    ACKED = "ACKED"
    WAITING = "WAITING"
    NOT_ENOUGH = "NOT_ENOUGH"


@dataclass(frozen=True, kw_only=True, slots=True)
class AckPolicy:
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1


def ack_verdict(
    policy: AckPolicy, offset: int, *, self_id: int, members: frozenset[int], acks: Mapping[int, int]
) -> AckVerdict:
    """May a write ending at ``offset`` be acknowledged?  ``acks``: broker id → acked offset."""
    group = members | {self_id}
    if len(group) < policy.min_in_sync_replicas:
        return AckVerdict.NOT_ENOUGH
    holders = {self_id} | {b for b in group if acks.get(b, -1) >= offset}
    if policy.all_ack_in_sync_state_set:
        return AckVerdict.ACKED if holders >= group else AckVerdict.WAITING
    return AckVerdict.ACKED if len(holders) >= policy.in_sync_replicas else AckVerdict.WAITING


@dataclass
class SyncStateSetTracker:
    """The master's view of its slaves and of the controller-approved SyncStateSet."""

    self_id: int
    max_time_not_catchup_ms: int
    members: frozenset[int] = frozenset()
    epoch: int = 0
    acks: dict[int, int] = field(default_factory=dict)
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    _master_max_at_ack: dict[int, int] = field(default_factory=dict)

    def reset(self, members: frozenset[int], epoch: int, now_ms: int) -> None:
        """A new mastership: every member gets a full ``haMaxTimeSlaveNotCatchup`` to show up."""
        self.members, self.epoch = members | {self.self_id}, epoch
        self.acks.clear()
        self._master_max_at_ack.clear()
        self.caught_up_ms = {b: now_ms for b in self.members}

    def approved(self, members: frozenset[int], epoch: int) -> bool:
        """The controller's set; ignored (False) when older than the one held."""
        if epoch < self.epoch:
            return False
        self.members, self.epoch = members | {self.self_id}, epoch
        return True

    def on_ack(self, broker_id: int, acked: int, master_max: int, now_ms: int) -> None:
        previous_max = self._master_max_at_ack.get(broker_id, master_max)
        self.acks[broker_id] = max(acked, self.acks.get(broker_id, -1))
        if acked >= previous_max:
            self.caught_up_ms[broker_id] = now_ms
        self._master_max_at_ack[broker_id] = master_max

    def confirm_offset(self, master_max: int) -> int:
        """The lowest offset every member holds (the master's max when it is alone)."""
        return min([master_max] + [self.acks.get(b, 0) for b in self.members if b != self.self_id])

    def wanted(self, master_max: int, epoch_start: int, now_ms: int) -> frozenset[int]:
        """The set this master should ask the controller for now (itself always included)."""
        confirm = self.confirm_offset(master_max)
        keep = {
            b
            for b in self.members
            if b == self.self_id or now_ms - self.caught_up_ms.get(b, 0) <= self.max_time_not_catchup_ms
        }
        join = {
            b
            for b, acked in self.acks.items()
            if b not in self.members and acked >= confirm and acked >= epoch_start
        }
        return frozenset(keep | join)
