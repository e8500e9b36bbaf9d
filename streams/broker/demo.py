"""Demo traffic: a background thread writing a small web shop's events, and two consumer groups.

`orders` (3 partitions, keyed by customer id, so one customer's orders stay in order) carries an
order's life: placed, then paid and shipped a little later; each payment also goes to
`payments`, in Avro through the schema registry (subject ``payments-value``). `page-views`,
`searches` and `clicks` (keyed by session id) carry a shop's browsing: views, searches with a
search id, and clicks on search results that name that search id (the demo's stream jobs pair
them). `customers` (compacted, 3 partitions keyed by customer id like `orders`, so the two are
co-partitioned) holds every customer's row, written once when the topic is new and then now and
then a customer moving country or tier (an update of the table). A few records per second:
enough to see offsets move and charts draw, little enough to leave a laptop idle.

Consumer groups: `order-fulfilment` reads orders slowly (so its lag shows) and
`search-analytics` reads searches and clicks, both committing as they go.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from dataclasses import dataclass

from streams.errors import StorageError

log = logging.getLogger(__name__)

DEMO_TOPIC_CONFIG = {"retention.ms": str(24 * 3600 * 1000)}  # a day of demo data, then trimmed


@dataclass(frozen=True)
class DemoTopic:
    name: str
    partitions: int


ORDERS = DemoTopic("orders", 3)
PAGE_VIEWS = DemoTopic("page-views", 6)
SEARCHES = DemoTopic("searches", 3)
CLICKS = DemoTopic("clicks", 3)
CUSTOMERS = DemoTopic("customers", 3)
# a payment for each paid order, in Avro through the schema registry (subject payments-value),
# as most teams' Kafka data is: the console decodes it, the demo job payments-by-method reads it
PAYMENTS = DemoTopic("payments", 3)
PAYMENTS_SUBJECT = "payments-value"
PAYMENT_SCHEMA = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop.payments",
    "doc": "A payment taken for an order (written by the demo when an order is paid).",
    "fields": [
        {"name": "payment_id", "type": "string"},
        {"name": "order_id", "type": "string"},
        {"name": "customer_id", "type": "string"},
        {"name": "amount", "type": "double", "doc": "in currency units"},
        {"name": "currency", "type": "string", "default": "EUR"},
        {
            "name": "method",
            "type": {
                "type": "enum",
                "name": "Method",
                "symbols": ["CARD", "PAYPAL", "BANK_TRANSFER", "VOUCHER"],
            },
        },
        {"name": "card_country", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
_METHODS = ["CARD", "CARD", "CARD", "PAYPAL", "BANK_TRANSFER", "VOUCHER"]
CUSTOMERS_CONFIG = {"cleanup.policy": "compact"}  # a table: the newest row per customer
N_CUSTOMERS = 200
_TIERS = ["standard", "standard", "standard", "gold", "platinum"]
_NAMES = ["Ada", "Bo", "Chen", "Dara", "Eli", "Femi", "Goran", "Hana", "Ines", "Jun", "Kofi"]
_QUERIES = ["espresso", "grinder", "decaf", "kettle", "filters", "mug", "cold brew", "beans"]

_PRODUCTS = [
    ("SKU-1001", "Espresso beans 1kg", 24.90),
    ("SKU-1002", "Pour-over kettle", 49.00),
    ("SKU-1003", "Ceramic mug", 12.50),
    ("SKU-1004", "Burr grinder", 139.00),
    ("SKU-1005", "Paper filters x100", 5.90),
    ("SKU-1006", "Cold brew jar", 29.00),
]
_PATHS = ["/", "/shop", "/shop/beans", "/shop/gear", "/cart", "/checkout", "/blog/brewing-guide"]
_REFERRERS = [None, None, "https://www.example.com/search", "https://news.example.org/coffee"]
_AGENTS = ["Firefox/128.0", "Chrome/126.0", "Safari/17.5", "Edg/126.0"]
_COUNTRIES = ["DE", "FR", "NL", "US", "GB", "SE", "ES", "JP"]


class DemoEvents:
    """Builds the next demo event; pure apart from its seeded random source and clock."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._order_seq = 0
        self._search_seq = 0
        self._open_orders: deque[dict] = deque(maxlen=50)
        self._recent_searches: deque[dict] = deque(maxlen=30)
        self._recent_click_sessions: deque[str] = deque(maxlen=30)
        self.payments: deque[dict] = deque(maxlen=50)  # PAYMENTS to write, as Avro records

    def customers(self, now_ms: int) -> list[tuple[str, bytes, bytes]]:
        """Every customer's first row, (topic, key, value) as `next` gives them."""
        return [self._customer(i, now_ms) for i in range(1, N_CUSTOMERS + 1)]

    def _customer(self, i: int, now_ms: int) -> tuple[str, bytes, bytes]:
        cid = f"cust-{i:04d}"
        row = {
            "customer_id": cid,
            "name": f"{self._rng.choice(_NAMES)} {i}",
            "country": self._rng.choice(_COUNTRIES),
            "tier": self._rng.choice(_TIERS),
            "ts": _iso(now_ms),
        }
        return CUSTOMERS.name, cid.encode(), _json(row)

    def next(self, now_ms: int) -> tuple[str, bytes, bytes]:
        """(topic, key, value) of the next event: orders, page views, searches, clicks and
        now and then a customer's new row."""
        roll = self._rng.random()
        if roll < 0.01:
            return self._customer(self._rng.randint(1, N_CUSTOMERS), now_ms)
        if roll < 0.2:
            return self._order_event(now_ms)
        if roll < 0.35:
            return self._search(now_ms)
        if roll < 0.45 and self._recent_searches:
            return self._click(now_ms)
        return self._page_view(now_ms)

    def _search(self, now_ms: int) -> tuple[str, bytes, bytes]:
        self._search_seq += 1
        session = f"sess-{self._rng.randint(1, 500):05d}"
        event = {
            "search_id": f"srch-{self._search_seq:07d}",
            "session_id": session,
            "query": self._rng.choice(_QUERIES),
            "results": [sku for sku, _, _ in self._rng.sample(_PRODUCTS, 3)],
            "ts": _iso(now_ms),
        }
        self._recent_searches.append(event)
        return SEARCHES.name, session.encode(), _json(event)

    def _click(self, now_ms: int) -> tuple[str, bytes, bytes]:
        search = self._rng.choice(list(self._recent_searches))
        event = {
            "search_id": search["search_id"],
            "session_id": search["session_id"],
            "sku": self._rng.choice(search["results"]),
            "position": self._rng.randint(1, 3),
            "ts": _iso(now_ms),
        }
        self._recent_click_sessions.append(search["session_id"])
        return CLICKS.name, search["session_id"].encode(), _json(event)

    def _order_event(self, now_ms: int) -> tuple[str, bytes, bytes]:
        if self._open_orders and self._rng.random() < 0.5:
            order = self._open_orders.popleft()
            status = "paid" if order["status"] == "placed" else "shipped"
            order = {**order, "status": status, "ts": _iso(now_ms)}
            if status == "paid":
                self._open_orders.append(order)
                self.payments.append(self._payment(order, now_ms))
        else:
            order = self._new_order(now_ms)
            self._open_orders.append(order)
        event = {"event": f"order_{order['status']}", **order}
        return ORDERS.name, order["customer_id"].encode(), _json(event)

    def _payment(self, order: dict, now_ms: int) -> dict:
        method = self._rng.choice(_METHODS)
        return {
            "payment_id": f"pay-{order['order_id']}",
            "order_id": order["order_id"],
            "customer_id": order["customer_id"],
            "amount": float(order.get("total", 0.0)),
            "currency": "EUR",
            "method": method,
            "card_country": self._rng.choice(_COUNTRIES) if method == "CARD" else None,
            "ts": now_ms,
        }

    def _new_order(self, now_ms: int) -> dict:
        self._order_seq += 1
        lines = [self._order_line() for _ in range(self._rng.randint(1, 3))]
        total = round(sum(line["qty"] * line["unit_price"] for line in lines), 2)
        clicked = self._recent_click_sessions
        if clicked and self._rng.random() < 0.5:  # half the orders follow a click on a result
            session = self._rng.choice(list(clicked))
        else:
            session = f"sess-{self._rng.randint(1, 500):05d}"
        return {
            "order_id": f"ord-{self._order_seq:06d}",
            "customer_id": f"cust-{self._rng.randint(1, 200):04d}",
            "session_id": session,
            "status": "placed",
            "items": lines,
            "total": total,
            "currency": "EUR",
            "ts": _iso(now_ms),
        }

    def _order_line(self) -> dict:
        sku, name, price = self._rng.choice(_PRODUCTS)
        return {"sku": sku, "name": name, "qty": self._rng.randint(1, 4), "unit_price": price}

    def _page_view(self, now_ms: int) -> tuple[str, bytes, bytes]:
        session = f"sess-{self._rng.randint(1, 500):05d}"
        event = {
            "session_id": session,
            "user_id": self._rng.choice([None, f"cust-{self._rng.randint(1, 200):04d}"]),
            "path": self._rng.choice(_PATHS),
            "referrer": self._rng.choice(_REFERRERS),
            "user_agent": self._rng.choice(_AGENTS),
            "country": self._rng.choice(_COUNTRIES),
            "duration_ms": int(self._rng.lognormvariate(8, 0.8)),
            "ts": _iso(now_ms),
        }
        return PAGE_VIEWS.name, session.encode(), _json(event)


