"""The job of the views-across-processes test (``python -m streams.jobs run
tests.jobs.view_workload:shop``): orders re-keyed by country (through a repartition topic),
a running revenue and count per country — a view, ``revenue``."""

from __future__ import annotations

from streams.jobs import JSON, TEXT, Count, Job, Sum, field


def shop() -> Job:
    job = Job("vw-shop")
    orders = job.stream("vw-orders", key=TEXT, value=JSON, timestamp=field("ts"))
    orders.key_by("country").aggregate(name="revenue", total=Sum("amount"), n=Count())
    return job
