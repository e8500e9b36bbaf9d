"""A worked event-sourcing example: a small shop (products with stock, carts, sales).

The events topic ``shop-events`` is the source of truth; everything else is derived from it::

    with LogStore.open(path) as store:
        shop = Shop(store)
        shop.list_product("tea", "Green tea", "Sencha, loose leaf", price_cents=450)
        shop.restock("tea", 10)
        shop.add_to_cart("c1", "tea", 2)
        shop.check_out("c1", customer="ann")     # sells each line: stock goes down
        views = ShopViews(store, coordinator)    # four views, each a job
        views.catch_up()
        views.read_model.query("SELECT sku, stock FROM products")   # [("tea", 8)]
        views.search.search("sencha")                               # ["tea"]
        views.revenue()                                             # {"tea": {...}}

Aggregates (``streams.eventsourcing``: one ``Decider`` each, the single-writer handler decides):

- ``product/<sku>``: ``list`` (name, description, price_cents), ``restock`` (qty), ``reprice``
  (price_cents), ``sell`` (qty, customer, order) — rejected beyond the stock: two customers
  cannot both buy the last one;
- ``cart/<id>``: ``add`` (sku, qty, price_cents), ``remove`` (sku), ``check_out`` (customer) —
  an empty or checked-out cart cannot check out; a checked-out cart takes no more items.

``Shop.check_out`` is a small process manager: it checks the cart out (one command, the cart's
conflict point), then sells each line on its product; a line out of stock is recorded on the
cart as ``LineUnavailable``, so the history says what happened to every line.

Views, each a job over ``shop-events`` from offset 0:

- ``ProductsReadModel``: SQLite tables ``products`` and ``carts`` (``Stream.foreach``);
- ``ProductSearch``: an inverted index over product names and descriptions — SQLite's FTS5;
- ``SavedSearchHits``: saved searches over the events (``Shop.save_search``) and the events
  each matched — the stream search, ``.search(queries="shop-saved-searches")``;
- the running revenue per product: ``aggregate(revenue_cents=Sum, units=Sum, sales=Count)``
  written to the compacted topic ``shop-revenue`` (a job's table, no external store);
- ``CustomersView`` is the view "added later" in the tests: orders and spend per customer,
  caught up from the history.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping

from streams.errors import TopicAlreadyExists
from streams.eventsourcing.store import (
    Accepted,
    Command,
    CommandHandler,
    CommandRejected,
    Decider,
    Event,
)
from streams.eventsourcing.views import SqliteView, catch_up, view_job
from streams.jobs import JSON, TEXT, Count, Job, Sum
from streams.jobs.search import parse as parse_query
from streams.log.store import LogStore

TOPIC = "shop-events"
REVENUE_TOPIC = "shop-revenue"
SEARCHES_TOPIC = "shop-saved-searches"


def _positive_int(data: Mapping, name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise CommandRejected(f"{name} must be a positive whole number, not {value!r}")
    return value


# ---------------------------------------------------------------------- product


def decide_product(cmd: Command, state: dict | None) -> list[tuple[str, dict]]:
    d = cmd.data
    if cmd.type == "list":
        if state is not None:
            raise CommandRejected(f"{cmd.aggregate} is listed already")
        name = str(d.get("name") or "").strip()
        if not name:
            raise CommandRejected("a product needs a name")
        price = _positive_int(d, "price_cents")
        return [
            (
                "Listed",
                {"name": name, "description": str(d.get("description", "")), "price_cents": price},
            )
        ]
    if state is None:
        raise CommandRejected(f"{cmd.aggregate} is not listed")
    if cmd.type == "restock":
        return [("Restocked", {"qty": _positive_int(d, "qty")})]
    if cmd.type == "reprice":
        return [("Repriced", {"price_cents": _positive_int(d, "price_cents")})]
    if cmd.type == "sell":
        qty = _positive_int(d, "qty")
        if qty > state["stock"]:
            raise CommandRejected(f"{cmd.aggregate}: {qty} wanted, {state['stock']} in stock")
        return [
            (
                "Sold",
                {
                    "qty": qty,
                    "customer": str(d.get("customer", "")),
                    "order": str(d.get("order", "")),
                    "amount_cents": qty * state["price_cents"],
                },
            )
        ]
    raise CommandRejected(f"a product has no command {cmd.type!r}")


def evolve_product(state: dict | None, e: Event) -> dict | None:
    if e.type == "Listed":
        return {**e.data, "stock": 0}
    assert state is not None
    if e.type == "Restocked":
        return {**state, "stock": state["stock"] + e.data["qty"]}
    if e.type == "Repriced":
        return {**state, "price_cents": e.data["price_cents"]}
    if e.type == "Sold":
        return {**state, "stock": state["stock"] - e.data["qty"]}
    return state


# ---------------------------------------------------------------------- cart


def decide_cart(cmd: Command, state: dict) -> list[tuple[str, dict]]:
    d = cmd.data
    if cmd.type == "line_unavailable":  # the process manager records a line it could not sell
        if state["status"] == "open":
            raise CommandRejected(f"{cmd.aggregate} is not checked out")
        return [("LineUnavailable", {"sku": str(d.get("sku")), "reason": str(d.get("reason"))})]
    if state["status"] != "open":
        raise CommandRejected(f"{cmd.aggregate} is checked out")
    if cmd.type == "add":
        sku = str(d.get("sku") or "")
        if not sku:
            raise CommandRejected("an item needs a sku")
        return [
            (
                "ItemAdded",
                {
                    "sku": sku,
                    "qty": _positive_int(d, "qty"),
                    "price_cents": _positive_int(d, "price_cents"),
                },
            )
        ]
    if cmd.type == "remove":
        if d.get("sku") not in state["items"]:
            raise CommandRejected(f"{cmd.aggregate} holds no {d.get('sku')!r}")
        return [("ItemRemoved", {"sku": d["sku"], **state["items"][d["sku"]]})]
    if cmd.type == "check_out":
        if not state["items"]:
            raise CommandRejected(f"{cmd.aggregate} is empty")
        customer = str(d.get("customer") or "")
        if not customer:
            raise CommandRejected("checking out needs a customer")
        return [("CheckedOut", {"customer": customer, "items": state["items"]})]
    raise CommandRejected(f"a cart has no command {cmd.type!r}")


def evolve_cart(state: dict, e: Event) -> dict:
    items = dict(state["items"])
    if e.type == "ItemAdded":
        have = items.get(e.data["sku"], {"qty": 0})
        items[e.data["sku"]] = {
            "qty": have["qty"] + e.data["qty"],
            "price_cents": e.data["price_cents"],
        }
        return {**state, "items": items}
    if e.type == "ItemRemoved":
        items.pop(e.data["sku"], None)
        return {**state, "items": items}
    if e.type == "CheckedOut":
        return {**state, "status": "checked out", "customer": e.data["customer"]}
    return state  # LineUnavailable: history only


PRODUCT = Decider(lambda: None, decide_product, evolve_product)
CART = Decider(lambda: {"status": "open", "items": {}}, decide_cart, evolve_cart)
DECIDERS = {"product": PRODUCT, "cart": CART}


class Shop:
    """The shop's commands over a ``CommandHandler`` of ``shop-events``."""

    def __init__(self, store: LogStore, *, partitions: int = 3, topic: str = TOPIC):
        self.handler = CommandHandler(store, topic, DECIDERS, partitions=partitions)

    def close(self) -> None:
        self.handler.close()

    def product(self, sku: str) -> tuple[int, dict | None]:
        return self.handler.load(f"product/{sku}")

    def list_product(self, sku: str, name: str, description: str = "", *, price_cents: int):
        return self._do(
            f"product/{sku}", "list", name=name, description=description, price_cents=price_cents
        )

    def restock(self, sku: str, qty: int, *, expected_version: int | None = None) -> Accepted:
        return self._do(f"product/{sku}", "restock", expected_version, qty=qty)

    def reprice(self, sku: str, price_cents: int, *, expected_version: int | None = None):
        return self._do(f"product/{sku}", "reprice", expected_version, price_cents=price_cents)

    def sell(
        self,
        sku: str,
        qty: int,
        *,
        customer: str,
        order: str = "",
        expected_version: int | None = None,
    ):
        return self._do(
            f"product/{sku}", "sell", expected_version, qty=qty, customer=customer, order=order
        )

    def add_to_cart(self, cart: str, sku: str, qty: int) -> Accepted:
        """Add at the product's current price (read from its state: a query, not a lock)."""
        _, product = self.product(sku)
        if product is None:
            raise CommandRejected(f"product/{sku} is not listed")
        return self._do(f"cart/{cart}", "add", sku=sku, qty=qty, price_cents=product["price_cents"])

    def remove_from_cart(self, cart: str, sku: str) -> Accepted:
        return self._do(f"cart/{cart}", "remove", sku=sku)

    def check_out(self, cart: str, *, customer: str, expected_version: int | None = None) -> dict:
        """Check the cart out, then sell each line; returns ``{"sold": [...], "unavailable":
        [...]}`` (skus). Raises ``CommandRejected``/``ConcurrencyConflict`` if the cart cannot
        be checked out (nothing is sold then)."""
        done = self._do(f"cart/{cart}", "check_out", expected_version, customer=customer)
        items = done.events[-1].data["items"]
        sold, unavailable = [], []
        for sku, line in sorted(items.items()):
            try:
                self.sell(sku, line["qty"], customer=customer, order=f"cart/{cart}")
                sold.append(sku)
            except CommandRejected as exc:
                self._do(f"cart/{cart}", "line_unavailable", sku=sku, reason=str(exc))
                unavailable.append(sku)
        return {"sold": sold, "unavailable": unavailable}

    def save_search(self, search_id: str, query: str) -> None:
        """Save a search (``streams.jobs.search`` syntax, over the events' JSON: ``type:Sold
        AND data.customer:ann``) in the compacted topic ``shop-saved-searches``; the saved-
        search view lists the events each one matches. ``QueryError`` (saying where) if it
        does not parse: nothing is saved then."""
        parse_query(query)
        store = self.handler.store
        ensure_searches_topic(store)
        store.append(SEARCHES_TOPIC, json.dumps({"query": query}).encode(), search_id.encode())

    def _do(self, aggregate: str, ctype: str, expected: int | None = None, **data) -> Accepted:
        return self.handler.handle(Command(aggregate, ctype, data, expected))


