"""``/metrics`` on an external cluster (TIDELOG_CLUSTER=kafka://...): kafka_exporter's series
come through KafkaCluster from a Tidelog listener in another process, as they would from Apache
Kafka. (The hot-path instruments count only a listener in the console's own process.)"""

from __future__ import annotations

import time

from confluent_kafka import Consumer
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token

from streams.cluster import ProduceRequest


def test_scrape_reads_offsets_lag_and_members_from_an_external_cluster(
    external, server, viewer, client
):
    topic, group = f"m-ext-{time.time_ns() % 10**9}", "m-ext-readers"
    external.create_topic(name=topic, partitions=1)
    external.produce(topic=topic, records=[ProduceRequest(b"v%d" % i) for i in range(3)])
    consumer = Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 3:
            assert time.monotonic() < deadline, f"the group read {seen} of 3 records"
            m = consumer.poll(0.5)
            seen += m is not None and m.error() is None
        consumer.commit(asynchronous=False)
        external.produce(topic=topic, records=[ProduceRequest(b"late")] * 2)
        key = Token.objects.create(user=viewer).key
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {key}")
    finally:
        consumer.close()
    assert response.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }
    tp = (("partition", "0"), ("topic", topic))
    gtp = (("consumergroup", group), *tp)
    assert samples[("tidelog_cluster_up", ())] == 1
    assert samples[("kafka_topic_partition_current_offset", tp)] == 5
    assert samples[("kafka_topic_partition_oldest_offset", tp)] == 0
    assert samples[("kafka_consumergroup_current_offset", gtp)] == 3
    assert samples[("kafka_consumergroup_lag", gtp)] == 2
    assert samples[("kafka_consumergroup_members", (("consumergroup", group),))] == 1
