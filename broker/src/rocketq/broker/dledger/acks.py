"""The majority rule of a DLedger group: when a write may be acknowledged, what is confirmed.

Pure logic.  Every member of the group counts (there is no SyncStateSet to shrink): a write
ending at ``offset`` is acknowledged once a majority of the group, the master included, holds it
(controller mode's ``ack_verdict`` with ``inSyncReplicas = minInSyncReplicas = majority`` over the
whole group), and the confirm offset, up to which reads are served, is the highest offset a
majority holds (Raft's commit index).  A master that cannot reach a majority therefore
acknowledges nothing and serves no read of its unconfirmed tail.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.broker.controller_mode.acks import AckPolicy, SyncStateSetTracker
from rocketq.broker.dledger.peers import majority

__all__ = ["MajorityTracker", "majority_policy", "quorum_offset"]


def majority_policy(group_size: int) -> AckPolicy:
    """Controller mode's ack policy set to "a majority of the whole group"."""
    quorum = majority(group_size)
    return AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=quorum, min_in_sync_replicas=quorum)


def quorum_offset(master_max: int, acks: list[int], group_size: int) -> int:
    """The highest offset held by a majority: the master holds ``master_max``, the slaves ``acks``."""
    held = sorted([master_max, *(min(a, master_max) for a in acks)], reverse=True)
    held += [0] * (group_size - len(held))
    return held[majority(group_size) - 1]


@dataclass
class MajorityTracker(SyncStateSetTracker):
    """The master's view of its slaves: the members never change, the confirm offset is a quorum's."""

    group_size: int = 1

    def approved(self, members: frozenset[int], epoch: int) -> bool:
        return False  # the group is fixed by dLegerPeers

    def confirm_offset(self, master_max: int) -> int:
        others = [self.acks.get(b, 0) for b in self.members if b != self.self_id]
        return quorum_offset(master_max, others, self.group_size)

    def wanted(self, master_max: int, epoch_start: int, now_ms: int) -> frozenset[int]:
        return self.members