# ---------------------------------------------------------------------- views


class ProductsReadModel(SqliteView):
    """Products (name, price, stock, units sold) and carts (status, customer, total)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS products (sku TEXT PRIMARY KEY, name TEXT NOT NULL,
        price_cents INTEGER NOT NULL, stock INTEGER NOT NULL, sold INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS carts (cart TEXT PRIMARY KEY, status TEXT NOT NULL,
        customer TEXT, items INTEGER NOT NULL, total_cents INTEGER NOT NULL,
        unavailable INTEGER NOT NULL);
    """
    TABLES = ("products", "carts")

    def project(self, db: sqlite3.Connection, e: Event) -> None:
        kind, ident = e.aggregate.split("/", 1)
        d = e.data
        if kind == "product":
            if e.type == "Listed":
                db.execute(
                    "INSERT INTO products VALUES (?, ?, ?, 0, 0)",
                    (ident, d["name"], d["price_cents"]),
                )
            elif e.type == "Restocked":
                db.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (d["qty"], ident))
            elif e.type == "Repriced":
                db.execute(
                    "UPDATE products SET price_cents = ? WHERE sku = ?", (d["price_cents"], ident)
                )
            elif e.type == "Sold":
                db.execute(
                    "UPDATE products SET stock = stock - ?, sold = sold + ? WHERE sku = ?",
                    (d["qty"], d["qty"], ident),
                )
            return
        db.execute("INSERT OR IGNORE INTO carts VALUES (?, 'open', NULL, 0, 0, 0)", (ident,))
        if e.type == "ItemAdded":
            db.execute(
                "UPDATE carts SET items = items + ?, total_cents = total_cents + ? WHERE cart = ?",
                (d["qty"], d["qty"] * d["price_cents"], ident),
            )
        elif e.type == "ItemRemoved":
            db.execute(
                "UPDATE carts SET items = items - ?, total_cents = total_cents - ? WHERE cart = ?",
                (d["qty"], d["qty"] * d["price_cents"], ident),
            )
        elif e.type == "CheckedOut":
            qty = sum(line["qty"] for line in d["items"].values())
            total = sum(line["qty"] * line["price_cents"] for line in d["items"].values())
            db.execute(
                "UPDATE carts SET status = 'checked out', customer = ?, items = ?,"
                " total_cents = ? WHERE cart = ?",
                (d["customer"], qty, total, ident),
            )
        elif e.type == "LineUnavailable":
            db.execute("UPDATE carts SET unavailable = unavailable + 1 WHERE cart = ?", (ident,))


