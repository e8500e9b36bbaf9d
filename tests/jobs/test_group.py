"""Two workers of one job share its partitions through the job's consumer group; when one
stops, the other takes its tasks over, restoring their state from the changelogs, and the
output equals the oracle's (real threads, real coordinator; waits have deadlines, no timing
is asserted)."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from streams.groups import GroupCoordinator
from streams.jobs import JSON, Count, Job, Sum, Tumbling, field
from streams.jobs.runner import Runner

SIZE = 100
# generous session timeout: a loaded CI machine must not expire a live worker (no timing tested)
OPTIONS = {
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 50,
    "rebalance_timeout_ms": 10_000,
}


def job() -> Job:
    j = Job("shop")
    keyed = j.stream("orders", value=JSON, timestamp=field("ts")).key_by("country")

    def running(o, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"n": n}

    keyed.process(running, store="seen").to("running")
    keyed.window(Tumbling(SIZE), grace_ms=1_000_000).aggregate(
        name="totals", total=Sum("amount"), n=Count()
    ).to("totals")
    return j


class Worker:
    def __init__(self, store, co):
        self.runner = Runner(job(), store, coordinator=co, group=True, consumer_options=OPTIONS)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.runner.run(self.stop.is_set, idle_sleep_s=0.01)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def halt(self):
        self.stop.set()
        self.thread.join(30)
        assert self.error is None, self.error


def wait_until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def caught_up(store, co) -> bool:
    """Every input partition (the repartition topic's too) committed up to its end."""
    committed = {tp: c.offset for tp, c in co.committed("shop").items()}
    for topic in ("orders", "shop-repartition-2"):
        for p in range(store.partition_count(topic)):
            if committed.get((topic, p), 0) < store.offsets(topic, p)[1]:
                return False
    return True


def read_all(store, topic):
    out = []
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend((json.loads(r.key), json.loads(r.value)) for r in recs)
            pos = recs[-1].offset + 1
    return out


@pytest.fixture
def live(tmp_path):
    from streams.log import LogStore

    store = LogStore.open(tmp_path / "data", background=False)
    co = GroupCoordinator(store).start(tick_interval_s=0.02)
    yield store, co
    co.close()
    store.close()


def write(store, orders, first):
    store.append_batch(
        "orders",
        [
            (json.dumps({"country": c, "amount": a, "ts": t}).encode(), f"o{i}".encode())
            for i, (c, a, t) in enumerate(orders, first)
        ],
    )


def test_two_workers_share_the_partitions_and_one_takes_over(live):
    store, co = live
    store.create_topic("orders", 4)
    rnd = random.Random(11)
    countries = ["fr", "de", "es", "it", "nl", "pt", "be", "at"]
    orders = [(rnd.choice(countries), rnd.randint(1, 9), rnd.randint(0, 999)) for _ in range(400)]
    write(store, orders[:200], 0)
    a = Worker(store, co)
    b = Worker(store, co)
    wait_until(lambda: a.runner.tasks and b.runner.tasks, "both workers to own tasks")
    wait_until(lambda: caught_up(store, co), "the first half to be processed")
    assert not set(a.runner.tasks) & set(b.runner.tasks)  # each task has one owner
    b.halt()
    b.runner.close()  # commits and leaves the group: a takes every task over
    write(store, orders[200:], 200)
    wait_until(lambda: len(a.runner.tasks) == 4, "a to own every task")
    wait_until(lambda: caught_up(store, co), "the second half to be processed")
    a.halt()
    a.runner.flush()
    a.runner.close()

    seen: dict[str, list[int]] = {}
    for k, v in read_all(store, "running"):
        seen.setdefault(k, []).append(v["n"])
    counts = {c: sum(1 for o in orders if o[0] == c) for c in {o[0] for o in orders}}
    assert {k: sorted(v) for k, v in seen.items()} == {
        c: list(range(1, n + 1)) for c, n in counts.items()
    }  # per country 1..n: nothing lost or repeated across the handover
    totals = read_all(store, "totals")
    got = {(k, v["start"]): (v["total"], v["n"]) for k, v in totals}
    assert len(got) == len(totals)
    expected: dict = {}
    for c, amount, t in orders:
        acc = expected.setdefault((c, t - t % SIZE), [0, 0])
        acc[0] += amount
        acc[1] += 1
    assert got == {k: tuple(v) for k, v in expected.items()}
