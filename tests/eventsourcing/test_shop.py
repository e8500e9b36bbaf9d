"""The event-sourced shop (streams.examples.shop) on a real LogStore: commands validated against
state, optimistic concurrency under real threads, views derived by jobs, rebuilt from offset 0,
and a view added later caught up from the history."""

from __future__ import annotations

import json
import random
import threading

import pytest

from streams.eventsourcing import (
    Command,
    CommandHandler,
    CommandRejected,
    ConcurrencyConflict,
    OwnershipError,
    ViewGap,
    catch_up,
    view_job,
)
from streams.examples.shop import (
    SEARCHES_TOPIC,
    TOPIC,
    CustomersView,
    ProductsReadModel,
    Shop,
    ShopViews,
)
from streams.groups import GroupCoordinator
from streams.jobs import JSON, Job
from streams.jobs.search import QueryError
from streams.jobs.testing import TestDriver
from streams.log import LogStore


@pytest.fixture
def store(tmp_path):
    s = LogStore.open(tmp_path / "data", background=False)
    yield s
    s.close()


@pytest.fixture
def coordinator(store):
    c = GroupCoordinator(store)
    c.load()
    yield c
    c.close()


@pytest.fixture
def shop(store):
    s = Shop(store)
    yield s
    s.close()


def events(store: LogStore, aggregate: str | None = None) -> list[dict]:
    out = []
    for p in range(store.partition_count(TOPIC)):
        pos, end = store.offsets(TOPIC, p)
        while pos < end:
            recs = store.read(TOPIC, p, pos)
            out.extend(json.loads(r.value) for r in recs)
            pos = recs[-1].offset + 1
    return [e for e in out if aggregate is None or e["aggregate"] == aggregate]


def end_offsets(store: LogStore) -> list[int]:
    return [store.offsets(TOPIC, p)[1] for p in range(store.partition_count(TOPIC))]


def test_commands_are_validated_against_state_and_rejected_ones_write_nothing(store, shop):
    shop.list_product("tea", "Green tea", "Sencha, loose leaf", price_cents=450)
    shop.restock("tea", 3)
    before = end_offsets(store)
    for bad in (
        lambda: shop.sell("tea", 4, customer="ann"),  # beyond the stock
        lambda: shop.list_product("tea", "Again", price_cents=1),  # listed already
        lambda: shop.restock("coffee", 1),  # not listed
        lambda: shop.restock("tea", 0),  # not positive
        lambda: shop.check_out("c1", customer="ann"),  # empty cart
    ):
        with pytest.raises(CommandRejected):
            bad()
    assert end_offsets(store) == before
    shop.add_to_cart("c1", "tea", 2)
    assert shop.check_out("c1", customer="ann") == {"sold": ["tea"], "unavailable": []}
    with pytest.raises(CommandRejected, match="checked out"):
        shop.add_to_cart("c1", "tea", 1)
    version, tea = shop.product("tea")
    assert (version, tea["stock"]) == (3, 1)
    assert [e["type"] for e in events(store, "product/tea")] == ["Listed", "Restocked", "Sold"]
    assert [e["version"] for e in events(store, "product/tea")] == [1, 2, 3]


def test_conflicting_commands_from_many_threads_at_most_one_wins_per_version(store, shop):
    """Every round, 16 threads read the same version, then all send a command expecting it:
    exactly one wins and the others get ConcurrencyConflict; the log holds each version once."""
    shop.list_product("tea", "Green tea", price_cents=450)
    shop.restock("tea", 1_000)
    threads, rounds = 16, 25
    read_done = threading.Barrier(threads)
    wins: list[tuple[int, int]] = []  # (expected version, thread)
    conflicts: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            for _ in range(rounds):
                version, _ = shop.product("tea")
                read_done.wait()  # everyone has read before anyone sends
                try:
                    shop.sell("tea", 1, customer=f"c{n}", expected_version=version)
                    with lock:
                        wins.append((version, n))
                except ConcurrencyConflict as exc:
                    with lock:
                        conflicts.append(exc.expected)
                read_done.wait()  # the round's commands are all answered
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            read_done.abort()

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors
    by_version: dict[int, int] = {}
    for version, _ in wins:
        by_version[version] = by_version.get(version, 0) + 1
    assert len(wins) == rounds and set(by_version.values()) == {1}
    assert len(conflicts) == rounds * (threads - 1)
    versions = [e["version"] for e in events(store, "product/tea")]
    assert versions == list(range(1, 3 + rounds))
    assert shop.product("tea")[1]["stock"] == 1_000 - rounds