class ProductSearch(SqliteView):
    """Full-text search over product names and descriptions: SQLite's FTS5 inverted index
    (the stream search, ``SavedSearchHits``, answers the other question: which events match
    each saved search)."""

    SCHEMA = """
    CREATE VIRTUAL TABLE IF NOT EXISTS product_text USING fts5(sku UNINDEXED, name, description);
    """
    TABLES = ("product_text",)

    def project(self, db: sqlite3.Connection, e: Event) -> None:
        kind, sku = e.aggregate.split("/", 1)
        if kind == "product" and e.type == "Listed":
            db.execute(
                "INSERT INTO product_text (sku, name, description) VALUES (?, ?, ?)",
                (sku, e.data["name"], e.data["description"]),
            )

    def search(self, words: str) -> list[str]:
        """Skus whose name or description match `words` (FTS5 query syntax), best first."""
        rows = self.query(
            "SELECT sku FROM product_text WHERE product_text MATCH ? ORDER BY rank", (words,)
        )
        return [r[0] for r in rows]


class SavedSearchHits(SqliteView):
    """The events each saved search matched: a job's ``.search(queries=...)`` (the stream
    search, a percolator) into SQLite. A hit is kept once (its primary key is the search and
    the event), so a replay applies nothing twice. As the stream search documents, a search
    applies to the events processed after it was read: a rebuild, which reads every saved
    search first, also finds the events that came before a search was saved."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS hits (search TEXT NOT NULL, aggregate TEXT NOT NULL,
        version INTEGER NOT NULL, type TEXT NOT NULL, PRIMARY KEY (search, aggregate, version));
    """
    TABLES = ("hits",)

    def apply(self, key: object, value: object, ts: int) -> bool:
        event = value["event"]  # type: ignore[index]
        with self.lock:
            cur = self.db.execute(
                "INSERT OR IGNORE INTO hits VALUES (?, ?, ?, ?)",
                (key, event["aggregate"], event["version"], event["type"]),
            )
            return cur.rowcount == 1

    def hits(self, search_id: str) -> list[tuple[str, int, str]]:
        return self.query(
            "SELECT aggregate, version, type FROM hits WHERE search = ?"
            " ORDER BY aggregate, version",
            (search_id,),
        )


