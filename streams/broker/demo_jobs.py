"""The demo's stream jobs: the seed's (DDIA ch. 11) ideas over the demo shop's own data.

- ``enrich-orders`` (stream–table join): each order joined with the `customers` table as it
  stood at the order's time (an as-of join over the compacted topic's changelog; a customer
  who moves later does not rewrite earlier orders), written to `orders-enriched`.
- ``search-ctr`` (stream–stream join, the book's example): each click joined to its search
  (same search id) within 10 minutes; clicks and searches counted per query and the two
  running counts joined (a table–table join) into `ctr-by-query`, compacted: per query
  ``{"searches", "clicks", "ctr"}`` with ``ctr = clicks / searches`` (clicks on results per
  search).
- ``revenue-by-country`` (windowed aggregate into a compacted topic): placed orders of
  `orders-enriched` summed per customer country per 1-minute window, updated as orders come
  in (``emit="updates"``), into `revenue-by-country` (compacted: the current window of each
  country); orders that come after their window closed go to `revenue-late-orders`.
- ``session-activity`` + ``abandoned-searches`` (complex event processing): searches, clicks
  and placed orders tagged with their kind and keyed by session into `session-activity`; then
  per session the pattern "a search, then a click on one of its results, and no order within
  10 minutes of the search" (``Pattern.begin("search").followed_by("click")
  .not_followed_by("order").within(10 min)``, on event time), each match written to
  `abandoned-searches` once the 10 minutes have passed.

The demo also saves a search over `page-views` (slow checkout pages), so the Searches page has
one to show (``ensure_demo_saved_search``).

Event times are the records' timestamps (the demo writes them as it goes). The topics the
jobs write are created here first, so the tables are compacted.
"""

from __future__ import annotations

import logging

from streams.broker.demo import (
    CLICKS,
    CUSTOMERS,
    DEMO_TOPIC_CONFIG,
    ORDERS,
    PAYMENT_SCHEMA,
    PAYMENTS,
    PAYMENTS_SUBJECT,
    SEARCHES,
)
from streams.errors import TopicAlreadyExists
from streams.jobs import JSON, TEXT, Count, Job, Pattern, Sum, Tumbling, field
from streams.jobs.embedded import EmbeddedJobs, JobSpec

log = logging.getLogger(__name__)

ENRICHED = "orders-enriched"
CTR = "ctr-by-query"
REVENUE = "revenue-by-country"
REVENUE_LATE = "revenue-late-orders"
SESSION_ACTIVITY = "session-activity"
ABANDONED = "abandoned-searches"
PAYMENTS_BY_METHOD = "payments-by-method"
COMPACT = {"cleanup.policy": "compact"}
OUTPUT_TOPICS = {  # topic -> config; 3 partitions, as their inputs
    ENRICHED: DEMO_TOPIC_CONFIG,
    CTR: COMPACT,
    REVENUE: COMPACT,
    REVENUE_LATE: DEMO_TOPIC_CONFIG,
    SESSION_ACTIVITY: DEMO_TOPIC_CONFIG,
    ABANDONED: DEMO_TOPIC_CONFIG,
    PAYMENTS_BY_METHOD: COMPACT,
}
CLICK_WINDOW_MS = 10 * 60 * 1000
GRACE_MS = 5_000  # records are stamped as written; repartitioning mixes them a little


def enrich_orders() -> Job:
    job = Job("enrich-orders")
    customers = job.table(CUSTOMERS.name, key=TEXT, value=JSON)
    orders = job.stream(ORDERS.name, key=TEXT, value=JSON)
    orders.join(
        customers, how="left", grace_ms=GRACE_MS, joiner=_with_customer, name="customer"
    ).to(ENRICHED, key=TEXT)
    return job


def _with_customer(order: dict, customer: dict | None) -> dict:
    c = customer or {}
    return {
        **order,
        "customer": {k: c.get(k) for k in ("name", "country", "tier")} if customer else None,
        "country": c.get("country", "unknown"),
    }


def search_ctr() -> Job:
    job = Job("search-ctr")
    searches = job.stream(SEARCHES.name, key=TEXT, value=JSON)
    clicks = job.stream(CLICKS.name, key=TEXT, value=JSON)
    clicked = searches.key_by("search_id").join(
        clicks.key_by("search_id"),
        within=CLICK_WINDOW_MS,
        grace_ms=GRACE_MS,
        joiner=lambda s, c: {"query": s["query"], "search_id": s["search_id"], "sku": c["sku"]},
        name="clicked",
    )
    per_query = searches.key_by("query").aggregate(name="searches", searches=Count())
    clicks_per_query = clicked.key_by("query").aggregate(name="clicks", clicks=Count())
    per_query.join(clicks_per_query, how="left", joiner=_ctr, name="ctr").to(CTR, key=TEXT)
    return job


def _ctr(searched: dict, clicked: dict | None) -> dict:
    n, k = searched["searches"], (clicked or {}).get("clicks", 0)
    return {"searches": n, "clicks": k, "ctr": round(k / n, 4) if n else None}


def revenue_by_country() -> Job:
    job = Job("revenue-by-country")
    orders = job.stream(ENRICHED, key=TEXT, value=JSON)
    totals = (
        orders.filter(lambda o: o.get("event") == "order_placed")
        .key_by("country")
        .window(Tumbling(60_000), grace_ms=GRACE_MS)
        .aggregate(name="totals", emit="updates", revenue_eur=Sum("total"), orders=Count())
    )
    totals.map(_rounded).to(REVENUE, key=TEXT)
    totals.late().to(REVENUE_LATE, key=TEXT)
    return job