def test_the_last_one_in_stock_is_sold_once_whatever_the_threads(store, shop):
    shop.list_product("lamp", "Lamp", price_cents=2_000)
    shop.restock("lamp", 1)
    start = threading.Barrier(12)
    sold, rejected = [], []

    def buy(n: int) -> None:
        start.wait()
        try:
            shop.sell("lamp", 1, customer=f"c{n}")
            sold.append(n)
        except CommandRejected:
            rejected.append(n)

    pool = [threading.Thread(target=buy, args=(n,)) for n in range(12)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert (len(sold), len(rejected)) == (1, 11)
    assert [e["type"] for e in events(store, "product/lamp")].count("Sold") == 1


def test_a_new_handler_rebuilds_from_the_log_and_a_retried_command_is_not_applied_twice(store):
    first = Shop(store)
    first.list_product("tea", "Green tea", price_cents=450)
    first.restock("tea", 5)
    cmd = Command("product/tea", "sell", {"qty": 2, "customer": "ann"})
    answer = first.handler.handle(cmd)
    first.close()
    second = Shop(store)
    try:
        assert second.product("tea")[0] == 3 and second.product("tea")[1]["stock"] == 3
        assert second.handler.handle(cmd).version == answer.version  # the first answer again
        assert second.product("tea")[1]["stock"] == 3
        second.restock("tea", 1, expected_version=3)
        with pytest.raises(ConcurrencyConflict, match="version 4, the command expected 3"):
            second.restock("tea", 1, expected_version=3)
    finally:
        second.close()


def test_one_handler_owns_the_topic_and_a_foreign_writer_is_detected(store, shop):
    with pytest.raises(OwnershipError, match="already has a command handler"):
        CommandHandler(store, TOPIC, shop.handler.deciders)
    shop.list_product("tea", "Green tea", price_cents=450)
    p = shop.handler.partition_of("product/tea")
    forged = {"aggregate": "product/tea", "version": 1, "type": "Restocked", "data": {"qty": 9}}
    forged.update(command="x", ts_ms=0)
    store.append(TOPIC, json.dumps(forged).encode(), b"product/tea", partition=p)
    with pytest.raises(OwnershipError, match="something other than its command handler"):
        shop.restock("tea", 1)


def workload(shop: Shop, seed: int, n: int) -> list:
    """`n` random commands (many rejected); returns the accepted answers."""
    rnd = random.Random(seed)
    skus = [f"sku{i}" for i in range(8)]
    words = ["green", "tea", "lamp", "oak", "brass", "linen", "cup", "wool"]
    accepted = []
    for i in range(n):
        sku = rnd.choice(skus)
        cart = f"cart{rnd.randrange(12)}"
        action = rnd.random()
        try:
            if action < 0.1:
                desc = " ".join(rnd.sample(words, 3))
                accepted.append(shop.list_product(sku, sku.upper(), desc, price_cents=100 + i))
            elif action < 0.25:
                accepted.append(shop.restock(sku, rnd.randint(1, 4)))
            elif action < 0.3:
                accepted.append(shop.reprice(sku, rnd.randint(50, 900)))
            elif action < 0.55:
                accepted.append(shop.sell(sku, rnd.randint(1, 3), customer=f"cust{i % 5}"))
            elif action < 0.8:
                accepted.append(shop.add_to_cart(cart, sku, rnd.randint(1, 2)))
            elif action < 0.88:
                accepted.append(shop.remove_from_cart(cart, sku))
            else:
                shop.check_out(cart, customer=f"cust{i % 5}")
        except CommandRejected:
            pass
    return accepted


def test_views_rebuilt_from_offset_zero_give_the_same_state(store, coordinator, shop, tmp_path):
    shop.save_search("bulk", "type:Sold AND data.qty:>=2")
    shop.save_search("green", "type:Listed AND data.description:green")
    views = ShopViews(store, coordinator, str(tmp_path))
    for seed in range(4):  # the views follow the log while commands keep coming
        workload(shop, seed, 150)
        views.catch_up()
    live = views.state()
    # the read model agrees with the aggregates the handler holds
    for sku, price, stock, _sold in [r[:1] + r[2:] for r in live["read_model"]["products"]]:
        _, product = shop.product(sku)
        assert (product["price_cents"], product["stock"]) == (price, stock)
    sold = [e for e in events(store) if e["type"] == "Sold"]
    assert sold and live["revenue"]
    assert sum(r["revenue_cents"] for r in live["revenue"].values()) == sum(
        e["data"]["amount_cents"] for e in sold
    )
    assert live["search"]["product_text"]
    bulk = [(e["aggregate"], e["version"]) for e in sold if e["data"]["qty"] >= 2]
    assert [h[:2] for h in views.saved_searches.hits("bulk")] == sorted(bulk)
    assert views.saved_searches.hits("green")
    rebuilt = ShopViews(store, coordinator, str(tmp_path), suffix="-rebuild")
    rebuilt.catch_up()
    assert rebuilt.state() == live
    # a restart of the live views continues where they were: nothing counted twice
    views.catch_up()
    assert views.state() == live
    views.close()
    rebuilt.close()


def test_search_view_finds_products_by_words(store, coordinator, shop):
    shop.list_product("tea", "Green tea", "Sencha, loose leaf", price_cents=450)
    shop.list_product("pot", "Teapot", "Cast iron, holds green tea", price_cents=3_900)
    shop.list_product("lamp", "Desk lamp", "Brass", price_cents=2_000)
    views = ShopViews(store, coordinator)
    views.catch_up()
    assert sorted(views.search.search("green")) == ["pot", "tea"]
    assert views.search.search("brass") == ["lamp"]
    views.close()


def test_saved_searches_through_the_stream_search(store, coordinator, shop):
    with pytest.raises(QueryError, match="ends too early"):
        shop.save_search("bad", "type:(Sold")
    shop.save_search("pricey", "type:Listed AND data.price_cents:[1000 TO *]")
    shop.save_search("ann", "type:Sold AND data.customer:ann")
    shop.list_product("tea", "Green tea", price_cents=450)
    shop.list_product("pot", "Teapot", price_cents=3_900)
    shop.restock("tea", 5)
    shop.sell("tea", 1, customer="ann")
    shop.sell("tea", 1, customer="bob")
    views = ShopViews(store, coordinator)
    views.catch_up()
    assert views.saved_searches.hits("pricey") == [("product/pot", 1, "Listed")]
    assert views.saved_searches.hits("ann") == [("product/tea", 3, "Sold")]
    assert store.offsets(SEARCHES_TOPIC, 0)[1] == 2  # the bad one was not saved
    views.close()


def customers_oracle(store: LogStore) -> list[tuple[str, int, int]]:
    rows: dict[str, list[int]] = {}
    for e in events(store):
        if e["type"] == "Sold":
            row = rows.setdefault(e["data"]["customer"], [0, 0])
            row[0] += 1
            row[1] += e["data"]["amount_cents"]
    return sorted((c, n, cents) for c, (n, cents) in rows.items())


def test_a_view_added_later_catches_up_from_the_history(store, coordinator, shop):
    workload(shop, 7, 400)
    assert customers_oracle(store)
    later = CustomersView()
    job = view_job("shop-customers", TOPIC, later.apply)
    assert catch_up(job, store, coordinator) == len(events(store))
    assert later.query("SELECT * FROM customers ORDER BY customer") == customers_oracle(store)
    # it then follows new commands like the other views
    workload(shop, 8, 200)
    assert catch_up(job, store, coordinator) > 0
    assert later.query("SELECT * FROM customers ORDER BY customer") == customers_oracle(store)
    later.close()


def test_foreach_calls_the_function_for_every_record():
    seen = []
    job = Job("each")
    job.stream("in", value=JSON).filter(lambda v: v["n"] % 2).foreach(
        lambda k, v, ts: seen.append((k, v["n"], ts))
    )
    driver = TestDriver(job)
    for n in range(5):
        driver.pipe("in", f"k{n}", {"n": n}, ts=n)
    assert seen == [("k1", 1, 1), ("k3", 3, 3)]


PROCESS_SCRIPT = """
import sys
from streams.errors import DataDirLocked
from streams.eventsourcing import ConcurrencyConflict
from streams.examples.shop import Shop
from streams.log import LogStore

try:
    store = LogStore.open(sys.argv[1], background=False)
except DataDirLocked:
    print("locked")
    sys.exit(0)
try:
    shop = Shop(store)
    try:
        shop.sell("tea", 1, customer=sys.argv[2], expected_version=2)
        print("won")
    except ConcurrencyConflict:
        print("conflict")
finally:
    store.close()
"""


def test_conflicting_commands_from_many_processes_at_most_one_wins(tmp_path):
    """Processes cannot share a writer: the data directory's lock lets one open the log at a
    time, and each one that does rebuilds the state from the log before deciding — so of six
    processes sending a command against version 2, exactly one wins."""
    import subprocess
    import sys

    from tests.kafka_servers import REPO_ROOT

    path = tmp_path / "shared"
    with LogStore.open(path, background=False) as s:
        shop = Shop(s)
        shop.list_product("tea", "Green tea", price_cents=450)
        shop.restock("tea", 10)
        shop.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS_SCRIPT, str(path), f"p{n}"],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outcomes.append(out.strip())
    assert outcomes.count("won") == 1, outcomes
    assert set(outcomes) <= {"won", "conflict", "locked"}
    with LogStore.open(path, background=False) as s:
        tea = events(s, "product/tea")
        assert [e["version"] for e in tea] == [1, 2, 3]
        assert tea[-1]["type"] == "Sold"