DEMO_GROUP = "order-fulfilment"
DEMO_GROUPS = {  # group -> (topics, records per poll, client id): fulfilment is slow
    DEMO_GROUP: ((ORDERS.name,), 1, "fulfilment-1"),
    "search-analytics": ((SEARCHES.name, CLICKS.name), 50, "analytics-1"),
}


class DemoTraffic:
    """Runs `DemoEvents` into a store from a daemon thread until `stop()`.

    A daemon thread, because Python joins non-daemon threads *before* running atexit handlers,
    and the atexit handler is what stops this one.
    """

    def __init__(
        self,
        store,
        *,
        coordinator=None,
        records_per_second: float = 4.0,
        seed: int | None = None,
        schemas=None,
    ):
        self._store = store
        self._coordinator = coordinator
        self._schemas = schemas
        self._payments = None  # the Avro serde payments are written with (with a registry)
        self._interval = 1.0 / records_per_second
        self._events = DemoEvents(random.Random(seed))
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        ensure_demo_topics(self._store)
        parts = range(self._store.partition_count(CUSTOMERS.name))
        if all(self._store.offsets(CUSTOMERS.name, p)[1] == 0 for p in parts):  # a new table
            now_ms = int(time.time() * 1000)
            rows = self._events.customers(now_ms)
            self._store.append_batch(CUSTOMERS.name, [(v, k, (), now_ms) for _, k, v in rows])
        targets = [("tidelog-demo", self._run, ())]
        if self._coordinator is not None:
            for group, spec in DEMO_GROUPS.items():
                targets.append((f"tidelog-demo-{group}", self._consume, (group, *spec)))
        for name, target, args in targets:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        for t in self._threads:
            t.join(timeout)
            if t.is_alive():
                log.warning("%s thread did not stop within %.0f s", t.name, timeout)

    def _consume(self, group: str, topics: tuple[str, ...], per_poll: int, client_id: str):
        """One member of a demo consumer group, polling every half second."""
        from streams.client import Consumer

        consumer = Consumer(
            self._store,
            self._coordinator,
            group,
            client_id=client_id,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=1000,
        )
        consumer.subscribe(list(topics))
        try:
            while not self._stopping.wait(0.5):
                try:
                    consumer.poll(0, max_records=per_poll)
                except Exception:
                    if self._stopping.is_set():
                        return
                    log.exception("demo consumer: poll failed; retrying in 5 s")
                    self._stopping.wait(5.0)
        finally:
            consumer.close()

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self._produce_one()
            except StorageError:  # a full disk: its partition logged one line for the streak
                self._stopping.wait(5.0)
            except Exception:
                if self._stopping.is_set():
                    return
                log.exception("demo traffic: append failed; retrying in 5 s")
                self._stopping.wait(5.0)

    def _produce_one(self) -> None:
        now_ms = int(time.time() * 1000)
        topic, key, value = self._events.next(now_ms)
        self._store.append(topic, value, key=key, timestamp_ms=now_ms)
        payments = self._events.payments
        while payments:
            payment = payments.popleft()
            if self._schemas is None:
                continue  # no registry to write Avro through
            if self._payments is None:
                from streams.schemas.serdes import Avro

                self._payments = Avro(PAYMENTS_SUBJECT, PAYMENT_SCHEMA, registry=self._schemas)
            value = self._payments.serialize(payment)
            key = payment["customer_id"].encode()
            self._store.append(PAYMENTS.name, value, key=key, timestamp_ms=payment["ts"])


def ensure_demo_topics(store) -> None:
    """Create the demo topics that are missing; existing ones are left as they are."""
    from streams.errors import TopicAlreadyExists

    existing = set(store.list_topics())
    for topic in (ORDERS, PAGE_VIEWS, SEARCHES, CLICKS, CUSTOMERS, PAYMENTS):
        if topic.name in existing:
            continue
        config = CUSTOMERS_CONFIG if topic is CUSTOMERS else DEMO_TOPIC_CONFIG
        try:
            store.create_topic(topic.name, partitions=topic.partitions, config=config)
        except TopicAlreadyExists:
            pass


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _json(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()
