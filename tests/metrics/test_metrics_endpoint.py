"""``/metrics``: scraped with prometheus_client's own parser after real Kafka clients
(confluent-kafka) produced to the console's broker and consumed in a group through its
listener. kafka_exporter's series must match the store and the group coordinator; Tidelog's
hot-path counters and histograms must have counted the traffic; no token, no metrics."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

TOPIC, GROUP = "metrics-orders", "metrics-billing"


@pytest.fixture
def kafka_broker(settings, tmp_path):
    """The console's broker with its Kafka listener on a free port."""
    from brokerui.broker import close_broker, get_broker

    close_broker()
    settings.TIDELOG_DATA_DIR = tmp_path / "data"
    settings.TIDELOG_DEMO = False
    settings.TIDELOG_KAFKA_LISTENER = True
    settings.TIDELOG_KAFKA_PORT = 0
    settings.TIDELOG_KAFKA_SASL = False
    try:
        yield get_broker()
    finally:
        close_broker()


def _token(user) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=user).key


def _scrape(client, token: str, keyword: str = "Bearer") -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of one scrape."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"{keyword} {token}")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def _consume(consumer: Consumer, n: int) -> list:
    got, deadline = [], time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    assert len(got) == n, f"consumed {len(got)} of {n} records"
    return got


def test_scrape_matches_the_store_and_the_group(kafka_broker, viewer, client):
    host, port = kafka_broker.kafka_address
    bootstrap = f"{host}:{port}"
    kafka_broker.store.create_topic(TOPIC, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(5):  # 3 records to partition 0, 2 to partition 1
        producer.produce(TOPIC, value=b"order-%d" % i, partition=0 if i < 3 else 1)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        _consume(consumer, 5)
        # commit short of the end on partition 0: lag 1 there, 0 on partition 1
        consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, 2), TopicPartition(TOPIC, 1, 2)], asynchronous=False
        )
        for p in (0, 1):  # whatever the flush policy, one fsync of each partition
            kafka_broker.store.partition_log(TOPIC, p).flush()
        m = _scrape(client, _token(viewer))
    finally:
        consumer.close()

    # kafka_exporter's series, from the store and the group coordinator
    assert _value(m, "kafka_brokers") == 1
    assert _value(m, "kafka_topic_partitions", topic=TOPIC) == 2
    for p, end in ((0, 3), (1, 2)):
        tp = {"topic": TOPIC, "partition": str(p)}
        assert _value(m, "kafka_topic_partition_current_offset", **tp) == end
        assert _value(m, "kafka_topic_partition_oldest_offset", **tp) == 0
        assert _value(m, "kafka_topic_partition_in_sync_replica", **tp) == 1
        assert _value(m, "kafka_consumergroup_current_offset", consumergroup=GROUP, **tp) == 2
        assert _value(m, "kafka_consumergroup_lag", consumergroup=GROUP, **tp) == end - 2
    gt = {"consumergroup": GROUP, "topic": TOPIC}
    assert _value(m, "kafka_consumergroup_lag_sum", **gt) == 1
    assert _value(m, "kafka_consumergroup_current_offset_sum", **gt) == 4
    assert _value(m, "kafka_consumergroup_members", consumergroup=GROUP) == 1
    assert _value(m, "tidelog_cluster_up") == 1

    # Tidelog's own: records and bytes in and out, per topic, from the listener's hot paths
    assert _value(m, "tidelog_records_in_total", topic=TOPIC) == 5
    assert _value(m, "tidelog_bytes_in_total", topic=TOPIC) > 5 * len(b"order-0")
    assert _value(m, "tidelog_records_out_total", topic=TOPIC) >= 5
    assert _value(m, "tidelog_bytes_out_total", topic=TOPIC) > 0
    # request latency histograms per Kafka API, with counts
    for api in ("Produce", "Fetch", "Metadata", "JoinGroup", "SyncGroup", "OffsetCommit"):
        assert _value(m, "tidelog_kafka_request_duration_seconds_count", api=api) > 0
        assert _value(m, "tidelog_kafka_request_duration_seconds_bucket", api=api, le="+Inf") > 0
    assert _value(m, "tidelog_log_fsync_duration_seconds_count") > 0
    assert _value(m, "tidelog_kafka_connections") >= 1  # the consumer was still connected


def test_scrape_accepts_the_api_token_form_too(kafka_broker, operator, client):
    m = _scrape(client, _token(operator), keyword="Token")
    assert _value(m, "tidelog_cluster_up") == 1
    assert ("process_cpu_seconds_total", ()) in m


def test_openmetrics_when_asked(kafka_broker, viewer, client):
    response = client.get(
        "/metrics",
        HTTP_AUTHORIZATION=f"Bearer {_token(viewer)}",
        HTTP_ACCEPT="application/openmetrics-text; version=1.0.0",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


@pytest.mark.parametrize("header", [None, "Bearer not-a-token", "Basic b2xpdmlhOng="])
def test_no_metrics_without_a_token(kafka_broker, viewer, client, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.get("/metrics", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert b"kafka_" not in response.content


def test_a_scrape_answers_when_the_cluster_cannot_be_read():
    from prometheus_client import CollectorRegistry, generate_latest

    from brokerui.metrics.collector import ClusterCollector
    from streams.errors import ClusterUnavailable

    def unreachable():
        raise ClusterUnavailable("no answer within 10 s")

    registry = CollectorRegistry()
    registry.register(ClusterCollector(unreachable))
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["tidelog_cluster_up"].samples[0].value == 0
    assert not any(name.startswith("kafka_") for name in families)
