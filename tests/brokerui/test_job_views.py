"""Stream jobs in the console and the API (issue 13, item 8): the Jobs page and /api/v1/jobs
show each embedded job with its worker (host, pid, partitions), lag per partition, watermark,
late and dropped counts, state size per store, last checkpoint and errors; operators start and
stop jobs (stop behind a confirmation), audited; viewers get 403. The live records/s come
over the metrics WebSocket: the ``jobs`` scope routes a job's series to the page."""

from __future__ import annotations

import os
import random
import time

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from brokerui.audit.models import AuditEntry
from brokerui.console.jobs import services
from brokerui.console.live.scopes import JobTopics, Scope, matcher, route
from streams.broker.demo import DemoEvents, ensure_demo_topics
from streams.broker.demo_jobs import DEMO_JOBS, ensure_job_topics
from streams.broker.metrics import series

API = "/api/v1"


@pytest.fixture
def jobs(broker):
    """The broker's embedded jobs with the demo's registered (stopped), over demo events."""
    store = broker.store
    ensure_demo_topics(store)
    ensure_job_topics(store)
    events = DemoEvents(random.Random(3))
    now = int(time.time() * 1000)
    for topic, key, value in events.customers(now) + [events.next(now) for _ in range(300)]:
        store.append(topic, value, key=key, timestamp_ms=now)
    for spec in DEMO_JOBS:
        broker.jobs.register(spec)
    yield broker.jobs
    broker.jobs.close()


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _api(user) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return c


def test_service_reads_a_running_jobs_numbers(jobs, operator):
    from brokerui.audit.services import Actor, AuditLog

    services.job_start(host=jobs, name="search-ctr", sink=AuditLog(), actor=Actor(operator))
    wait_for(lambda: jobs.status("search-ctr").worker.records_in > 0)
    wait_for(lambda: jobs.status("search-ctr").worker.lag_records == 0)
    view = services.jobs_read(host=jobs, now_ms=int(time.time() * 1000))
    row = next(r for r in view.rows if r.name == "search-ctr")
    assert row.running and row.age_ms is not None
    (worker,) = row.workers
    assert worker.pid == os.getpid()
    assert ("searches", 0) in worker.partitions and ("clicks", 2) in worker.partitions
    assert {(lag.topic, lag.partition) for lag in row.lag} >= {("searches", 1), ("clicks", 1)}
    assert set(worker.state_keys) >= {"searches", "clicks", "clicked-left"}
    assert worker.last_checkpoint_ms is not None
    assert any(step == "clicked" for step, _, _ in row.watermarks)
    assert "clicked" in row.late_by_step
    stopped = next(r for r in view.rows if r.name == "enrich-orders")
    assert stopped.state == "stopped" and stopped.workers == []
    assert services.jobs_read(host=None, now_ms=0).unavailable  # an external cluster


