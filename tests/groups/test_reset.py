"""Every reset strategy against hand-computed expectations, clamping, scopes and the Empty rule.

Fixture layout (timestamps in ms after T0):
    t-0: offsets 0..9,  timestamp T0 + 1000*i;  log start raised to 2 by delete-records
    t-1: offsets 0..4,  timestamp T0 + 1000*i + 500
    u-0: offsets 0..2
Group "g" has committed t-0 -> 6, t-1 -> 1; nothing on u.
"""

from __future__ import annotations

import pytest

from streams.errors import GroupNotEmpty, InvalidResetSpec, UnknownPartition, UnknownTopic
from streams.groups import ResetScope, ResetStrategy, execute_plan, plan_reset
from streams.groups.reset import parse_datetime_ms, parse_duration_ms, parse_offsets_csv
from streams.groups.schemas import Subscription

T0 = 1_700_000_000_000


@pytest.fixture
def setup(store, coordinator, clock):
    store.create_topic("t", 2)
    store.create_topic("u", 1)
    for i in range(10):
        store.append("t", b"a%d" % i, partition=0, timestamp_ms=T0 + 1000 * i)
    for i in range(5):
        store.append("t", b"b%d" % i, partition=1, timestamp_ms=T0 + 1000 * i + 500)
    for i in range(3):
        store.append("u", b"c%d" % i, partition=0, timestamp_ms=T0)
    store.delete_records("t", {0: 2})
    coordinator.commit_offsets("g", {("t", 0): 6, ("t", 1): 1})
    clock.now = T0 + 20_000
    return store, coordinator, clock


def plan(setup, kind, value=None, scope=None):
    store, co, clock = setup
    scope = scope or ResetScope(all_topics=True)
    p = plan_reset(co, store, "g", ResetStrategy.parse(kind, value), scope, clock=clock)
    return {(r.topic, r.partition): r for r in p.rows}, p


@pytest.mark.parametrize(
    "kind, value, expected",
    [
        ("to-earliest", None, {("t", 0): 2, ("t", 1): 0}),
        ("to-latest", None, {("t", 0): 10, ("t", 1): 5}),
        ("to-current", None, {("t", 0): 6, ("t", 1): 1}),
        ("to-offset", "3", {("t", 0): 3, ("t", 1): 3}),
        ("shift-by", "-2", {("t", 0): 4, ("t", 1): 0}),  # t-1: 1-2=-1 clamped to 0
        ("shift-by", "+3", {("t", 0): 9, ("t", 1): 4}),
        # first offset with timestamp >= T0+3200: t-0 -> 4 (T0+4000), t-1 -> 3 (T0+3500)
        ("to-datetime", "2023-11-14T22:13:23.200Z", {("t", 0): 4, ("t", 1): 3}),
        # now = T0+20000; PT16.8S -> T0+3200, as above
        ("by-duration", "PT16.8S", {("t", 0): 4, ("t", 1): 3}),
        # after every record: no offset has such a timestamp -> the log end, as Kafka
        ("by-duration", "PT1S", {("t", 0): 10, ("t", 1): 5}),
    ],
)
def test_strategies(setup, kind, value, expected):
    rows, _ = plan(setup, kind, value)
    assert {tp: r.target for tp, r in rows.items()} == expected


def test_datetime_helpers_match_t0():
    assert parse_datetime_ms("2023-11-14T22:13:20Z") == T0
    assert parse_datetime_ms("2023-11-14T23:13:20+01:00") == T0
    assert parse_datetime_ms("2023-11-14T22:13:20.000") == T0  # no zone: UTC
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT12H") == 129_600_000
    assert parse_duration_ms("PT-30M") == -1_800_000
    assert parse_duration_ms("PT0.5S") == 500
    for bad in ["1h", "P", "PT", "P1H", "yesterday"]:
        with pytest.raises(InvalidResetSpec, match="ISO-8601"):
            parse_duration_ms(bad)


def test_clamping_is_reported_with_the_reason(setup):
    rows, _ = plan(setup, "to-offset", "0")
    assert rows[("t", 0)].target == 2 and "below the log start offset 2" in rows[("t", 0)].clamp
    assert rows[("t", 1)].target == 0 and rows[("t", 1)].clamp is None
    rows, _ = plan(setup, "to-offset", "99")
    assert rows[("t", 0)].target == 10 and "past the log end offset 10" in rows[("t", 0)].clamp
    assert rows[("t", 0)].requested == 99


def test_replay_and_skip_counts_and_csv(setup):
    rows, p = plan(setup, "to-earliest")
    assert (rows[("t", 0)].to_replay, rows[("t", 0)].to_skip) == (4, 0)  # 6 -> 2
    assert (rows[("t", 1)].to_replay, rows[("t", 1)].to_skip) == (1, 0)  # 1 -> 0
    assert p.total_replay == 5
    rows, p = plan(setup, "to-latest")
    assert (rows[("t", 0)].to_skip, rows[("t", 1)].to_skip) == (4, 4)
    lines = p.to_csv().splitlines()
    assert lines[0].startswith("topic,partition,new_offset,current_offset")
    assert lines[1] == "t,0,10,6,2,10,0,4,"
    from streams.groups.reset import parse_offsets_csv

    assert parse_offsets_csv(p.to_csv()) == {("t", 0): 10, ("t", 1): 5}  # re-uploadable


