"""The majority rule of a DLedger group: acknowledgements, the confirm offset, and elections."""

from __future__ import annotations

import pytest

from rocketq.broker.controller_mode.acks import AckVerdict, ack_verdict
from rocketq.broker.dledger.acks import MajorityTracker, majority_policy, quorum_offset
from rocketq.broker.dledger.peers import majority
from rocketq.broker.dledger.state import Alive, Fence, GroupState, Handover, Join, Report

GROUP = frozenset({1, 2, 3})


def report(node: int, round_: int, last_epoch: int, max_offset: int, preferred: bool = False) -> Report:
    return Report(f"n{node}", round_, last_epoch, max_offset, node, preferred)


@pytest.mark.parametrize(("size", "quorum"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)])
def test_majority(size: int, quorum: int) -> None:
    assert majority(size) == quorum


@pytest.mark.parametrize(
    ("acks", "verdict"),
    [
        ({}, AckVerdict.WAITING),  # the master alone: 1 of 3
        ({2: 99}, AckVerdict.WAITING),  # a slave behind the write
        ({2: 100}, AckVerdict.ACKED),  # 2 of 3
        ({3: 150}, AckVerdict.ACKED),
        ({2: 100, 3: 100}, AckVerdict.ACKED),
    ],
)
def test_a_write_is_acknowledged_once_a_majority_holds_it(acks: dict[int, int], verdict: AckVerdict) -> None:
    policy = majority_policy(3)
    assert ack_verdict(policy, 100, self_id=1, members=GROUP, acks=acks) is verdict


def test_five_members_need_three() -> None:
    policy = majority_policy(5)
    members = frozenset(range(1, 6))
    assert ack_verdict(policy, 10, self_id=1, members=members, acks={2: 10}) is AckVerdict.WAITING
    assert ack_verdict(policy, 10, self_id=1, members=members, acks={2: 10, 5: 12}) is AckVerdict.ACKED


def test_the_confirm_offset_is_what_a_majority_holds() -> None:
    assert quorum_offset(500, [300, 100], 3) == 300
    assert quorum_offset(500, [], 3) == 0  # no slave heard of: nothing confirmed
    assert quorum_offset(500, [900], 3) == 500  # an ack never counts past the master's own log
    assert quorum_offset(500, [100, 200, 400, 0], 5) == 200
    tracker = MajorityTracker(self_id=1, max_time_not_catchup_ms=1, members=GROUP, group_size=3)
    tracker.on_ack(3, 250, 500, 0)
    assert tracker.confirm_offset(500) == 250
    assert not tracker.approved(frozenset({1}), 9) and tracker.members == GROUP  # the group is fixed


def test_the_first_election_waits_for_a_majority_of_reports() -> None:
    state = GroupState(group_size=3)
    state.apply(Join("n0", "127.0.0.1:1"))
    assert not state.apply(report(0, 0, 0, 0))
    assert state.electing
    assert state.apply(report(2, 0, 0, 0))
    assert (state.master, state.epoch) == ("n0", 1)  # equal logs: the lowest id
    assert not state.apply(report(1, 0, 0, 0))  # late: changes nothing


def test_the_most_recent_log_wins_then_the_longest_then_the_preferred() -> None:
    state = GroupState(group_size=3, epoch=4, master="n0")
    assert state.apply(Fence(4))
    state.apply(report(1, 1, 3, 900))  # longer, but its last byte is of an older epoch
    state.apply(report(2, 1, 4, 500))
    assert (state.master, state.epoch) == ("n2", 5)
    state.apply(Fence(5))
    state.apply(report(1, 2, 5, 700, preferred=True))
    state.apply(report(2, 2, 5, 700))
    assert state.master == "n1"
    state.apply(Fence(6))
    state.apply(report(1, 3, 6, 700, preferred=True))
    state.apply(report(2, 3, 6, 800))
    assert state.master == "n2"


def test_the_new_epoch_is_above_every_reported_epoch() -> None:
    state = GroupState(group_size=3)  # a group whose journal was lost: members remember epoch 7
    state.apply(report(0, 0, 7, 10))
    state.apply(report(1, 0, 2, 10))
    assert (state.master, state.epoch) == ("n0", 8)


def test_stale_events_change_nothing() -> None:
    state = GroupState(group_size=3, epoch=3, master="n1", round=2)
    assert not state.apply(Fence(2))  # a fence of an epoch already replaced
    assert not state.apply(report(0, 2, 3, 10))  # a report while a master is named
    assert not state.apply(Alive("n1", 3))
    assert state.apply(Fence(3))
    assert not state.apply(report(0, 2, 3, 10))  # a report of the previous round
    assert state.electing and state.round == 3 and state.reports == {}


def test_a_handover_names_the_preferred_member_under_the_next_epoch() -> None:
    state = GroupState(group_size=3, epoch=4, master="n0", round=2)
    assert not state.apply(Handover(3, "n0", "n2"))  # an old epoch
    assert not state.apply(Handover(4, "n1", "n2"))  # not from the master
    assert state.apply(Handover(4, "n0", "n2"))
    assert (state.master, state.epoch, state.round) == ("n2", 5, 2)
    assert not state.apply(Handover(4, "n0", "n2"))  # repeated: changes nothing
