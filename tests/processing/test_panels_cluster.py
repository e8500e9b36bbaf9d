"""Panel jobs over a Cluster (``ClusterSource``): against Tidelog's Kafka listener in another
process (through KafkaCluster) and over a LocalCluster, the windowed results equal those of the
same jobs reading the same records straight from a local LogStore."""

from __future__ import annotations

import json
import time

import pytest

from streams import errors as se
from streams.cluster import LocalCluster, ProduceRequest
from streams.cluster.kafka import KafkaCluster
from streams.log import LogStore
from streams.processing.panels import ClusterSource, PanelJobs, PanelSpec
from streams.processing.testing import ManualClock
from tests.kafka_servers import kafka_server

NOW = (int(time.time() * 1000) // 10_000) * 10_000  # a 10-second boundary
T0 = NOW - 5 * 60_000  # records five minutes old: inside the 15-minute backfill
COUNTRIES = ("DE", "FR", "IT")

SPECS = {
    "event": PanelSpec("orders", "sum", value_field="total", group_by="country",
                       time_field="ts", window="tumbling", size_ms=10_000),
    "processing": PanelSpec("orders", "count", window="hopping", size_ms=20_000,
                            step_ms=10_000),
    "session": PanelSpec("orders", "max", value_field="total", window="session",
                         gap_ms=3_000, time_field="ts"),
}  # fmt: skip


def records(n: int = 120) -> list[ProduceRequest]:
    """JSON orders over three partitions, event time slightly out of order, plus one bad one."""
    out = []
    for i in range(n):
        ts = T0 + i * 900 + (700 if i % 7 == 3 else 0)  # some events a little late
        doc = {"total": (i * 37) % 50 + 1, "country": COUNTRIES[i % 3], "ts": ts}
        out.append(ProduceRequest(json.dumps(doc).encode(), partition=i % 3, timestamp_ms=ts))
    out.append(ProduceRequest(b"not json", partition=0, timestamp_ms=T0 + n * 900))
    return out


def run(source, clock) -> dict[str, tuple]:
    """Every spec's job over `source`, polled until it has read everything."""
    jobs = PanelJobs(source, clock=clock)
    for name, spec in SPECS.items():
        jobs.ensure(name, spec)
    for _ in range(50):
        if not jobs.poll_once() and all(jobs.snapshot(n).records_read == 121 for n in SPECS):
            break
        time.sleep(0.05)  # a remote cluster's offsets are cached for a moment
    out = {}
    for name in SPECS:
        snap = jobs.snapshot(name)
        results = sorted((str(r.key), r.start, r.end, r.values, r.final) for r in snap.results)
        out[name] = (
            results,
            snap.watermark,
            snap.records_read,
            snap.parse_errors,
            snap.late_count,
            snap.error,
        )
    return out


@pytest.fixture
def clock():
    return ManualClock(NOW + 60_000)


@pytest.fixture
def local(tmp_path, clock):
    store = LogStore.open(str(tmp_path / "data"), clock=clock, background=False)
    store.create_topic("orders", partitions=3)
    for r in records():
        store.append("orders", r.value, partition=r.partition, timestamp_ms=r.timestamp_ms)
    yield store
    store.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with kafka_server(str(tmp_path_factory.mktemp("kafka"))) as s:
        yield s


@pytest.fixture(scope="module")
def kafka(server):
    cluster = KafkaCluster(server.bootstrap, timeout_s=15)
    cluster.create_topic(name="orders", partitions=3)
    cluster.produce(topic="orders", records=records())
    yield cluster
    cluster.close()


def test_jobs_over_kafka_cluster_match_the_local_store(kafka, local, clock):
    expected = run(local, clock)
    assert expected["event"][0] and expected["event"][2:4] == (121, 1)  # it computed something
    assert any(final for *_, final in expected["event"][0])
    got = run(ClusterSource(kafka), clock)
    assert got == expected


def test_jobs_over_local_cluster_match_the_store(local, clock):
    assert run(ClusterSource(LocalCluster(local, None)), clock) == run(local, clock)


def test_cluster_source_answers_like_the_store(kafka, local):
    source = ClusterSource(kafka, max_age_ms=0)
    assert source.partition_count("orders") == local.partition_count("orders") == 3
    assert [source.offsets("orders", p) for p in range(3)] == [
        local.offsets("orders", p) for p in range(3)
    ]
    ts = T0 + 30 * 900
    for p in range(3):
        assert source.offset_for_timestamp("orders", p, ts) == local.offset_for_timestamp(
            "orders", p, ts
        )
        theirs = [(r.offset, r.timestamp_ms, r.value) for r in source.read("orders", p, 5, 10)]
        ours = [(r.offset, r.timestamp_ms, r.value) for r in local.read("orders", p, 5, 10)]
        assert theirs == ours and len(ours) == 10
    assert source.read("orders", 0, source.offsets("orders", 0)[1]) == []
    with pytest.raises(se.UnknownPartition):
        source.offsets("orders", 3)
    with pytest.raises(se.UnknownTopic):
        source.partition_count("no-such-topic")


def test_job_on_a_missing_topic_fails_to_start(kafka):
    jobs = PanelJobs(ClusterSource(kafka))
    with pytest.raises(se.UnknownTopic):
        jobs.ensure("p", PanelSpec("no-such-topic", "count"))


def test_a_cluster_that_stops_answering_pauses_the_job_without_failing_it(tmp_path):
    from tests.kafka_servers import TidelogListener

    with TidelogListener(str(tmp_path / "kafka")) as server:
        quiet = {"log_level": 0}  # librdkafka would log every refused connection on stderr
        cluster = KafkaCluster(server.bootstrap, timeout_s=1, client_config=quiet)
        try:
            cluster.create_topic(name="orders", partitions=3)
            cluster.produce(topic="orders", records=records(6))
            jobs = PanelJobs(ClusterSource(cluster, max_age_ms=0), clock=ManualClock(NOW))
            jobs.ensure("p", SPECS["event"])
            jobs.poll_once()
            assert jobs.snapshot("p").records_read == 7
            server.stop()
            assert jobs.poll_once() is False  # the cluster is gone: nothing more this round
            snap = jobs.snapshot("p")
            assert snap.error is None and snap.records_read == 7  # paused, not failed
            with pytest.raises(se.ClusterUnavailable):
                jobs.ensure("q", SPECS["processing"])
        finally:
            cluster.close()
