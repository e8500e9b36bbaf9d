"""Views of a job whose worker runs in another process: ``python -m streams.jobs run ...
--query-port 0`` against this process's broker (its Kafka listener). The worker advertises its
query endpoint in its group member's client id; ``RoutedViews`` here finds the job in the
group, learns the view's shape from the worker and answers every query from it over HTTP —
by key after a produce (waiting for the offset: read-your-writes through the job's
repartition topic), and by key range across partitions. Waits have deadlines; no timing is
asserted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from streams.broker.runtime import Broker
from streams.jobs.viewserver import RoutedViews, owners_from_group
from streams.protocol import ListenerConfig
from tests.kafka_servers import REPO_ROOT

DEADLINE_S = 120.0
JOB = "vw-shop"


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", metrics=False, health=False)
    b.start_kafka_listener(ListenerConfig(port=0))
    yield b
    b.close()


@pytest.fixture(params=["at-least-once", "exactly-once"])
def worker(broker, tmp_path, request):
    broker.store.create_topic("vw-orders", 3)
    host, port = broker.kafka_address
    log_path = tmp_path / "worker.log"
    args = [
        sys.executable, "-m", "streams.jobs", "run", "tests.jobs.view_workload:shop",
        "--bootstrap", f"{host}:{port}", "--checkpoint-interval-ms", "50",
        "--processing-guarantee", request.param,
        "--query-port", "0", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300",
    ]  # fmt: skip
    with open(log_path, "ab") as log:
        process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=log, stderr=log, env=os.environ)
    yield process, log_path
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def produce(store, i: int, country: str) -> tuple[int, int]:
    value = json.dumps({"country": country, "amount": i % 4 + 1, "ts": i}).encode()
    r = store.append_batch("vw-orders", [(value, f"o{i}".encode(), (), i)])[0]
    return r.partition, r.offset


def test_a_worker_in_another_process_answers_through_its_endpoint(broker, worker):
    process, log_path = worker
    co = broker.coordinator

    def owners(job: str) -> dict[int, str]:
        try:
            return owners_from_group(co.describe_group(job))
        except Exception:  # noqa: BLE001 - the group does not exist yet
            return {}

    deadline = time.monotonic() + DEADLINE_S
    while set(owners(JOB)) != {0, 1, 2}:
        assert process.poll() is None, log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, "the worker did not join with an endpoint"
        time.sleep(0.1)
    router = RoutedViews(broker.store, owners, jobs=lambda: [g for g, _ in co.list_groups()])
    assert [(i.job, i.name, i.served, i.served_elsewhere) for i in router.list_views()] == [
        (JOB, "revenue", [], [0, 1, 2])
    ]
    total = 0
    for i in range(6):  # each read right after its produce sees it
        total += i % 4 + 1
        p, off = produce(broker.store, i, "fr")
        ans = router.get(JOB, "revenue", "fr", wait_for={"vw-orders": {p: off + 1}}, timeout_s=60)
        assert ans.rows == [("fr", {"total": total, "n": i + 1})]
    ends: dict[int, int] = {}
    for i, c in enumerate(["de", "es", "it", "nl", "pt"], start=10):
        p, off = produce(broker.store, i, c)
        ends[p] = off + 1
    ans = router.range(JOB, "revenue", "de", "it", wait_for={"vw-orders": ends}, timeout_s=60)
    assert [k for k, _ in ans.rows] == ["de", "es", "fr", "it"]
    assert set(ans.token.offsets["vw-orders"]) == {0, 1, 2}
    assert process.poll() is None