def _rounded(total: dict) -> dict:
    return {**total, "revenue_eur": round(total["revenue_eur"], 2)}


def payments_by_method() -> Job:
    """Payments (Avro, read with the registry's schemas) per method per minute."""
    from streams.jobs.serde import Avro

    job = Job("payments-by-method")
    payments = job.stream(PAYMENTS.name, key=TEXT, value=Avro(PAYMENTS_SUBJECT, PAYMENT_SCHEMA))
    totals = (
        payments.key_by("method")
        .window(Tumbling(60_000), grace_ms=GRACE_MS)
        .aggregate(name="methods", emit="updates", payments=Count(), amount_eur=Sum("amount"))
    )
    totals.map(lambda t: {**t, "amount_eur": round(t["amount_eur"], 2)}).to(
        PAYMENTS_BY_METHOD, key=TEXT
    )
    return job


def session_activity() -> Job:
    """Searches, clicks and placed orders as one stream of session events (keyed by session)."""
    job = Job("session-activity")
    for topic, kind in ((SEARCHES, "search"), (CLICKS, "click"), (ORDERS, "order")):
        events = job.stream(topic.name, key=TEXT, value=JSON)
        if topic is ORDERS:
            events = events.filter(lambda o: o.get("event") == "order_placed" and "session_id" in o)
        events.map(lambda v, kind=kind: _session_event(kind, v)).key_by("session_id").to(
            SESSION_ACTIVITY, key=TEXT
        )
    return job


def _session_event(kind: str, v: dict) -> dict:
    keep = ("session_id", "search_id", "query", "sku", "order_id", "total")
    return {"kind": kind, **{k: v[k] for k in keep if k in v}}


# conditions on the event alone compiled (field(...) == ...), as streams.jobs.cep recommends;
# the click's, which looks at the matched search, a function
ABANDONED_PATTERN = (
    Pattern.begin("search", where=field("kind") == "search")
    .followed_by(
        "click",
        where=lambda e, m: e["kind"] == "click" and e["search_id"] == m["search"][0]["search_id"],
    )
    .not_followed_by("order", where=field("kind") == "order")
    .within(CLICK_WINDOW_MS)
)


def abandoned_searches() -> Job:
    job = Job("abandoned-searches")
    activity = job.stream(SESSION_ACTIVITY, key=TEXT, value=JSON)
    activity.match(ABANDONED_PATTERN, out_of_orderness_ms=GRACE_MS, name="abandoned").map(
        _abandoned
    ).to(ABANDONED, key=TEXT)
    return job


def _abandoned(match: dict) -> dict:
    search, click = match["search"][0], match["click"][0]
    return {
        "session_id": search["session_id"],
        "search_id": search["search_id"],
        "query": search["query"],
        "clicked_sku": click["sku"],
    }


DEMO_JOBS = [
    JobSpec(
        "payments-by-method",
        payments_by_method,
        "Avro through the schema registry: payments (subject payments-value) counted and "
        f"summed per method per minute → {PAYMENTS_BY_METHOD} (compacted)",
    ),
    JobSpec(
        "enrich-orders",
        enrich_orders,
        "Stream–table join: each order with its customer's row (country, tier) as of the "
        f"order's time → {ENRICHED}",
    ),
    JobSpec(
        "search-ctr",
        search_ctr,
        "Stream–stream join: clicks joined to their search within 10 minutes; click-through "
        f"rate per query (clicks / searches) → {CTR} (compacted)",
    ),
    JobSpec(
        "revenue-by-country",
        revenue_by_country,
        "Windowed aggregate: revenue (EUR) and orders per customer country per minute, "
        f"updated as orders come in → {REVENUE} (compacted); late orders → {REVENUE_LATE}",
    ),
    JobSpec(
        "session-activity",
        session_activity,
        "Searches, clicks and placed orders as one stream of session events, keyed by "
        f"session → {SESSION_ACTIVITY}",
    ),
    JobSpec(
        "abandoned-searches",
        abandoned_searches,
        "Complex event processing: per session, a search, a click on one of its results and "
        f"no order within 10 minutes of the search → {ABANDONED}",
    ),
]

DEMO_SAVED_SEARCH = {
    "name": "slow checkout page views",
    "topic": "page-views",
    "query": 'path:"/checkout" AND duration_ms:[8000 TO *]',
}


def ensure_demo_saved_search(store) -> None:
    """Save the demo's search over page views unless one of that name exists."""
    from streams.jobs.saved import SavedSearches

    saved = SavedSearches(store)
    if not any(s.name == DEMO_SAVED_SEARCH["name"] for s in saved.list()):
        saved.save(**DEMO_SAVED_SEARCH)


def ensure_job_topics(store) -> None:
    """Create the demo jobs' output topics that are missing (the tables compacted)."""
    existing = set(store.list_topics())
    for topic, config in OUTPUT_TOPICS.items():
        if topic not in existing:
            try:
                store.create_topic(topic, partitions=ORDERS.partitions, config=config)
            except TopicAlreadyExists:
                pass


def start_demo_jobs(jobs: EmbeddedJobs, store) -> None:
    """Register the demo's jobs with `jobs` and start them, the enrichment first (the revenue
    job reads its output). One that cannot start is logged and left stopped (the console
    shows it, and an operator can start it)."""
    ensure_job_topics(store)
    try:
        ensure_demo_saved_search(store)
    except Exception:
        log.exception("the demo's saved search could not be saved")
    for spec in DEMO_JOBS:
        jobs.register(spec)
    for spec in DEMO_JOBS:
        try:
            jobs.start(spec.name)
        except Exception:
            log.exception("demo job %s could not start", spec.name)
