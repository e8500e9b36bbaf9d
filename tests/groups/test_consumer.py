"""The group consumer and producer against the real store and coordinator (real threads,
real time, short timeouts)."""

from __future__ import annotations

import threading
import time

import pytest

from streams.client import CommitFailed, Consumer, Producer
from streams.errors import NoOffsetForPartition
from streams.groups import GroupCoordinator


@pytest.fixture
def live(store):
    co = GroupCoordinator(store).start(tick_interval_s=0.02)
    yield store, co
    co.close()


def consumer(store, co, group="g", **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("session_timeout_ms", 600)
    kw.setdefault("heartbeat_interval_ms", 50)
    kw.setdefault("rebalance_timeout_ms", 2000)
    return Consumer(store, co, group, **kw)


def produce(store, topic, n, partitions=None, prefix=b"r"):
    p = Producer(store, linger_ms=1)
    futs = [p.send(topic, prefix + b"%d" % i, key=b"key-%d" % i) for i in range(n)]
    p.close()
    return [f.result() for f in futs]


def drain(c, expect, timeout=10.0):
    got = []
    deadline = time.time() + timeout
    while len(got) < expect and time.time() < deadline:
        got += c.poll(100)
    return got


def test_producer_batches_and_reports_offsets(live):
    store, _ = live
    store.create_topic("t", 3)
    results = produce(store, "t", 300)
    by_partition = {}
    for r in results:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))  # each partition in send order, no gaps
    assert sum(len(v) for v in by_partition.values()) == 300
    batches = sum(len(store.read_batches("t", p, 0, 1 << 30)) > 0 for p in range(3))
    assert batches == 3


def test_a_lone_record_is_sent_after_linger_ms_without_a_flush(live):
    """The sender slept without a deadline while nothing was queued: a single send() was
    never written until a flush, a close or a full batch."""
    store, _ = live
    store.create_topic("lone", 1)
    producer = Producer(store, linger_ms=1)
    try:
        assert producer.send("lone", b"alone").result(timeout=10).offset == 0
    finally:
        producer.close()


def test_at_least_once_uncommitted_records_are_redelivered(live):
    store, co = live
    store.create_topic("t", 1)
    produce(store, "t", 100)
    first = consumer(store, co, enable_auto_commit=False)
    first.subscribe(["t"])
    got = drain(first, 100)
    assert [r.offset for r in got] == list(range(100))
    first.commit({("t", 0): 40})  # processed everything, committed only the first 40
    first.abandon()  # crash: no commit, no LeaveGroup
    second = consumer(store, co, enable_auto_commit=False)
    second.subscribe(["t"])
    again = drain(second, 60)  # joins once the dead member's session expires
    assert [r.offset for r in again] == list(range(40, 100))
    assert [r.value for r in again] == [r.value for r in got[40:]]
    second.close()


def test_rebalance_three_members_six_partitions_one_dies(live):
    store, co = live
    store.create_topic("t", 6)
    members = [consumer(store, co, client_id=f"m{i}") for i in range(3)]
    for m in members:
        m.subscribe(["t"])
    stop = {m.client_id: threading.Event() for m in members}
    owners_by_generation: dict[int, dict] = {}
    lock = threading.Lock()
    errors = []

    def run(c):
        try:
            while not stop[c.client_id].is_set():
                c.poll(20)
                with lock:
                    gen = owners_by_generation.setdefault(c.generation, {})
                    for tp in c.assignment():
                        other = gen.setdefault(tp, c.client_id)
                        assert other == c.client_id, (
                            f"{tp} owned twice in generation {c.generation}"
                        )
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in members]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline and sorted(len(m.assignment()) for m in members) != [2, 2, 2]:
        time.sleep(0.02)
    assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
    victim = members[0]
    stop[victim.client_id].set()
    threads[0].join()
    lost = set(victim.assignment())
    victim.abandon()  # stops heartbeating, never leaves
    died = time.time()
    survivors = members[1:]
    while time.time() < died + 10:
        owned = {tp for m in survivors for tp in m.assignment()}
        if len(owned) == 6 and all(len(m.assignment()) == 3 for m in survivors):
            break
        time.sleep(0.02)
    moved_after = time.time() - died
    owned = {tp for m in survivors for tp in m.assignment()}
    assert owned == {("t", p) for p in range(6)} and lost <= owned
    # session timeout 600 ms + rebalance; generous bound for a loaded machine
    assert moved_after < 0.6 + 3.0
    for m in survivors:
        stop[m.client_id].set()
    for t in threads[1:]:
        t.join()
    assert not errors, errors
    assert co.describe_group("g").state == "Stable"
    for m in survivors:
        m.close()
    assert co.describe_group("g").state == "Empty"


