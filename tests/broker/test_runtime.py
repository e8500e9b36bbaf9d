"""The broker runtime and its demo traffic (no Django involved)."""

from __future__ import annotations

import json
import random
import time

from streams.broker.demo import (
    CLICKS,
    CUSTOMERS,
    ORDERS,
    PAGE_VIEWS,
    SEARCHES,
    DemoEvents,
    ensure_demo_topics,
)
from streams.broker.runtime import Broker


def _wait_for_records(store, topic: str, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        total = sum(p.end_offset for p in store.describe_topic(topic).partitions)
        if total:
            return total
        time.sleep(0.1)
    return 0


def test_demo_traffic_creates_topics_and_writes_json_events(tmp_path):
    with Broker.open(tmp_path, demo=True) as broker:
        store = broker.store
        topics = store.list_topics(include_internal=False)
        assert {"clicks", "customers", "orders", "page-views", "searches"} <= set(topics)
        # and what the demo's stream jobs write (streams/broker/demo_jobs.py)
        assert {"orders-enriched", "ctr-by-query", "revenue-by-country"} <= set(topics)
        assert len(store.describe_topic("orders").partitions) == 3
        assert len(store.describe_topic("page-views").partitions) == 6
        assert _wait_for_records(store, "page-views") > 0

        partition = next(p for p in store.describe_topic("page-views").partitions if p.end_offset)
        record = store.read("page-views", partition.partition, partition.log_start_offset)[0]
        event = json.loads(record.value)
        assert event["session_id"] == record.key.decode()
        assert event["path"].startswith("/")


def test_close_stops_the_traffic_and_releases_the_directory(tmp_path):
    broker = Broker.open(tmp_path, demo=True)
    broker.close()
    broker.close()  # idempotent
    assert broker.closed

    with Broker.open(tmp_path, demo=False) as reopened:  # the lock was released
        before = [p.end_offset for p in reopened.store.describe_topic("orders").partitions]
        time.sleep(0.6)
        after = [p.end_offset for p in reopened.store.describe_topic("orders").partitions]
        assert before == after


def test_existing_demo_topics_are_left_alone(tmp_path):
    with Broker.open(tmp_path, demo=False) as broker:
        broker.store.create_topic("orders", partitions=5)
        ensure_demo_topics(broker.store)
        assert len(broker.store.describe_topic("orders").partitions) == 5
        assert len(broker.store.describe_topic("page-views").partitions) == 6


def test_orders_are_keyed_by_customer_and_follow_an_order_life():
    events = DemoEvents(random.Random(7))
    produced = [events.next(1_700_000_000_000 + i) for i in range(400)]

    orders = [(key, json.loads(value)) for topic, key, value in produced if topic == ORDERS.name]
    assert {topic for topic, _, _ in produced} <= {
        ORDERS.name,
        PAGE_VIEWS.name,
        SEARCHES.name,
        CLICKS.name,
        CUSTOMERS.name,
    }
    assert all(key.decode() == order["customer_id"] for key, order in orders)
    seen: dict[str, list[str]] = {}
    for _, order in orders:
        seen.setdefault(order["order_id"], []).append(order["event"])
    assert all(
        life == ["order_placed", "order_paid", "order_shipped"][: len(life)]
        for life in seen.values()
    )
    assert any(len(life) == 3 for life in seen.values())


def test_demo_consumer_group_commits_and_shows_in_the_coordinator(tmp_path):
    import time

    from streams.broker.demo import DEMO_GROUP
    from streams.groups import group_lag

    with Broker.open(tmp_path, demo=True) as broker:
        deadline = time.time() + 15
        while time.time() < deadline and not broker.coordinator.committed(DEMO_GROUP):
            time.sleep(0.1)
        assert broker.coordinator.committed(DEMO_GROUP)
        desc = broker.coordinator.describe_group(DEMO_GROUP)
        assert desc.state == "Stable" and desc.members[0].client_id == "fulfilment-1"
        lag = group_lag(broker.coordinator, broker.store, DEMO_GROUP)
        assert lag.topics == ["orders"]


def test_clicks_refer_to_earlier_searches_of_the_same_session():
    events = DemoEvents(random.Random(3))
    produced = [events.next(1_700_000_000_000 + i) for i in range(600)]
    searches = {}
    clicks = 0
    for topic, key, value in produced:
        event = json.loads(value)
        if topic == SEARCHES.name:
            searches[event["search_id"]] = event
        elif topic == CLICKS.name:
            clicks += 1
            search = searches[event["search_id"]]  # a click follows its search
            assert key.decode() == event["session_id"] == search["session_id"]
            assert event["sku"] in search["results"]
    assert clicks > 10 and len(searches) > 10


def test_both_demo_consumer_groups_run(tmp_path):
    import time

    from streams.broker.demo import DEMO_GROUPS

    with Broker.open(tmp_path, demo=True) as broker:
        deadline = time.time() + 20
        while time.time() < deadline and not all(
            broker.coordinator.committed(g) for g in DEMO_GROUPS
        ):
            time.sleep(0.2)
        for group, (topics, _, _) in DEMO_GROUPS.items():
            committed_topics = {t for t, _ in broker.coordinator.committed(group)}
            assert committed_topics and committed_topics <= set(topics), group
