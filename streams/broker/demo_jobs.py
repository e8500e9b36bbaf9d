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

Event times are the records' timestamps (the demo writes them as it goes). The topics the
jobs write are created here first, so the tables are compacted.
"""

from __future__ import annotations

import logging

from streams.broker.demo import CLICKS, CUSTOMERS, DEMO_TOPIC_CONFIG, ORDERS, SEARCHES
from streams.errors import TopicAlreadyExists
from streams.jobs import JSON, TEXT, Count, Job, Sum, Tumbling
from streams.jobs.embedded import EmbeddedJobs, JobSpec

log = logging.getLogger(__name__)

ENRICHED = "orders-enriched"
CTR = "ctr-by-query"
REVENUE = "revenue-by-country"
REVENUE_LATE = "revenue-late-orders"
COMPACT = {"cleanup.policy": "compact"}
OUTPUT_TOPICS = {  # topic -> config; 3 partitions, as their inputs
    ENRICHED: DEMO_TOPIC_CONFIG,
    CTR: COMPACT,
    REVENUE: COMPACT,
    REVENUE_LATE: DEMO_TOPIC_CONFIG,
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


DEMO_JOBS = [
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
]


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
    for spec in DEMO_JOBS:
        jobs.register(spec)
    for spec in DEMO_JOBS:
        try:
            jobs.start(spec.name)
        except Exception:
            log.exception("demo job %s could not start", spec.name)
