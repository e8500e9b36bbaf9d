"""The coordinator's protocol, driven directly with a hand-advanced clock."""

from __future__ import annotations

import pytest

from streams.errors import (
    GroupNotEmpty,
    IllegalGeneration,
    InconsistentGroupProtocol,
    RebalanceInProgress,
    UnknownGroup,
    UnknownMemberId,
)
from streams.groups import GroupCoordinator, GroupState
from streams.groups.schemas import Assignment, Subscription

META = Subscription(("t",)).encode()


def join(co, member="", group="g", **kw):
    kw.setdefault("protocols", [("range", META)])
    kw.setdefault("session_timeout_ms", 1000)
    kw.setdefault("rebalance_timeout_ms", 2000)
    return co.join_group(group, member, client_id=kw.pop("client_id", "c"), **kw)


def stable_group_of_two(co, store):
    store.create_topic("t", 4)
    a = join(co, client_id="a").result(0)  # alone: completes at once
    co.sync_group("g", a.generation, a.member_id, {a.member_id: b""}).result(0)
    fb = join(co, client_id="b")  # b joins: the group waits for a to rejoin
    assert not fb.done() and co.group_state("g") == GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgress):
        co.heartbeat("g", a.generation, a.member_id)  # how a learns it must rejoin
    fa = join(co, a.member_id)
    ra, rb = fa.result(0), fb.result(0)
    assert ra.generation == rb.generation == 2 and ra.is_leader and not rb.is_leader
    assert {m for m, _ in ra.members} == {a.member_id, rb.member_id} and rb.members == ()
    plan = {
        ra.member_id: Assignment({"t": [0, 1]}).encode(),
        rb.member_id: Assignment({"t": [2, 3]}).encode(),
    }
    fsb = co.sync_group("g", 2, rb.member_id)
    assert not fsb.done()  # followers wait for the leader's assignment
    co.sync_group("g", 2, ra.member_id, plan).result(0)
    assert Assignment.decode(fsb.result(0)).partitions == {"t": [2, 3]}
    return ra, rb


def test_states_through_a_rebalance(coordinator, store, clock):
    co = coordinator
    with pytest.raises(UnknownGroup):
        co.group_state("g")
    ra, rb = stable_group_of_two(co, store)
    assert co.group_state("g") == GroupState.STABLE
    desc = co.describe_group("g")
    assert {m.client_id: m.assignment for m in desc.members} == {
        "a": {"t": [0, 1]},
        "b": {"t": [2, 3]},
    }
    co.leave_group("g", rb.member_id)
    assert co.group_state("g") == GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgress):
        co.heartbeat("g", 2, ra.member_id)
    r = join(co, ra.member_id).result(0)
    assert r.generation == 3 and co.group_state("g") == GroupState.COMPLETING_REBALANCE
    co.heartbeat("g", 3, ra.member_id)  # allowed while completing
    co.sync_group("g", 3, ra.member_id, {ra.member_id: b""}).result(0)
    co.leave_group("g", ra.member_id)
    assert co.group_state("g") == GroupState.EMPTY
    assert co.describe_group("g").generation == 4


def test_stale_generation_cannot_commit(coordinator, store):
    co = coordinator
    ra, rb = stable_group_of_two(co, store)
    co.commit_offsets("g", {("t", 0): 5}, member_id=ra.member_id, generation=2)
    join(co, ra.member_id)  # a new rebalance starts: generation 3 is coming
    with pytest.raises(IllegalGeneration):
        co.commit_offsets("g", {("t", 0): 6}, member_id=ra.member_id, generation=1)
    with pytest.raises(UnknownMemberId):
        co.commit_offsets("g", {("t", 0): 6}, member_id="nobody", generation=2)
    with pytest.raises(GroupNotEmpty, match="active members"):
        co.commit_offsets("g", {("t", 0): 6})  # an admin commit needs an Empty group
    assert co.committed("g")[("t", 0)].offset == 5