def test_a_sqlite_view_applies_a_replayed_event_once_and_refuses_a_gap(store, shop):
    """The runner is at-least-once: a view job run again from offset 0 (no committed offsets)
    sees every event again, and the view applies none twice; a missing version is an error."""
    workload(shop, 3, 200)
    view = ProductsReadModel()
    job = view_job("shop-once", TOPIC, view.apply)
    catch_up(job, store)
    once = view.dump()
    assert catch_up(job, store) == len(events(store))  # everything read again ...
    assert view.dump() == once  # ... and nothing applied twice
    first = events(store)[0]
    later = {**first, "aggregate": "product/new", "version": 2}
    with pytest.raises(ViewGap, match="product/new: event version 2 after 0"):
        view.apply("product/new", later, 0)
    assert view.dump() == once
    view.close()


def test_views_in_memory_are_rebuilt_whole_by_the_next_process(store, coordinator, shop):
    """In-memory SQLite views start empty in a new process: their jobs read from offset 0
    again instead of resuming at committed offsets (which would leave them empty)."""
    workload(shop, 11, 150)
    first = ShopViews(store, coordinator)
    first.catch_up()
    before = first.state()
    first.close()
    second = ShopViews(store, coordinator)  # as a restarted process would
    second.catch_up()
    assert second.state() == before and before["read_model"]["products"]
    second.close()
