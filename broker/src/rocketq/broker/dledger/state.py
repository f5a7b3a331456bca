"""The replicated state of a DLedger group: who is master under which epoch, and its election.

Pure logic, no I/O: every member applies the same committed events in the same order (the Raft
log of :mod:`.raft`) and so reaches the same state; the member named master acts on it.

Theory of operation.  An election is a *round*: from the moment the group has no master, every
member stops replicating (a member that still followed the old master would keep acknowledging
its writes) and only then reports ``(last epoch it holds data of, CommitLog max offset)`` for the
round (:class:`Report`).  When reports of a majority are in, the best of them becomes master
(:func:`best_report`): the highest epoch of the last byte held, then the longest log, then the
preferred leader, then the lowest index.  This is Raft's "at least as up to date" rule applied to
the CommitLog: a write acknowledged by a majority is held by at least one reporter, and the best
reporter holds everything that one holds, so the new master holds every acknowledged message.
The new master's epoch is above every epoch reported and the group's previous one; the others
truncate to the consistent point with its epoch entries (``controller_mode/slave_switch.py``).

A round starts at the first boot (round 0, no master) and whenever the Raft leader, seeing no
:class:`Alive` of the master for the heartbeat timeout, commits a :class:`Fence` of its epoch.
The master hands over to the preferred leader (``preferredLeaderId``, as Java's DLedger does)
with :class:`Handover` once that member holds its whole log and it takes no more writes: the
preferred member becomes master under the next epoch without a round.  Events built on an old
view (a fence of an epoch already replaced, a report of another round) change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketq.broker.dledger.peers import majority

__all__ = ["Alive", "Event", "Fence", "GroupState", "Handover", "Join", "Report", "best_report"]


@dataclass(frozen=True, slots=True)
class Join:
    """A member's broker (remoting) address, which its slaves ask for the epoch cache."""

    node_id: str
    address: str


@dataclass(frozen=True, slots=True)
class Report:
    """A member's log, sent once it has stopped replicating for election ``round``."""

    node_id: str
    round: int
    last_epoch: int  # the epoch of the last byte this member holds (0: empty log)
    max_offset: int
    index: int  # the member's number (n<index>), the last tie-break
    preferred: bool = False  # this member is the group's preferredLeaderId


@dataclass(frozen=True, slots=True)
class Fence:
    """The Raft leader ends the mastership of ``epoch`` (its master stopped sending Alive)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Alive:
    """The master of ``epoch`` is alive (committed every heartbeat interval; also its lease)."""

    node_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Handover:
    """The master of ``epoch`` hands over to ``to``, which holds its whole log."""

    epoch: int
    from_node: str
    to: str


Event = Join | Report | Fence | Alive | Handover


def best_report(reports: Mapping[str, Report]) -> Report:
    """The member to elect among ``reports`` (see the module doc)."""
    return max(reports.values(), key=lambda r: (r.last_epoch, r.max_offset, r.preferred, -r.index))


@dataclass
class GroupState:
    """One group's state; :meth:`apply` is the only mutator."""

    group_size: int
    epoch: int = 0  # the epoch of the current (or last) master; 0 before the first election
    master: str | None = None
    round: int = 0
    reports: dict[str, Report] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)

    def apply(self, event: Event) -> bool:
        """Apply one committed event; True when it changed the master or opened a round."""
        if isinstance(event, Join):
            self.addresses[event.node_id] = event.address
            return False
        if isinstance(event, Fence):
            if self.master is None or event.epoch != self.epoch:
                return False
            self.master, self.round, self.reports = None, self.round + 1, {}
            return True
        if isinstance(event, Handover):
            if self.master != event.from_node or event.epoch != self.epoch:
                return False
            self.master, self.epoch = event.to, self.epoch + 1
            return True
        if isinstance(event, Report):
            if self.master is not None or event.round != self.round:
                return False
            self.reports[event.node_id] = event
            if len(self.reports) < majority(self.group_size):
                return False
            best = best_report(self.reports)
            self.epoch = max(self.epoch, *(r.last_epoch for r in self.reports.values())) + 1
            self.master, self.reports = best.node_id, {}
            return True
        return False  # Alive: only its commit time matters (the lease, the leader's liveness check)

    @property
    def electing(self) -> bool:
        return self.master is None