def test_load_balancing_fan_out_and_idle_members(live):
    store, co = live
    store.create_topic("t", 2)
    g1 = [
        consumer(store, co, "g1", client_id=f"a{i}", auto_offset_reset="earliest") for i in range(3)
    ]  # three members, two partitions
    # earliest: the topic is empty until every member is assigned, so each starts at 0 whenever
    # its poll thread resolves the position ("latest" raced the produce below on a loaded machine:
    # a poll thread resolving after it skipped a whole partition)
    g2 = consumer(store, co, "g2", client_id="solo", auto_offset_reset="earliest")
    seen = {c.client_id: [] for c in g1 + [g2]}
    stop = threading.Event()

    def run(c):
        c.subscribe(["t"])
        while not stop.is_set():
            seen[c.client_id].extend(c.poll(20))

    threads = [threading.Thread(target=run, args=(c,)) for c in g1 + [g2]]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline and not (
        sorted(len(c.assignment()) for c in g1) == [0, 1, 1]
        and co.describe_group("g1").state == "Stable"
        and g2.assignment()
    ):
        time.sleep(0.02)
    produce(store, "t", 200)
    key = lambda r: (r.partition, r.offset)  # noqa: E731
    deadline = time.time() + 60  # a bound for a loaded machine, not a timing assertion
    while time.time() < deadline and (
        sum(len(seen[c.client_id]) for c in g1) < 200 or len(seen["solo"]) < 200
    ):
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    in_g1 = [key(r) for c in g1 for r in seen[c.client_id]]
    assert len(in_g1) == len(set(in_g1)) == 200  # shared within the group, no duplicates
    assert sorted(in_g1) == sorted(key(r) for r in seen["solo"])  # every group sees all
    assert sorted(len(c.assignment()) for c in g1) == [0, 1, 1]  # the third member is idle
    desc = co.describe_group("g1")
    assert sorted(len(m.assignment.get("t", [])) for m in desc.members) == [0, 1, 1]
    for c in g1 + [g2]:
        c.close()


def test_auto_offset_reset_and_seek(live):
    store, co = live
    store.create_topic("t", 1)
    produce(store, "t", 10)
    latest = consumer(store, co, "latest", auto_offset_reset="latest")
    latest.subscribe(["t"])
    assert latest.poll(200) == []
    produce(store, "t", 1, prefix=b"new")
    assert [r.value for r in drain(latest, 1)] == [b"new0"]
    none = consumer(store, co, "strict", auto_offset_reset="none")
    none.subscribe(["t"])
    with pytest.raises(NoOffsetForPartition, match="auto.offset.reset is none"):
        none.poll(200)
    manual = Consumer(store, None, None, auto_offset_reset="earliest")
    manual.assign([("t", 0)])
    manual.seek(("t", 0), 5)
    assert manual.poll(100)[0].offset == 5 and manual.position(("t", 0)) == 11
    manual.seek_to_beginning()
    assert manual.position(("t", 0)) == 0
    manual.seek_to_end()
    assert manual.poll(50) == []
    for c in (latest, none, manual):
        c.close()


def test_commit_sync_async_committed_and_stale_member(live):
    store, co = live
    store.create_topic("t", 1)
    produce(store, "t", 20)
    c = consumer(store, co, enable_auto_commit=False)
    c.subscribe(["t"])
    drain(c, 20)
    c.commit()
    assert c.committed(("t", 0)) == 20
    done = []
    c.commit_async({("t", 0): 15}, callback=lambda offsets, err: done.append((offsets, err)))
    deadline = time.time() + 5
    while not done and time.time() < deadline:
        time.sleep(0.01)
    assert done == [({("t", 0): 15}, None)] and c.committed(("t", 0)) == 15
    c._generation -= 1  # as if this member missed a rebalance
    with pytest.raises(CommitFailed, match="rebalanced"):
        c.commit({("t", 0): 18})
    assert c.committed(("t", 0)) == 15
    c.close(autocommit=False)


def test_pattern_subscription_picks_up_new_topics(live):
    store, co = live
    store.create_topic("orders.eu", 1)
    c = consumer(store, co)
    c.subscribe(pattern=r"orders\..*")
    c.poll(100)
    assert c.assignment() == [("orders.eu", 0)]
    store.create_topic("orders.us", 1)
    store.create_topic("payments", 1)
    c._need_rejoin = True  # a metadata refresh, as the periodic check would trigger
    c.poll(100)
    assert c.assignment() == [("orders.eu", 0), ("orders.us", 0)]
    c.close()


def test_auto_commit_and_close_commit_positions(live):
    store, co = live
    store.create_topic("t", 1)
    produce(store, "t", 50)
    c = consumer(store, co, auto_commit_interval_ms=50)
    c.subscribe(["t"])
    drain(c, 50)
    c.close()
    assert co.committed("g")[("t", 0)].offset == 50


class _AppendAfterEmptyRead:
    """The store, except that its first empty read of t-0 is followed at once by an append:
    the race of a producer landing between a consumer's read and its look at the end."""

    def __init__(self, store):
        self._store = store
        self.raced = False

    def __getattr__(self, name):
        return getattr(self._store, name)

    def read(self, topic, partition, offset, **kw):
        got = self._store.read(topic, partition, offset, **kw)
        if not got and not self.raced and (topic, partition) == ("t", 0):
            self.raced = True
            self._store.append("t", b"landed-in-the-gap", key=b"k", partition=0)
        return got


def test_records_appended_after_an_empty_read_are_not_skipped(live):
    """An empty read followed by a higher end means new records, not an emptied range: the
    consumer skipped them all (seen as a group member missing a whole partition)."""
    store, co = live
    store.create_topic("t", 1)
    raced = _AppendAfterEmptyRead(store)
    c = Consumer(raced, None, None, auto_offset_reset="earliest")
    c.assign([("t", 0)])
    got = []
    deadline = time.time() + 10
    while not got and time.time() < deadline:
        got = c.poll(50)
    assert raced.raced
    assert [(r.offset, r.value) for r in got] == [(0, b"landed-in-the-gap")]
    c.close()