def test_page_shows_jobs_with_units_and_freshness(jobs, operator_client):
    jobs.start("revenue-by-country")
    wait_for(lambda: jobs.status("revenue-by-country").worker.records_in >= 0)
    page = operator_client.get("/jobs/").content.decode()
    for name in ("enrich-orders", "search-ctr", "revenue-by-country"):
        assert f'data-job="{name}"' in page
    assert 'data-state="running"' in page and 'data-state="stopped"' in page
    assert "records</small>" in page and "UTC" in page and " old)" in page  # units, freshness
    assert 'data-live-scope="jobs"' in page  # the live charts of records/s
    assert 'data-chart="job_in"' in page and 'data-chart="job_out"' in page
    assert "/jobs/revenue-by-country/stop/" in page and "data-job-start" in page
    assert page.count("data-late-output") == 1  # revenue-late-orders, marked as such
    # a window's store counts what it held at the last checkpoint: the page says so
    assert "stores are counted as of the last checkpoint" in page
    partial = operator_client.get("/jobs/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.startswith('\n<div id="jobs"') or '<div id="jobs"' in partial[:200]
    assert "<html" not in partial


def test_operator_starts_and_stops_with_confirmation_audited(jobs, operator_client):
    response = operator_client.post("/jobs/search-ctr/start/")
    assert response.status_code == 302
    assert jobs.status("search-ctr").state == "running"
    assert AuditEntry.objects.get(action="job.start").target == "job search-ctr"
    confirm = operator_client.get("/jobs/search-ctr/stop/")
    assert b"Stop the job" in confirm.content and jobs.status("search-ctr").state == "running"
    unconfirmed = operator_client.post("/jobs/search-ctr/stop/", {})
    assert b"tick to confirm" in unconfirmed.content
    assert jobs.status("search-ctr").state == "running"
    done = operator_client.post("/jobs/search-ctr/stop/", {"confirm": "1"})
    assert done.status_code == 302 and jobs.status("search-ctr").state == "stopped"
    entry = AuditEntry.objects.get(action="job.stop")
    assert entry.before["state"] == "running" and entry.after == {"state": "stopped"}
    assert entry.before["partitions"]


def test_a_start_that_fails_is_shown_and_audited(jobs, broker, operator_client):
    broker.store.delete_topic("clicks")
    response = operator_client.post("/jobs/search-ctr/start/", follow=True)
    assert b"did not start" in response.content and b"clicks" in response.content
    assert AuditEntry.objects.get(action="job.start.failed").after["reason"]
    assert jobs.status("search-ctr").state == "stopped"


def test_viewers_cannot_start_or_stop(jobs, viewer_client, viewer):
    assert viewer_client.get("/jobs/").status_code == 200
    assert viewer_client.post("/jobs/search-ctr/start/").status_code == 403
    assert viewer_client.get("/jobs/search-ctr/stop/").status_code == 403
    api = _api(viewer)
    assert api.post(f"{API}/jobs/search-ctr/start").status_code == 403
    assert jobs.status("search-ctr").state == "stopped"
    assert not AuditEntry.objects.filter(action__startswith="job.").exists()


def test_api_lists_starts_and_stops(jobs, operator):
    api = _api(operator)
    started = api.post(f"{API}/jobs/enrich-orders/start")
    assert started.status_code == 200, started.content
    assert started.json()["state"] == "running"
    assert api.post(f"{API}/jobs/enrich-orders/start").json()["error"]["code"] == (
        "job_state_conflict"
    )
    wait_for(lambda: jobs.status("enrich-orders").worker.records_in > 0)
    body = api.get(f"{API}/jobs").json()
    assert body["count"] == len(DEMO_JOBS) and body["as_of_ms"] > 0
    revenue = next(j for j in body["jobs"] if j["name"] == "revenue-by-country")
    assert revenue["late_outputs"] == ["revenue-late-orders"]
    job = next(j for j in body["jobs"] if j["name"] == "enrich-orders")
    (worker,) = job["workers"]
    assert worker["pid"] == os.getpid() and worker["host"]
    assert {"topic": "orders", "partition": 0} in worker["partitions"]
    assert set(worker["state_keys"]) == {"customer-versions", "customer-meta"}
    assert worker["late"] >= 0 and worker["dropped"] >= 0 and worker["as_of_ms"] > 0
    assert {lag["topic"] for lag in job["lag"]} == {"orders", "customers"}
    assert api.get(f"{API}/jobs/nope").status_code == 404
    stopped = api.post(f"{API}/jobs/enrich-orders/stop")
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    assert api.post(f"{API}/jobs/enrich-orders/stop").status_code == 409
    assert AuditEntry.objects.filter(action="job.stop", source="api").count() == 1


def test_the_jobs_scope_routes_a_jobs_read_and_written_series():
    jobs = JobTopics(frozenset({"search-ctr"}), frozenset({"ctr-by-query"}))
    assert Scope("jobs") in route(series("group_records", "search-ctr"), {}, jobs)
    assert Scope("jobs") in route(series("records_in", "ctr-by-query"), {}, jobs)
    assert Scope("jobs") not in route(series("records_in", "orders"), {}, jobs)
    assert Scope("jobs") not in route(series("group_records", "order-fulfilment"), {}, jobs)
    assert Scope("jobs") not in route(series("records_in", "ctr-by-query", 0), {}, jobs)
    match = matcher(Scope("jobs"), (), jobs)
    assert match(series("group_records", "search-ctr")) and not match(series("bytes_in"))


def _stat(page: str, job: str, stat: str) -> str:
    card = page.split(f'data-job="{job}"', 1)[1].split("</article>", 1)[0]
    return card.split(f'data-stat="{stat}">', 1)[1].split("</dd>", 1)[0]


def test_a_job_without_event_time_says_its_watermark_is_not_used(jobs, operator_client):
    """session-activity only filters, maps and re-keys: no step keeps a watermark, so its card
    says "not used" rather than "none yet" (which would suggest one is coming); a job with a
    join shows its watermark once events arrived."""
    jobs.start("session-activity")
    jobs.start("search-ctr")
    wait_for(lambda: jobs.status("session-activity").worker.records_in > 0)
    wait_for(lambda: jobs.status("search-ctr").worker.watermark_ms is not None)
    assert not jobs.status("session-activity").worker.keeps_watermark
    assert jobs.status("search-ctr").worker.keeps_watermark
    page = operator_client.get("/jobs/").content.decode()
    assert "not used" in _stat(page, "session-activity", "watermark")
    joined = _stat(page, "search-ctr", "watermark")
    assert "UTC" in joined and "not used" not in joined and "none yet" not in joined