def test_session_expiry_triggers_rebalance_and_removes_member(coordinator, store, clock):
    co = coordinator
    ra, rb = stable_group_of_two(co, store)
    clock.advance(600)
    co.heartbeat("g", 2, ra.member_id)
    clock.advance(600)  # b has been silent for 1200 ms > 1000 ms
    co.tick(clock.now)
    assert co.group_state("g") == GroupState.PREPARING_REBALANCE
    assert [m.member_id for m in co.describe_group("g").members] == [ra.member_id]
    with pytest.raises(UnknownMemberId):
        co.heartbeat("g", 2, rb.member_id)
    fut = join(co, ra.member_id)
    assert fut.result(0).generation == 3


def test_rebalance_timeout_drops_members_that_do_not_rejoin(coordinator, store, clock):
    co = coordinator
    ra, rb = stable_group_of_two(co, store)
    fut = join(co, ra.member_id)  # b keeps heartbeating but never rejoins
    for _ in range(4):
        clock.advance(500)
        with pytest.raises(RebalanceInProgress):
            co.heartbeat("g", 2, rb.member_id)
        co.tick(clock.now)
    result = fut.result(0)  # completed at the rebalance timeout (2000 ms) without b
    assert result.generation == 3 and [m for m, _ in result.members] == [ra.member_id]


def test_leader_that_never_syncs_is_removed(coordinator, store, clock):
    co = coordinator
    store.create_topic("t", 1)
    a = join(co, client_id="a").result(0)
    co.sync_group("g", a.generation, a.member_id, {}).result(0)
    fb = join(co, client_id="b")
    join(co, a.member_id).result(0)
    b = fb.result(0)
    pending = co.sync_group("g", b.generation, b.member_id)
    for _ in range(5):  # b heartbeats; the leader never syncs within the rebalance timeout
        clock.advance(500)
        if not pending.done():
            co.heartbeat("g", b.generation, b.member_id)
        co.tick(clock.now)
    with pytest.raises(RebalanceInProgress):
        pending.result(0)
    assert [m.member_id for m in co.describe_group("g").members] == [b.member_id]


def test_protocol_choice_and_mismatch(coordinator, store):
    co = coordinator
    store.create_topic("t", 1)
    a = join(co, protocols=[("range", META), ("roundrobin", META)]).result(0)
    assert a.protocol == "range"  # alone: its first preference
    fb = join(co, protocols=[("roundrobin", META)])
    ra = join(co, a.member_id, protocols=[("range", META), ("roundrobin", META)]).result(0)
    assert ra.protocol == fb.result(0).protocol == "roundrobin"  # the one both support
    with pytest.raises(InconsistentGroupProtocol, match="share none"):
        join(co, protocols=[("sticky", META)])
    with pytest.raises(InconsistentGroupProtocol, match="protocol type"):
        join(co, protocol_type="connect", protocols=[("roundrobin", META)])


def test_delete_group_and_offsets_only_when_allowed(coordinator, store):
    co = coordinator
    ra, rb = stable_group_of_two(co, store)
    co.commit_offsets("g", {("t", 0): 1, ("t", 2): 3}, member_id=ra.member_id, generation=2)
    with pytest.raises(GroupNotEmpty):
        co.delete_group("g")
    with pytest.raises(GroupNotEmpty):
        co.delete_offsets("g", "t")  # members subscribe to t
    co.leave_group("g", ra.member_id)
    co.leave_group("g", rb.member_id)
    assert co.delete_offsets("g", "t") == [("t", 0), ("t", 2)]
    assert co.committed("g") == {}
    co.delete_group("g")
    assert co.list_groups() == []
    with pytest.raises(UnknownGroup):
        co.delete_group("g")