def ensure_searches_topic(store: LogStore) -> None:
    try:
        store.create_topic(SEARCHES_TOPIC, 1, {"cleanup.policy": "compact"})
    except TopicAlreadyExists:
        pass


class CustomersView(SqliteView):
    """Orders and spend per customer (the view added later over the history)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS customers (customer TEXT PRIMARY KEY, lines INTEGER NOT NULL,
        spent_cents INTEGER NOT NULL);
    """
    TABLES = ("customers",)

    def project(self, db: sqlite3.Connection, e: Event) -> None:
        if e.type == "Sold":
            db.execute(
                "INSERT INTO customers VALUES (?, 1, ?) ON CONFLICT (customer) DO UPDATE SET"
                " lines = lines + 1, spent_cents = spent_cents + excluded.spent_cents",
                (e.data["customer"], e.data["amount_cents"]),
            )


def revenue_job(name: str = "shop-revenue", *, topic: str = TOPIC, to: str = REVENUE_TOPIC) -> Job:
    """The running total: revenue, units and sales per product, to the compacted `to`."""
    job = Job(name)
    (
        job.stream(topic, key=TEXT, value=JSON)
        .filter(lambda e: e["type"] == "Sold")
        .map(lambda e: {"sku": e["aggregate"].split("/", 1)[1], **e["data"]})
        .key_by("sku")
        .aggregate(
            name="revenue", revenue_cents=Sum("amount_cents"), units=Sum("qty"), sales=Count()
        )
        .to(to)
    )
    return job


def read_table(store: LogStore, topic: str) -> dict:
    """The latest value per key of a job's output topic (its table), tombstones removed."""
    out: dict = {}
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            records = store.read(topic, p, pos, max_records=1000)
            if not records:
                break
            for r in records:
                key = json.loads(r.key)
                if r.value is None:
                    out.pop(key, None)
                else:
                    out[key] = json.loads(r.value)
            pos = records[-1].offset + 1
    return out


