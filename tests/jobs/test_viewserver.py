"""Queries routed across workers: two workers of a job share its partitions through the
job's group; one publishes into this process's views (as the console's embedded worker),
the other into a registry of its own served by its ``ViewServer`` (as a worker in another
process), whose address it advertises in its group member's client id. ``RoutedViews``
answers each key from the worker that owns the key's partition — over HTTP when remote —,
merges a key range across both, and waits for offsets across both (read-your-writes).
Real threads, a real coordinator and real HTTP; waits have deadlines, no timing asserted."""

from __future__ import annotations

import json
import threading
import time

import pytest

from streams.groups import GroupCoordinator
from streams.jobs import JSON, Count, Job, Sum, field
from streams.jobs.runner import Runner
from streams.jobs.views import UnknownView, ViewRegistry, ViewUnavailable
from streams.jobs.viewserver import (
    RoutedViews,
    ViewServer,
    ask,
    endpoint_of,
    member_client_id,
    owners_from_group,
)

OPTIONS = {
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 50,
    "rebalance_timeout_ms": 10_000,
}
COUNTRIES = ["at", "be", "ch", "de", "es", "fi", "fr", "gr", "ie", "it", "nl", "pt"]


def shop() -> Job:
    job = Job("shop")
    by_country = job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country")
    by_country.aggregate(name="revenue", total=Sum("amount"), n=Count())
    return job


class Worker:
    def __init__(self, store, co, **kw):
        self.runner = Runner(
            shop(), store, coordinator=co, group=True, consumer_options=OPTIONS, **kw
        )
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
        self.runner.close()
        assert self.error is None, self.error


def wait_until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def live(tmp_path):
    from streams.log import LogStore

    store = LogStore.open(tmp_path / "data", background=False)
    co = GroupCoordinator(store).start(tick_interval_s=0.02)
    yield store, co
    co.close()
    store.close()


def produce(store, i: int, country: str) -> tuple[int, int]:
    value = json.dumps({"country": country, "amount": i % 5 + 1, "ts": i}).encode()
    r = store.append_batch("orders", [(value, f"o{i}".encode(), (), i)])[0]
    return r.partition, r.offset


def test_member_client_id_carries_the_endpoint():
    assert member_client_id("shop", None) == "tidelog-job-shop"
    assert endpoint_of(member_client_id("a@b", "127.0.0.1:8123")) == "127.0.0.1:8123"
    assert endpoint_of("tidelog-job-shop") is None


def test_queries_are_routed_to_the_owning_worker(live):
    store, co = live
    store.create_topic("orders", 4)
    remote_registry = ViewRegistry(store)  # "the other process": not this process's views
    server = ViewServer(remote_registry).start()
    local = Worker(store, co)
    remote = Worker(store, co, views=remote_registry, query_endpoint=server.address)
    try:
        wait_until(
            lambda: (
                local.runner.tasks
                and remote.runner.tasks
                and set(local.runner.tasks) | set(remote.runner.tasks) == {0, 1, 2, 3}
            ),
            "both workers to own tasks",
        )
        router = RoutedViews(store, lambda job: owners_from_group(co.describe_group(job)))
        view = router.view("shop", "revenue")
        want: dict[str, dict] = {}
        ends: dict[int, int] = {}
        for i in range(120):
            c = COUNTRIES[i % len(COUNTRIES)]
            p, off = produce(store, i, c)
            ends[p] = off + 1
            row = want.setdefault(c, {"total": 0, "n": 0})
            row["total"] += i % 5 + 1
            row["n"] += 1
        wait = {"orders": ends}
        remote_keys = [c for c in COUNTRIES if view.partition_of(c) in remote.runner.tasks]
        assert remote_keys and len(remote_keys) < len(COUNTRIES)  # both workers hold keys
        for c in COUNTRIES:
            ans = router.get("shop", "revenue", c, wait_for=wait, timeout_s=30)
            assert ans.rows == [(c, want[c])]
            [p] = ans.token.offsets["orders"]  # the owning task's input offsets
            assert p == view.partition_of(c)
        # a range merges both workers' partitions, in key order, with all their offsets
        ans = router.range("shop", "revenue", "be", "it", wait_for=wait, timeout_s=30)
        assert ans.rows == sorted((k, v) for k, v in want.items() if "be" <= k <= "it")
        assert set(ans.token.offsets["orders"]) == {0, 1, 2, 3}
        # read-your-writes on a remote key after a produce
        c = remote_keys[0]
        p, off = produce(store, 999, c)
        ans = router.get("shop", "revenue", c, wait_for={"orders": {p: off + 1}}, timeout_s=30)
        assert ans.rows[0][1]["n"] == want[c]["n"] + 1
        # the local views alone cannot answer a remote key; nor can a router with no owners
        with pytest.raises(ViewUnavailable):
            view.get(c)
        blind = RoutedViews(store, lambda job: {})
        with pytest.raises(ViewUnavailable, match="advertises a query endpoint"):
            blind.get("shop", "revenue", c)
        # the endpoint's own errors come back as such
        with pytest.raises(UnknownView, match="has no view 'nope'"):
            ask(server.address, {"op": "get", "job": "shop", "view": "nope", "key": "x"}, 5)
    finally:
        remote.halt()
        local.halt()
        server.close()


def test_a_job_whose_workers_all_run_elsewhere_is_listed_and_queried(live):
    """No worker of the job in this process: the router learns the job from its group (a
    member advertising an endpoint), the view's shape from that worker (``describe``), and
    asks it for every partition."""
    store, co = live
    store.create_topic("orders", 3)
    remote_registry = ViewRegistry(store)
    server = ViewServer(remote_registry).start()
    remote = Worker(store, co, views=remote_registry, query_endpoint=server.address)
    try:
        wait_until(lambda: set(remote.runner.tasks) == {0, 1, 2}, "the worker to own all tasks")
        router = RoutedViews(
            store,
            lambda job: owners_from_group(co.describe_group(job)),
            jobs=lambda: [g for g, _ in co.list_groups()],
        )
        ends: dict[int, int] = {}
        for i in range(30):
            p, off = produce(store, i, COUNTRIES[i % 4])
            ends[p] = off + 1
        [info] = router.list_views()
        assert (info.job, info.name, info.served, info.served_elsewhere) == (
            "shop",
            "revenue",
            [],
            [0, 1, 2],
        )
        ans = router.get("shop", "revenue", "ch", wait_for={"orders": ends}, timeout_s=30)
        assert ans.rows == [("ch", {"total": sum(i % 5 + 1 for i in range(2, 30, 4)), "n": 7})]
        ans = router.range("shop", "revenue", wait_for={"orders": ends}, timeout_s=30)
        assert [k for k, _ in ans.rows] == ["at", "be", "ch", "de"]
        assert set(ans.token.offsets["orders"]) == {0, 1, 2}
        with pytest.raises(UnknownView, match="its views: revenue"):
            router.view("shop", "nope")
        with pytest.raises(UnknownView, match="nor a worker of it"):
            router.view("other", "revenue")
    finally:
        remote.halt()
        server.close()
