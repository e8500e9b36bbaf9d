"""Lag per partition, topic and group; offsets that fell behind retention are flagged."""

from __future__ import annotations

from streams.groups import group_lag
from streams.groups.schemas import Assignment, Subscription


def test_lag_per_partition_topic_and_group(store, coordinator):
    store.create_topic("t", 2)
    store.create_topic("u", 1)
    for p, n in ((0, 10), (1, 4)):
        store.append_batch("t", [(b"v",)] * n, partition=p)
    store.append_batch("u", [(b"v",)] * 7, partition=0)
    coordinator.commit_offsets("g", {("t", 0): 3, ("t", 1): 4, ("u", 0): 1})
    store.delete_records("u", {0: 5})  # the group's offset 1 is now below the log start
    lag = group_lag(coordinator, store, "g")
    rows = {(r.topic, r.partition): r for r in lag.partitions}
    assert rows[("t", 0)].lag == 7 and rows[("t", 1)].lag == 0
    assert rows[("u", 0)].fallen_behind_retention and rows[("u", 0)].lag == 2  # 7 - 5
    assert not rows[("t", 0)].fallen_behind_retention
    assert lag.by_topic() == {"t": 7, "u": 2} and lag.total == 9


def test_assigned_partitions_without_commits_show_owner_and_no_lag(store, coordinator):
    store.create_topic("t", 2)
    store.append_batch("t", [(b"v",)] * 3, partition=1)
    meta = Subscription(("t",)).encode()
    r = coordinator.join_group(
        "g", "", client_id="app-1", host="box", protocols=[("range", meta)]
    ).result(0)
    coordinator.sync_group(
        "g", r.generation, r.member_id, {r.member_id: Assignment({"t": [0, 1]}).encode()}
    ).result(0)
    rows = {(x.topic, x.partition): x for x in group_lag(coordinator, store, "g").partitions}
    assert rows[("t", 1)].committed is None and rows[("t", 1)].lag is None
    assert (rows[("t", 1)].client_id, rows[("t", 1)].host) == ("app-1", "box")
