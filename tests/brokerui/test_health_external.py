"""On an external cluster (TIDELOG_CLUSTER) no broker of this process samples the groups'
commits: the group page says its status and lag figures are not available, the alerts page
says rules are not evaluated there — and neither opens the local broker (the `external`
fixture fails the test if one does)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition
from django.urls import reverse

from streams.cluster import ProduceRequest


def test_group_status_and_alerts_are_not_offered_on_an_external_cluster(
    operator_client, external, server
):
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    external.create_topic(name=topic, partitions=1)
    external.produce(topic=topic, records=[ProduceRequest(b"v", partition=0)] * 3)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    detail = operator_client.get(reverse("console:group", args=[group])).content.decode()
    assert 'id="health-unavailable"' in detail and 'id="group-health"' in detail
    assert "data-status=" not in detail.split('id="group-health"', 1)[1].split("</div>", 1)[0]
    overview = operator_client.get(reverse("console:home")).content.decode()
    assert "data-status-count" not in overview and 'id="alerts-firing"' not in overview
    alerts = operator_client.get(reverse("console:alerts")).content.decode()
    assert 'id="alerts-unavailable"' in alerts and 'id="new-rule"' not in alerts
    assert operator_client.get(reverse("console:alert_create")).status_code == 404
