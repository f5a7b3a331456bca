"""Orderly POP state (ConsumerOrderInfoManager): Java's rules, the file, and the message-group scope.

The unit tests follow ``ConsumerOrderInfoManager.java`` rule by rule; the golden test reads a
``consumerOrderInfo.json`` written by hand in fastjson's shape; the state machines drive the
manager the way the POP processor does (select, update, ack, change invisible time, restart) and
check it against a small model of the queue.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rocketq.broker.config import BrokerConfig, PopOrderBlockScope
from rocketq.broker.config_keys import BROKER_KEYS
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.pop.order_info import (
    CLEAN_SPAN_FROM_LAST_MS,
    COMMIT_ILLEGAL,
    COMMIT_NOT_NEEDED,
    Candidate,
    ConsumerOrderInfoManager,
    OrderCountInfo,
    OrderInfo,
)

T, G = "TopicTest", "GID"
QUEUE = PopOrderBlockScope.QUEUE
GROUP = PopOrderBlockScope.GROUP


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _manager(
    scope: PopOrderBlockScope = QUEUE, path: str | None = None, clock: Clock | None = None
) -> tuple[ConsumerOrderInfoManager, Clock]:
    clock = clock or Clock()
    return ConsumerOrderInfoManager(scope=scope, path=path, clock_ms=clock), clock


def _cands(*groups: str | None, start: int = 0) -> list[Candidate]:
    return [Candidate(start + i, g) for i, g in enumerate(groups)]


def _pop(
    m: ConsumerOrderInfoManager,
    clock: Clock,
    offsets: list[int],
    *,
    attempt: str = "a1",
    inv: int = 10_000,
    qid: int = 0,
    groups: dict[int, str] | None = None,
) -> OrderCountInfo:
    popped = [Candidate(o, (groups or {}).get(o)) for o in offsets]
    return m.update(attempt_id=attempt, topic=T, group=G, queue_id=qid, pop_time=clock.now,
                    invisible_time=inv, popped=popped)  # fmt: skip


def _select(
    m: ConsumerOrderInfoManager,
    consumer_offset: int,
    candidates: list[Candidate],
    *,
    attempt: str = "x",
    max_nums: int = 32,
    inv: int = 10_000,
) -> list[int]:
    sel = m.select(attempt_id=attempt, topic=T, group=G, queue_id=0, invisible_time=inv,
                   consumer_offset=consumer_offset, candidates=candidates, max_nums=max_nums)  # fmt: skip
    return list(sel.offsets)


# ------------------------------------------------------------------ Java's OrderInfo, queue scope
def test_offset_list_is_first_then_differences() -> None:
    assert OrderInfo.build("a", 1, 2, [100, 101, 105], 0).offset_list == [100, 1, 5]
    assert OrderInfo.build("a", 1, 2, [7], 0).offset_list == [7]
    assert OrderInfo.build("a", 1, 2, [100, 101, 105], 0).queue_offsets() == [100, 101, 105]


def test_queue_blocked_while_an_unacked_offset_is_invisible() -> None:
    m, clock = _manager()
    _pop(m, clock, [0, 1, 2], inv=10_000)
    assert m.check_block("other", T, G, 0, 10_000)
    assert _select(m, 0, _cands("A", "B", "C", "D")) == []
    clock.now += 9_999
    assert m.check_block("other", T, G, 0, 10_000)
    clock.now += 1
    assert not m.check_block("other", T, G, 0, 10_000)
    assert not m.check_block("other", T, G, 1, 10_000)  # another queue has no state


def test_same_attempt_is_not_blocked_and_gets_the_same_batch() -> None:
    m, clock = _manager()
    _pop(m, clock, [0, 1], attempt="att")
    assert m.check_block("other", T, G, 0, 10_000)
    assert not m.check_block("att", T, G, 0, 10_000)
    assert _select(m, 0, _cands("A", "B", "C"), attempt="att", max_nums=2) == [0, 1]


def test_all_acked_unblocks_and_commit_advances_to_first_unacked() -> None:
    m, clock = _manager()
    _pop(m, clock, [10, 11, 13])
    pt = clock.now
    assert m.commit_and_next(T, G, 0, 11, pt) == 10  # offset stays at the first un-acked
    assert m.check_block("o", T, G, 0, 10_000)
    assert m.commit_and_next(T, G, 0, 10, pt) == 13
    assert m.check_block("o", T, G, 0, 10_000)
    assert m.commit_and_next(T, G, 0, 13, pt) == 14  # all acked: last + 1
    assert not m.check_block("o", T, G, 0, 10_000)


def test_commit_answers_minus_two_for_stale_poptime_and_minus_one_for_foreign_offset() -> None:
    m, clock = _manager()
    assert m.commit_and_next(T, G, 0, 5, 1) == 6  # no state at all: Java answers offset + 1
    _pop(m, clock, [0, 1])
    assert m.commit_and_next(T, G, 0, 0, clock.now - 1) == COMMIT_NOT_NEEDED
    assert m.commit_and_next(T, G, 0, 7, clock.now) == COMMIT_ILLEGAL
    assert m.commit_and_next(T, G, 1, 3, clock.now) == 4  # queue without OrderInfo


def test_consumed_count_carries_over_for_offsets_popped_again() -> None:
    m, clock = _manager()
    first = _pop(m, clock, [0, 1, 2], attempt="a1")
    assert first.offset_counts == () and first.min_count == 0
    assert m.commit_and_next(T, G, 0, 0, clock.now) == 1
    clock.now += 10_000
    second = _pop(m, clock, [1, 2, 3], attempt="a2")
    assert dict(second.offset_counts) == {1: 1, 2: 1}
    assert second.min_count == 0  # offset 3 is new
    clock.now += 10_000
    third = _pop(m, clock, [1, 2], attempt="a3")
    assert dict(third.offset_counts) == {1: 2, 2: 2} and third.min_count == 2
    again = _pop(m, clock, [1, 2], attempt="a3")  # the same attempt retried: counts unchanged
    assert dict(again.offset_counts) == {1: 2, 2: 2}
    assert again.entries(T, 0) == ["0 qo0%1 2", "0 qo0%2 2", "0 0 2"]


@pytest.mark.parametrize("scope", [QUEUE, GROUP], ids=["queue", "group"])
def test_failed_counts_only_the_first_unacked_of_each_group_and_survive_a_restart(
    tmp_path: Path, scope: PopOrderBlockScope
) -> None:
    path = str(tmp_path / "consumerOrderInfo.json")
    m, clock = _manager(scope, path=path)
    groups = {0: "A", 1: "B", 2: "A", 3: "B"}
    first = _pop(m, clock, [0, 1, 2, 3], attempt="a1", groups=groups)
    assert first.failed_counts == ()
    assert m.commit_and_next(T, G, 0, 1, clock.now) == 0  # B:0 done, A:0 not
    clock.now += 10_000
    again = [0, 1, 2, 3] if scope is QUEUE else [0, 2, 3]  # queue scope delivers acked B:0 again
    second = _pop(m, clock, again, attempt="a2", groups=groups)
    assert dict(second.failed_counts) == {0: 1, 3: 1}  # A:0 and B:1 failed; A:1 and B:0 did not
    assert dict(second.offset_counts) == {o: 1 for o in again}  # Java's consumed counts
    if scope is QUEUE:
        assert m.commit_and_next(T, G, 0, 1, clock.now) == 0  # acked again
    m.persist()
    assert '"rf":{0:1,3:1}' in Path(path).read_text()
    m2, _ = _manager(scope, path=path, clock=clock)
    m2.load()
    clock.now += 10_000
    third = _pop(m2, clock, again, attempt="a3", groups=groups)
    assert dict(third.failed_counts) == {0: 2, 3: 2}
    assert dict(_pop(m2, clock, again, attempt="a3", groups=groups).failed_counts) == {0: 2, 3: 2}


def test_change_invisible_time_extends_and_shortens_and_ignores_stale_handles() -> None:
    m, clock = _manager()
    _pop(m, clock, [0, 1], inv=10_000)
    pt = clock.now
    assert not m.update_next_visible_time(T, G, 0, 0, pt - 1, clock.now)  # stale popTime
    assert m.update_next_visible_time(T, G, 0, 0, pt, clock.now + 30_000)
    assert m.update_next_visible_time(T, G, 0, 1, pt, clock.now)
    clock.now += 20_000
    assert m.check_block("o", T, G, 0, 10_000)  # 0 extended to 30 s
    assert m.lock_free_timestamp(T, G, 0) == pt + 30_000
    assert m.lock_free_times() == [(T, G, 0, pt + 30_000)]
    assert m.update_next_visible_time(T, G, 0, 0, pt, clock.now)  # shortened: visible now
    assert not m.check_block("o", T, G, 0, 10_000)
    assert m.lock_free_times() == []
    assert m.lock_free_timestamp(T, G, 0) is None  # free: nothing to wait for


def test_missing_invisible_time_is_taken_from_the_pop() -> None:
    info = OrderInfo(pop_time=1_000, invisible_time=None, offset_list=[5])
    assert info.lock_free_timestamp(1_500) is None
    assert info.need_block(None, 1_000, 1_500)
    assert info.invisible_time == 1_000 and not info.need_block(None, 1_000, 2_000)


def test_clear_block_and_auto_clean() -> None:
    m, clock = _manager()
    _pop(m, clock, [0], qid=0)
    _pop(m, clock, [0], qid=1)
    _pop(m, clock, [0], qid=5)
    m.clear_block(T, G, 1)
    assert not m.check_block("o", T, G, 1, 10_000)
    m.auto_clean(read_queue_nums=lambda topic: 4)
    assert not m.check_block("o", T, G, 5, 10_000)  # queue id beyond the topic's read queues
    assert m.check_block("o", T, G, 0, 10_000)
    clock.now += CLEAN_SPAN_FROM_LAST_MS + 1
    assert m.encode() == '{"table":{"TopicTest@GID":{}}}'
    m.auto_clean(group_exists=lambda g: False)
    assert m.encode() == '{"table":{}}'


# ------------------------------------------------------------------ the file
GOLDEN = (
    '{"table":{"TopicTest@GID":{0:{"a":"att-1","cm":1,"i":60000,"l":1700000000500,"o":[100,1,3],'
    '"oc":{101:2},"ot":{103:1700000090000},"popTime":1700000000000},'
    '3:{"cm":0,"i":30000,"l":1700000000000,"o":[7],"popTime":1700000000000}}}}'
)
GOLDEN_PRETTY = """{
\t"table":{
\t\t"TopicTest@GID":{0:{
\t\t\t\t"a":"att-1",
\t\t\t\t"cm":1,
\t\t\t\t"i":60000,
\t\t\t\t"l":1700000000500,
\t\t\t\t"o":[
\t\t\t\t\t100,
\t\t\t\t\t1,
\t\t\t\t\t3
\t\t\t\t],
\t\t\t\t"oc":{101:2
\t\t\t\t},
\t\t\t\t"ot":{103:1700000090000
\t\t\t\t},
\t\t\t\t"popTime":1700000000000
\t\t\t},3:{
\t\t\t\t"cm":0,
\t\t\t\t"i":30000,
\t\t\t\t"l":1700000000000,
\t\t\t\t"o":[
\t\t\t\t\t7
\t\t\t\t],
\t\t\t\t"popTime":1700000000000
\t\t\t}
\t\t}
\t}
}"""


@pytest.mark.parametrize("text", [GOLDEN, GOLDEN_PRETTY], ids=["compact", "fastjson-pretty"])
def test_golden_java_file_loads_and_writes_back_identically(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config" / "consumerOrderInfo.json"
    path.parent.mkdir()
    path.write_text(text)
    m, _ = _manager(path=str(path), clock=Clock(1_700_000_001_000))
    m.load()
    assert m.check_block("other", T, G, 0, 60_000)
    assert m.commit_and_next(T, G, 0, 101, 1_700_000_000_000) == 103  # offsets 100 (acked: cm=1), 101, 103
    assert m.commit_and_next(T, G, 0, 103, 1_700_000_000_000) == 104
    m2, _ = _manager(clock=Clock(1_700_000_001_000))
    m2.decode(GOLDEN)
    assert m2.encode() == GOLDEN
    m.persist()
    assert path.read_text().startswith('{"table":{"TopicTest@GID":{0:{"a":"att-1","cm":7,')
    assert (tmp_path / "config" / "consumerOrderInfo.json.bak").read_text() == text


def test_group_scope_file_stays_java_readable_and_round_trips(tmp_path: Path) -> None:
    path = str(tmp_path / "consumerOrderInfo.json")
    m, clock = _manager(GROUP, path=path)
    _pop(m, clock, [0, 2], attempt="a1", groups={0: "A", 2: "A"})
    _pop(m, clock, [1], attempt="a2", groups={1: "B"})
    assert m.commit_and_next(T, G, 0, 1, clock.now) == 0
    m.persist()
    text = Path(path).read_text()
    assert text.startswith('{"table":{"TopicTest@GID":{0:{"a":"a2","cm":2,"i":10000,')
    assert '"o":[0,1,2],' in text and '"rq":{"b":0,"ak":[1],"g":{0:"A",1:"B",2:"A"},' in text
    again, _ = _manager(GROUP, path=path, clock=clock)
    again.load()
    assert again.encode() == m.encode()
    java_view, _ = _manager(QUEUE, path=path, clock=clock)
    java_view.load()
    assert java_view.check_block("o", T, G, 0, 10_000)
    assert java_view.commit_and_next(T, G, 0, 0, clock.now) == 2


def test_group_scope_file_keeps_cm_a_java_long_and_all_acks_in_rq(tmp_path: Path) -> None:
    path = str(tmp_path / "consumerOrderInfo.json")
    m, clock = _manager(GROUP, path=path)
    _pop(m, clock, list(range(70)))
    for o in range(1, 70):
        assert m.commit_and_next(T, G, 0, o, clock.now) == 0
    m.persist()
    assert f'"cm":{2**63 - 2},' in Path(path).read_text()
    java_view, _ = _manager(QUEUE, path=path, clock=clock)
    java_view.load()
    assert java_view.commit_and_next(T, G, 0, 0, clock.now) == 70


def test_java_file_loads_under_group_scope(tmp_path: Path) -> None:
    m, _ = _manager(GROUP, clock=Clock(1_700_000_001_000))
    m.decode(GOLDEN)
    # 100 acked, 101 and 103 in flight (groups unknown until the next pop names them)
    cands = [
        Candidate(100, "A"),
        Candidate(101, "A"),
        Candidate(102, "B"),
        Candidate(103, "C"),
        Candidate(104, "C"),
    ]
    assert _select(m, 100, cands) == [102]
    assert m.commit_and_next(T, G, 0, 101, 1_700_000_000_000) == 102


def test_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "consumerOrderInfo.json"
    path.write_text('{"table":{"T@G":{0:[1,2]}}}')
    m, _ = _manager(path=str(path))
    with pytest.raises(ValueError, match=r"not a consumerOrderInfo\.json table"):
        m.load()


def test_config_key() -> None:
    assert BrokerConfig().pop_order_block_scope is QUEUE
    attr, parse = BROKER_KEYS["popOrderBlockScope"]
    assert attr == "pop_order_block_scope" and parse("popOrderBlockScope", "group") is GROUP
    with pytest.raises(BrokerConfigError, match="QUEUE, GROUP"):
        parse("popOrderBlockScope", "topic")


# ------------------------------------------------------------------ group scope
def test_group_scope_stuck_group_does_not_hold_back_the_others() -> None:
    m, clock = _manager(GROUP)
    cands = _cands("A", "B", "A", "B")
    assert _select(m, 0, cands, max_nums=1) == [0]
    _pop(m, clock, [0], attempt="c1", groups={0: "A"})
    assert _select(m, 0, cands, max_nums=4) == [1, 3]  # A is held by c1; B flows
    _pop(m, clock, [1, 3], attempt="c2", groups={1: "B", 3: "B"})
    assert _select(m, 0, cands) == []
    assert m.commit_and_next(T, G, 0, 3, clock.now) == 0
    assert m.commit_and_next(T, G, 0, 1, clock.now) == 0  # 0 still un-acked: the offset stays
    assert m.lock_free_timestamp(T, G, 0) == clock.now + 10_000
    assert m.lock_free_times() == [(T, G, 0, clock.now + 10_000)]
    assert m.commit_and_next(T, G, 0, 0, clock.now) == 2  # stops at 2: never popped
    assert _select(m, 2, cands) == [2]
    _pop(m, clock, [2], attempt="c3", groups={2: "A"})
    assert m.commit_and_next(T, G, 0, 2, clock.now) == 4


def test_group_scope_redelivery_keeps_group_order_and_counts() -> None:
    m, clock = _manager(GROUP)
    cands = _cands("A", "A", "B", None, None)
    assert _select(m, 0, cands, max_nums=2) == [0, 1]
    _pop(m, clock, [0, 1], attempt="c1", groups={0: "A", 1: "A"})
    pt = clock.now
    assert m.update_next_visible_time(T, G, 0, 1, pt, pt + 60_000)
    clock.now += 10_000  # 0 visible again, 1 still held: A stays blocked
    assert _select(m, 0, cands) == [2, 3, 4]
    assert m.update_next_visible_time(T, G, 0, 1, pt, clock.now)
    assert _select(m, 0, cands, max_nums=2) == [0, 1]
    counts = _pop(m, clock, [0, 1], attempt="c2", groups={0: "A", 1: "A"})
    assert dict(counts.offset_counts) == {0: 1, 1: 1} and counts.min_count == 1
    assert m.commit_and_next(T, G, 0, 0, pt) == COMMIT_NOT_NEEDED  # c1's handle is stale
    assert _select(m, 0, cands, attempt="c2") == [0, 1]  # c2 retried: the same batch
    assert _pop(m, clock, [0, 1], attempt="c2").min_count == 1


def test_group_scope_messages_without_group_are_their_own_group() -> None:
    m, clock = _manager(GROUP)
    cands = _cands(None, None, None)
    _pop(m, clock, [0], attempt="c1")
    assert _select(m, 0, cands) == [1, 2]


def test_group_scope_filtered_messages_count_as_consumed() -> None:
    m, clock = _manager(GROUP)
    cands = [Candidate(0, "A"), Candidate(1, "B", matches=False), Candidate(2, "A")]
    sel = m.select(attempt_id="c1", topic=T, group=G, queue_id=0, invisible_time=1_000,
                   consumer_offset=0, candidates=cands, max_nums=1)  # fmt: skip
    assert sel.offsets == (0,) and sel.filtered == ()
    sel = m.select(attempt_id="c1", topic=T, group=G, queue_id=0, invisible_time=1_000,
                   consumer_offset=0, candidates=cands, max_nums=2)  # fmt: skip
    assert sel.offsets == (0, 2) and sel.filtered == (1,)
    m.update(attempt_id="c1", topic=T, group=G, queue_id=0, pop_time=clock.now, invisible_time=1_000,
             popped=sel.candidates, filtered=sel.filtered)  # fmt: skip
    assert m.commit_and_next(T, G, 0, 0, clock.now) == 2
    assert m.commit_and_next(T, G, 0, 9, clock.now) == COMMIT_ILLEGAL
    assert m.commit_and_next(T, G, 1, 0, clock.now) == COMMIT_NOT_NEEDED  # no state for the queue


def test_update_with_only_filtered_messages_moves_the_group_scope_offset() -> None:
    m, clock = _manager(GROUP)
    assert _pop(m, clock, []).min_count == 0
    assert m.consumer_offset(T, G, 0) is None
    m.update(attempt_id="c1", topic=T, group=G, queue_id=0, pop_time=clock.now, invisible_time=1_000,
             popped=[], filtered=[0, 1])  # fmt: skip
    assert m.consumer_offset(T, G, 0) == 2
    q, qclock = _manager(QUEUE)
    q.update(attempt_id="c1", topic=T, group=G, queue_id=0, pop_time=qclock.now, invisible_time=1_000,
             popped=[], filtered=[0, 1])  # fmt: skip
    assert q.encode() == '{"table":{}}' and q.consumer_offset(T, G, 0) is None


# ------------------------------------------------------------------ state machines against a model
MESSAGES = ["A", "B", "A", None, "C", "B", "A", "C", None, "B", "A", "C", "B"]
#: offsets the consumers' filter rejects (Java's pop skips them; group scope records them consumed)
FILTERED = {4, 9, 12}


class _Model:
    """The queue as the tests see it: deliveries, acks, visibility; no OrderInfo."""

    def __init__(self) -> None:
        self.latest: dict[int, tuple[int, int, str]] = {}  # offset -> (popTime, nextVisible, attempt)
        self.acked: set[int] = set()  # group scope: every accepted ack; queue scope: acked in batch
        self.done: set[int] = set()  # group scope: acked or filtered out
        self.ever_acked: set[int] = set()
        self.batch: list[int] = []  # queue scope: the last orderly batch
        self.batch_pop_time = -1
        self.batch_attempt = ""
        self.counts: dict[int, int] = {}
        #: deliveries an offset failed: it was its group's first un-acked message and stayed un-acked
        self.failed: dict[int, int] = {}


class OrderInfoMachine(RuleBasedStateMachine):
    scope = QUEUE

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="orderinfo-")
        self.path = str(Path(self.dir) / "consumerOrderInfo.json")
        self.clock = Clock()
        self.m = ConsumerOrderInfoManager(scope=self.scope, path=self.path, clock_ms=self.clock)
        self.model = _Model()
        self.offset = 0  # the consumer offset, committed as the processor does
        self.handles: list[tuple[int, int]] = []
        self.attempts = 0
        self.last_attempt: str | None = None
        self.last_offsets: list[int] = []
        self.acked_since_last_pop = False

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model's rules
    def _in_flight(self, o: int) -> bool:
        if self.scope is QUEUE:
            if o not in self.model.batch or o in self.model.acked:
                return False
        elif o in self.model.acked or o not in self.model.latest:
            return False
        return self.clock.now < self.model.latest[o][1]

    def _mine(self, attempt: str) -> list[int]:
        """Group scope: the un-acked messages last delivered to ``attempt``."""
        latest, acked = self.model.latest, self.model.acked
        return [o for o in sorted(latest) if latest[o][2] == attempt and o not in acked]

    def _next_offset(self) -> int:
        nxt = self.offset
        while nxt in self.model.done:
            nxt += 1
        return nxt

    def _expected(self, attempt: str, max_nums: int) -> list[int]:
        rest = [o for o in range(self.offset, len(MESSAGES)) if o not in FILTERED]
        if self.scope is QUEUE:
            if attempt != self.model.batch_attempt and any(self._in_flight(o) for o in self.model.batch):
                return []
            return rest[:max_nums]
        mine = self._mine(attempt)
        if mine:
            return mine
        busy = {MESSAGES[o] for o in self.model.latest if self._in_flight(o)} - {None}
        free = [
            o
            for o in rest
            if o not in self.model.acked and not self._in_flight(o) and MESSAGES[o] not in busy
        ]
        return free[:max_nums]

    def _pop(self, attempt: str, max_nums: int, inv: int) -> None:
        start = self.m.scan_start(attempt, T, G, 0, self.offset)  # the processor reads from there
        for o in range(self.offset, start):  # nothing the pop could deliver is skipped
            assert self.scope is GROUP and o < len(MESSAGES)
            mine = o in self.model.latest and self.model.latest[o][2] == attempt
            assert o in self.model.done or (self._in_flight(o) and not mine)
        cands = [Candidate(o, MESSAGES[o], o not in FILTERED) for o in range(start, len(MESSAGES))]
        sel = self.m.select(attempt_id=attempt, topic=T, group=G, queue_id=0, invisible_time=inv,
                            consumer_offset=self.offset, candidates=cands, max_nums=max_nums)  # fmt: skip
        got = list(sel.offsets)
        retried = self.scope is GROUP and bool(self._mine(attempt))
        assert got == self._expected(attempt, max_nums)
        self._check_delivery(got, attempt)
        counts = self.m.update(attempt_id=attempt, topic=T, group=G, queue_id=0, pop_time=self.clock.now,
                               invisible_time=inv, popped=sel.candidates, filtered=sel.filtered)  # fmt: skip
        if got:
            self._check_failed(got, attempt, dict(counts.failed_counts))
        if self.scope is GROUP:
            self.model.done |= set(sel.filtered)
            scanned = {o for o in FILTERED if o >= start and (len(got) < max_nums or o < got[-1])}
            assert set(sel.filtered) == (set() if retried else scanned)
            self.offset = self._next_offset()
            assert self.m.consumer_offset(T, G, 0) == self.offset
        elif not got and not sel.blocked and all(c.offset in FILTERED for c in cands):
            self.offset = len(MESSAGES)  # nothing matched: Java's processor commits the read's end
        if got:
            self._record(got, attempt, inv, dict(counts.offset_counts))

    def _check_delivery(self, got: list[int], attempt: str) -> None:
        retry = attempt == self.last_attempt
        for i, o in enumerate(got):
            assert o >= self.offset
            if self.scope is QUEUE:
                if not retry:
                    assert not any(self._in_flight(b) for b in self.model.batch)
                continue
            assert o not in self.model.acked  # nothing acked comes back
            if retry:
                continue
            g = MESSAGES[o]
            assert not self._in_flight(o)
            if g is None:
                continue
            assert not any(self._in_flight(p) for p in self.model.latest if MESSAGES[p] == g)
            earlier = [p for p in range(self.offset, o) if MESSAGES[p] == g and p not in FILTERED]
            assert all(p in self.model.acked or p in got[:i] for p in earlier)  # strict group order
        if retry and got and not self.acked_since_last_pop:
            assert got == self.last_offsets

    def _check_failed(self, got: list[int], attempt: str, failed: dict[int, int]) -> None:
        """A delivery failed when the message was first of its group among the un-acked ones and
        was delivered again: not the group's later messages, and (``queue`` scope) not a message
        that was acked and came back behind an earlier un-acked one."""
        model = self.model

        def first_of_group(o: int, among: list[int]) -> bool:
            g = MESSAGES[o]
            return g is None or not any(p < o and MESSAGES[p] == g for p in among)

        if self.scope is QUEUE:
            if attempt == model.batch_attempt:
                expected = dict(model.failed)
            else:
                unacked = [b for b in model.batch if b not in model.acked]
                expected = {
                    o: model.failed.get(o, 0) + (o in unacked and first_of_group(o, unacked))
                    for o in got
                    if o in model.batch
                }
            model.failed = {o: n for o, n in expected.items() if n}
        else:
            for o in got:
                old = model.latest.get(o)
                if old is not None and old[2] != attempt and first_of_group(o, got):
                    model.failed[o] = model.failed.get(o, 0) + 1
            expected = {o: n for o in got if (n := model.failed.get(o, 0))}
        assert failed == {o: n for o, n in expected.items() if n}
        assert all(n <= model.counts.get(o, 0) + 1 for o, n in failed.items())

    def _record(self, got: list[int], attempt: str, inv: int, counts: dict[int, int]) -> None:
        now, model = self.clock.now, self.model
        if self.scope is QUEUE:
            same = attempt == model.batch_attempt
            expected = (
                dict(model.counts)
                if same
                else {o: model.counts.get(o, 0) + 1 for o in got if o in model.batch}
            )
            model.batch, model.batch_pop_time, model.batch_attempt = list(got), now, attempt
            model.acked = set()
            model.counts = expected
        else:
            for o in got:
                old = model.latest.get(o)
                if old is not None and old[2] != attempt:
                    model.counts[o] = model.counts.get(o, 0) + 1
            expected = {o: n for o in got if (n := model.counts.get(o, 0))}
        assert counts == expected
        for o in got:
            model.latest[o] = (now, now + inv, attempt)
            self.handles.append((o, now))
        self.last_attempt, self.last_offsets, self.acked_since_last_pop = attempt, list(got), False

    # -- rules
    @rule(max_nums=st.integers(1, 4), inv=st.integers(1_000, 5_000))
    def pop(self, max_nums: int, inv: int) -> None:
        self.attempts += 1
        self._pop(f"att-{self.attempts}", max_nums, inv)

    @precondition(lambda self: self.last_attempt is not None)
    @rule(inv=st.integers(1_000, 5_000))
    def retry_last_attempt(self, inv: int) -> None:
        assert self.last_attempt is not None
        self._pop(self.last_attempt, max(1, len(self.last_offsets)), inv)

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        o, pt = data.draw(st.sampled_from(self.handles))
        if o < self.offset:
            return  # the processor answers OK without asking the manager (Java's ackOrderly)
        got = self.m.commit_and_next(T, G, 0, o, pt)
        model = self.model
        if self.scope is QUEUE:
            if pt != model.batch_pop_time:
                assert got == COMMIT_NOT_NEEDED
                return
            assert o in model.batch
            model.acked.add(o)
            unacked = [b for b in model.batch if b not in model.acked]
            assert got == (unacked[0] if unacked else model.batch[-1] + 1)
        else:
            if model.latest[o][0] != pt:
                assert got == COMMIT_NOT_NEEDED
                return
            model.acked.add(o)
            model.done.add(o)
            assert got == self._next_offset()
        model.ever_acked.add(o)
        self.offset = got
        self.acked_since_last_pop = True

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), inv=st.integers(0, 8_000))
    def change_invisible_time(self, data: st.DataObject, inv: int) -> None:
        o, pt = data.draw(st.sampled_from(self.handles))
        if o < self.offset:
            return
        ok = self.m.update_next_visible_time(T, G, 0, o, pt, self.clock.now + inv)
        current = self.model.batch_pop_time if self.scope is QUEUE else self.model.latest[o][0]
        assert ok == (pt == current)
        if ok:
            self.model.latest[o] = (self.model.latest[o][0], self.clock.now + inv, self.model.latest[o][2])

    @rule(ms=st.integers(0, 6_000))
    def time_passes(self, ms: int) -> None:
        self.clock.now += ms

    @rule()
    def restart(self) -> None:
        self.m.persist()
        self.m = ConsumerOrderInfoManager(scope=self.scope, path=self.path, clock_ms=self.clock)
        self.m.load()

    @invariant()
    def offset_never_passes_an_unacked_message(self) -> None:
        assert all(o in self.model.ever_acked or o in FILTERED for o in range(self.offset))


class GroupScopeMachine(OrderInfoMachine):
    scope = GROUP


_SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
TestQueueScopeStateful = OrderInfoMachine.TestCase
TestQueueScopeStateful.settings = _SETTINGS
TestGroupScopeStateful = GroupScopeMachine.TestCase
TestGroupScopeStateful.settings = _SETTINGS