def test_scopes(setup):
    rows, _ = plan(setup, "to-earliest", scope=ResetScope(topic="u"))
    assert set(rows) == {("u", 0)} and rows[("u", 0)].current is None
    assert rows[("u", 0)].to_replay == 0
    rows, _ = plan(setup, "to-latest", scope=ResetScope.parse_topic("t:1"))
    assert set(rows) == {("t", 1)}
    with pytest.raises(UnknownPartition):
        plan(setup, "to-latest", scope=ResetScope.parse_topic("t:7"))
    with pytest.raises(UnknownTopic):
        plan(setup, "to-latest", scope=ResetScope(topic="nope"))
    with pytest.raises(InvalidResetSpec, match="choose a scope"):
        plan(setup, "to-latest", scope=ResetScope())


def test_to_current_without_commit_uses_latest_and_shift_needs_a_commit(setup):
    rows, _ = plan(setup, "to-current", scope=ResetScope(topic="u"))
    assert rows[("u", 0)].target == 3
    with pytest.raises(InvalidResetSpec, match="no committed offset to shift from"):
        plan(setup, "shift-by", "1", scope=ResetScope(topic="u"))


def test_from_file(setup, tmp_path):
    f = tmp_path / "offsets.csv"
    f.write_text("topic,partition,offset\nt,0,7\nt,1,99\nu,0,1\n")
    rows, _ = plan(setup, "from-file", str(f))
    assert {tp: r.target for tp, r in rows.items()} == {("t", 0): 7, ("t", 1): 5, ("u", 0): 1}
    assert rows[("t", 1)].clamp is not None
    with pytest.raises(InvalidResetSpec, match="line 2"):
        parse_offsets_csv("t,0,1\nt,zero,1\n")
    with pytest.raises(InvalidResetSpec, match="cannot read"):
        ResetStrategy.parse("from-file", str(tmp_path / "missing.csv"))


@pytest.mark.parametrize(
    "kind, value, message",
    [
        ("to-offset", "-1", ">= 0"),
        ("to-offset", "x", "whole number"),
        ("shift-by", None, "value"),
        ("to-datetime", "tomorrow", "date-time"),
        ("rewind", None, "unknown reset strategy"),
    ],
)
def test_bad_specs_say_what_is_expected(kind, value, message):
    with pytest.raises(InvalidResetSpec, match=message):
        ResetStrategy.parse(kind, value)


def test_execute_commits_all_rows_in_one_batch(setup):
    store, co, _ = setup
    _, p = plan(setup, "to-earliest")
    from streams.groups.schemas import offsets_partition_for

    part = offsets_partition_for("g")
    before = store.offsets("__consumer_offsets", part)[1]
    execute_plan(co, p)
    after = store.offsets("__consumer_offsets", part)[1]
    raw = store.read_batches("__consumer_offsets", part, before, 1 << 20)
    from streams.log import records as rb

    h = rb.parse_header(raw)
    assert h.size == len(raw) and h.count == after - before == 2  # one batch, both rows
    assert {tp: c.offset for tp, c in co.committed("g").items()} == {("t", 0): 2, ("t", 1): 0}


def test_execute_refused_when_committed_offsets_moved_since_the_preview(setup):
    from streams.errors import OffsetsChanged

    store, co, _ = setup
    _, p = plan(setup, "to-earliest")
    co.commit_offsets("g", {("t", 1): 3})  # another reset (or a standalone consumer) landed
    with pytest.raises(OffsetsChanged, match=r"t-1: 1 -> 3"):
        execute_plan(co, p)
    assert co.committed("g")[("t", 0)].offset == 6  # nothing applied


def test_execute_refused_while_members_are_active_even_after_an_empty_preview(setup):
    store, co, _ = setup
    _, p = plan(setup, "to-earliest")
    assert p.group_state == "Empty"
    fut = co.join_group(
        "g", "", client_id="late", protocols=[("range", Subscription(("t",)).encode())]
    )
    member = fut.result(0)
    with pytest.raises(GroupNotEmpty) as info:
        execute_plan(co, p)  # checked at commit time, not only when the plan was made
    assert member.member_id in str(info.value) and info.value.members == [member.member_id]
    assert {tp: c.offset for tp, c in co.committed("g").items()} == {("t", 0): 6, ("t", 1): 1}
    co.leave_group("g", member.member_id)
    execute_plan(co, p)
    assert co.committed("g")[("t", 0)].offset == 2


# ---------------------------------------------- several scopes: one plan (streams.groups.reset)


def _across(setup, strategy, scopes):
    from streams.groups.reset import plan_across_scopes

    store, co, clock = setup
    return plan_across_scopes(
        lambda scope: plan_reset(co, store, "g", strategy, scope, clock=clock), strategy, scopes
    )


def test_scopes_merge_into_one_plan_in_partition_order(setup):
    """Each partition once, ordered by topic and partition, whatever the scopes' order (the
    console kept first-seen order, the command line sorted)."""
    scopes = [ResetScope(topic="u"), ResetScope(topic="t", partitions=(1,)), ResetScope(topic="t")]
    p = _across(setup, ResetStrategy.parse("to-earliest"), scopes)
    assert [(r.topic, r.partition) for r in p.rows] == [("t", 0), ("t", 1), ("u", 0)]


def test_from_file_across_scopes_keeps_the_scopes_partitions(setup):
    strategy = ResetStrategy("from-file", {("t", 0): 3, ("t", 1): 2, ("u", 0): 1})
    p = _across(setup, strategy, [ResetScope(topic="t", partitions=(1,))])
    assert [(r.topic, r.partition, r.target) for r in p.rows] == [("t", 1, 2)]
    assert len(_across(setup, strategy, [ResetScope(all_topics=True)]).rows) == 3
    with pytest.raises(InvalidResetSpec):
        _across(setup, ResetStrategy("from-file", {("u", 0): 1}), [ResetScope(topic="t")])