def test_offsets_expire_after_retention_when_empty(store, clock):
    co = GroupCoordinator(store, clock=clock, offsets_retention_ms=60_000)
    co.load()
    store.create_topic("t", 1)
    a = join(co, client_id="a").result(0)
    co.sync_group("g", a.generation, a.member_id, {}).result(0)
    co.commit_offsets("g", {("t", 0): 7}, member_id=a.member_id, generation=a.generation)
    co.commit_offsets("standalone", {("t", 0): 3})
    clock.advance(120_000)
    co.heartbeat("g", a.generation, a.member_id)
    co.tick(clock.now)
    assert co.committed("g")[("t", 0)].offset == 7  # not Empty: never expires
    co.leave_group("g", a.member_id)
    assert co.committed("standalone") == {}  # expired by its commit time
    clock.advance(59_000)
    co.tick(clock.now)
    assert co.committed("g")[("t", 0)].offset == 7
    clock.advance(2_000)
    co.tick(clock.now)
    assert co.committed("g") == {} and co.list_groups() == []


def test_offsets_and_groups_survive_restart(tmp_path, clock):
    from streams.log import LogStore

    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store, clock=clock)
    co.load()
    store.create_topic("t", 3)
    co.commit_offsets("g1", {("t", 0): 10, ("t", 1): 20})
    co.commit_offsets("g1", {("t", 1): 21})
    co.commit_offsets("g2", {("t", 2): 5})
    co.delete_group("g2")
    co.close()
    store.close()
    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store, clock=clock)
    co.load()
    assert {tp: c.offset for tp, c in co.committed("g1").items()} == {("t", 0): 10, ("t", 1): 21}
    assert co.list_groups() == [("g1", "Empty")]
    assert co.committed("g1")[("t", 0)].commit_timestamp_ms == clock.now
    co.close()
    store.close()


def test_negative_offsets_are_stored_as_sentinels_and_survive_restart(tmp_path, clock):
    """Kafka stores any committed offset: KafkaJS resets a group to "earliest" by committing -2.
    OffsetFetch gets it back as stored; lag, resets and consumers see no position."""
    from streams.groups.lag import group_lag
    from streams.log import LogStore

    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store, clock=clock)
    co.load()
    store.create_topic("t", 3)
    store.append_batch("t", [(b"v",)] * 4, partition=2)
    co.commit_offsets("g", {("t", 0): -2, ("t", 1): -1, ("t", 2): 3})
    co.close()
    store.close()
    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store, clock=clock)
    co.load()
    stored = co.committed("g", sentinels=True)
    assert {tp: c.offset for tp, c in stored.items()} == {("t", 0): -2, ("t", 1): -1, ("t", 2): 3}
    assert {tp: c.offset for tp, c in co.committed("g").items()} == {("t", 2): 3}
    lag = group_lag(co, store, "g").partitions
    assert [(p.topic, p.partition, p.committed, p.lag) for p in lag] == [("t", 2, 3, 1)]
    # a reset plan computed against "nothing committed" still applies over a sentinel
    co.commit_offsets("g", {("t", 0): 0}, expect={("t", 0): None})
    assert co.committed("g")[("t", 0)].offset == 0
    co.close()
    store.close()


def test_the_view_after_a_commit_is_what_a_replay_of_the_offsets_topic_gives(store):
    """A commit updates the in-memory view from the values it wrote (no decoding them back):
    the same view a restart rebuilds from ``__consumer_offsets``."""
    from streams.groups.offsets import OffsetStore

    offsets = OffsetStore(store)
    offsets.load()
    offsets.commit("g", {("t", 0): (5, ""), ("t", 1): (7, "méta ✓"), ("u", 0): (-2, "")}, 1)
    offsets.commit("g", {("t", 0): (6, "again")}, 2, durable=False)
    offsets.commit("h", {("t", 0): (1, "")}, 3)
    replayed = OffsetStore(store)
    replayed.load()
    assert replayed.offsets == offsets.offsets
    assert offsets.committed("g")[("t", 0)] == offsets.offsets["g"][("t", 0)]
    assert offsets.offsets["g"][("t", 1)].metadata == "méta ✓"
