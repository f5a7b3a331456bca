"""The SyncStateSet ack rule and membership decisions (controller mode)."""

from __future__ import annotations

import pytest

from rocketq.broker.controller_mode.acks import AckPolicy, AckVerdict, SyncStateSetTracker, ack_verdict
from rocketq.broker.controller_mode.handshake import decode_handshake, encode_handshake
from rocketq.broker.ha.protocol import HAProtocolError


def test_all_ack_needs_every_member() -> None:
    policy = AckPolicy(all_ack_in_sync_state_set=True)
    members = frozenset({1, 2, 3})
    assert ack_verdict(policy, 100, self_id=1, members=members, acks={2: 100}) is AckVerdict.WAITING
    assert ack_verdict(policy, 100, self_id=1, members=members, acks={2: 100, 3: 120}) is AckVerdict.ACKED
    # a slave outside the set does not count
    assert ack_verdict(policy, 100, self_id=1, members=frozenset({1, 2}), acks={3: 100}) is AckVerdict.WAITING


def test_alone_in_the_set() -> None:
    assert (
        ack_verdict(AckPolicy(all_ack_in_sync_state_set=True), 5, self_id=1, members=frozenset({1}), acks={})
        is AckVerdict.ACKED
    )
    strict = AckPolicy(all_ack_in_sync_state_set=True, in_sync_replicas=2, min_in_sync_replicas=2)
    assert ack_verdict(strict, 5, self_id=1, members=frozenset({1}), acks={}) is AckVerdict.NOT_ENOUGH


def test_count_mode() -> None:
    policy = AckPolicy(in_sync_replicas=2)
    members = frozenset({1, 2, 3})
    assert ack_verdict(policy, 10, self_id=1, members=members, acks={}) is AckVerdict.WAITING
    assert ack_verdict(policy, 10, self_id=1, members=members, acks={3: 10}) is AckVerdict.ACKED
    assert ack_verdict(AckPolicy(), 10, self_id=1, members=members, acks={}) is AckVerdict.ACKED


def test_tracker_expands_and_shrinks() -> None:
    t = SyncStateSetTracker(self_id=1, max_time_not_catchup_ms=1000)
    t.reset(frozenset({1, 2}), 3, now_ms=0)
    t.on_ack(2, 100, master_max=100, now_ms=10)
    t.on_ack(3, 50, master_max=100, now_ms=10)
    assert t.wanted(master_max=100, epoch_start=0, now_ms=20) == {1, 2}  # 3 is behind
    t.on_ack(3, 100, master_max=100, now_ms=30)
    assert t.wanted(master_max=100, epoch_start=0, now_ms=40) == {1, 2, 3}
    # 2 stops catching up: it leaves after haMaxTimeSlaveNotCatchup
    t.on_ack(3, 200, master_max=200, now_ms=1500)
    assert t.wanted(master_max=200, epoch_start=0, now_ms=1500) == {1, 3}
    assert not t.approved(frozenset({1}), 2)  # older set epoch ignored
    assert t.approved(frozenset({1, 3}), 4) and t.members == {1, 3}


def test_handshake_round_trip_and_errors() -> None:
    hs = decode_handshake(encode_handshake(2, 7))
    assert (hs.broker_id, hs.master_epoch) == (2, 7)
    with pytest.raises(HAProtocolError, match="bad magic"):
        decode_handshake(b"XXXX" + encode_handshake(2, 7)[4:])
    with pytest.raises(HAProtocolError, match="expected 16 bytes"):
        decode_handshake(b"RQHA")