class ShopViews:
    """The shop's four views, each a job over ``shop-events`` (``directory``: where the
    SQLite files go, in memory without it; `coordinator`: a ``GroupCoordinator`` keeping the
    jobs' offsets; `suffix` names a second, independent set — a rebuild)."""

    def __init__(
        self, store: LogStore, coordinator, directory: str | None = None, *, suffix: str = ""
    ):
        self.store, self.coordinator, self.suffix = store, coordinator, suffix
        self.durable = directory is not None

        def path(name: str) -> str:
            return os.path.join(directory, f"{name}{suffix}.sqlite3") if directory else ":memory:"

        self.read_model = ProductsReadModel(path("read-model"))
        self.search = ProductSearch(path("search"))
        self.saved_searches = SavedSearchHits(path("saved-searches"))
        self.revenue_topic = f"{REVENUE_TOPIC}{suffix}"
        ensure_searches_topic(store)
        percolate = Job(f"shop-saved-searches{suffix}")
        (
            percolate.stream(TOPIC, key=TEXT, value=JSON)
            .search(queries=SEARCHES_TOPIC)
            .foreach(self.saved_searches.apply)
        )
        self.jobs = [
            view_job(f"shop-read-model{suffix}", TOPIC, self.read_model.apply),
            view_job(f"shop-search{suffix}", TOPIC, self.search.apply),
            percolate,
            revenue_job(f"shop-revenue{suffix}", to=self.revenue_topic),
        ]

    def catch_up(self) -> int:
        """Run every view's job until it has read all of ``shop-events``. The SQLite views'
        jobs keep committed offsets only when their databases are files (in memory, a new
        process starts them empty: they must read from offset 0 again, which they can, being
        idempotent); the revenue job always does (its state is in its changelog)."""
        total = 0
        for job in self.jobs:
            keeps_offsets = self.durable or job is self.jobs[-1]
            total += catch_up(job, self.store, self.coordinator if keeps_offsets else None)
        return total

    def revenue(self) -> dict:
        if self.revenue_topic not in self.store.list_topics():
            return {}
        return read_table(self.store, self.revenue_topic)

    def state(self) -> dict:
        """Everything the views hold (what a rebuild must reproduce)."""
        return {
            "read_model": self.read_model.dump(),
            "search": self.search.dump(),
            "saved_searches": self.saved_searches.dump(),
            "revenue": self.revenue(),
        }

    def close(self) -> None:
        self.read_model.close()
        self.search.close()
        self.saved_searches.close()


def main() -> None:
    """``python -m streams.examples.shop``: a few commands on a scratch log, then the views."""
    import tempfile

    from streams.groups import GroupCoordinator

    with tempfile.TemporaryDirectory() as directory:
        store = LogStore.open(os.path.join(directory, "data"), background=False)
        coordinator = GroupCoordinator(store)
        coordinator.load()
        shop = Shop(store)
        try:
            shop.list_product("tea", "Green tea", "Sencha, loose leaf", price_cents=450)
            shop.list_product("pot", "Teapot", "Cast iron, for green tea", price_cents=3_900)
            shop.restock("tea", 10)
            shop.restock("pot", 1)
            shop.save_search("big-sales", "type:Sold AND data.amount_cents:>=1000")
            for cart, customer in (("c1", "ann"), ("c2", "bob")):
                shop.add_to_cart(cart, "tea", 2)
                shop.add_to_cart(cart, "pot", 1)
                print(f"{customer} checks out {cart}:", shop.check_out(cart, customer=customer))
            views = ShopViews(store, coordinator, directory)
            print("events read by the views:", views.catch_up())
            print("products:", views.read_model.query("SELECT * FROM products ORDER BY sku"))
            print("carts:", views.read_model.query("SELECT * FROM carts ORDER BY cart"))
            print("search 'green':", views.search.search("green"))
            print("saved search 'big-sales':", views.saved_searches.hits("big-sales"))
            print("revenue:", views.revenue())
            views.close()
        finally:
            shop.close()
            coordinator.close()
            store.close()


if __name__ == "__main__":
    main()
