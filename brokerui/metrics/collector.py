"""`ClusterCollector`: kafka_exporter's metrics, read from the cluster on each scrape.

Names, label names and meanings follow danielqsj/kafka_exporter, so its Grafana dashboards and
alert rules work unchanged: ``kafka_brokers``, ``kafka_topic_partitions``,
``kafka_topic_partition_{current,oldest}_offset``, ``kafka_topic_partition_{leader,replicas,
in_sync_replica,leader_is_preferred,under_replicated_partition}`` (one broker: leader 0, one
replica, in sync), ``kafka_consumergroup_current_offset{,_sum}``,
``kafka_consumergroup_lag{,_sum}`` and ``kafka_consumergroup_members``.

Differences, on purpose: a partition a group never committed to has no current offset or lag
series (kafka_exporter reports -1 there); lag is the console's (``streams.groups.lag``): from a
commit below the log start only what still exists counts. Internal topics (``__*``) are
included, as kafka_exporter includes ``__consumer_offsets``.

It reads through the ``Cluster`` interface only (``brokerui.cluster.get_cluster``), so it works
on the built-in broker (``LocalCluster``: in-memory reads) and on an external cluster
(``KafkaCluster``: one ListGroups/DescribeGroups/OffsetFetch round of the admin client plus one
Metadata and two ListOffsets per topic, and one DescribeGroups per group, per scrape). When the
cluster cannot be read, the scrape still answers: ``tidelog_cluster_up`` is 0 and the error is
logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from streams.errors import UnknownGroup

log = logging.getLogger("brokerui.metrics")

BROKER_ID = 0


class ClusterCollector(Collector):
    def __init__(self, cluster: Callable[[], object]):
        self._cluster = cluster  # called on each scrape: the cluster may change (tests, settings)

    def describe(self) -> list:
        return []  # no look at the cluster when the collector is registered

    def collect(self) -> Iterator[GaugeMetricFamily]:
        started = time.perf_counter()
        up = GaugeMetricFamily(
            "tidelog_cluster_up", "1 if the last scrape read the cluster, 0 if it failed."
        )
        try:
            families = self._families(self._cluster())
        except Exception:  # noqa: BLE001 - a scrape answers even when the cluster does not
            log.exception("metrics scrape could not read the cluster")
            families = []
            up.add_metric([], 0)
        else:
            up.add_metric([], 1)
        yield from families
        yield up
        took = GaugeMetricFamily(
            "tidelog_cluster_scrape_duration_seconds", "Time this scrape took to read the cluster."
        )
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _families(self, cluster) -> list[GaugeMetricFamily]:
        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        tp = ["topic", "partition"]
        brokers = gauge("kafka_brokers", "Number of Brokers in the Kafka Cluster.", [])
        brokers.add_metric([], 1)
        partitions = gauge(
            "kafka_topic_partitions", "Number of partitions for this Topic", ["topic"]
        )
        current = gauge(
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition",
            tp,
        )
        oldest = gauge(
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition",
            tp,
        )
        leader = gauge(
            "kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition", tp
        )
        replicas = gauge(
            "kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition", tp
        )
        isr = gauge(
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition",
            tp,
        )
        preferred = gauge(
            "kafka_topic_partition_leader_is_preferred",
            "1 if Topic/Partition is using the Preferred Broker",
            tp,
        )
        under = gauge(
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated",
            tp,
        )
        topics = [t.name for t in cluster.list_topics(include_internal=True)]
        for topic in topics:
            offsets = cluster.partition_offsets(topic=topic)
            partitions.add_metric([topic], len(offsets))
            for p, (start, end) in enumerate(offsets):
                labels = [topic, str(p)]
                current.add_metric(labels, end)
                oldest.add_metric(labels, start)
                leader.add_metric(labels, BROKER_ID)
                replicas.add_metric(labels, 1)
                isr.add_metric(labels, 1)
                preferred.add_metric(labels, 1)
                under.add_metric(labels, 0)

        gtp = ["consumergroup", "topic", "partition"]
        gt = ["consumergroup", "topic"]
        g_offset = gauge(
            "kafka_consumergroup_current_offset",
            "Current Offset of a ConsumerGroup at Topic/Partition",
            gtp,
        )
        g_offset_sum = gauge(
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions",
            gt,
        )
        g_lag = gauge(
            "kafka_consumergroup_lag",
            "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
            gtp,
        )
        g_lag_sum = gauge(
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
            gt,
        )
        members = gauge(
            "kafka_consumergroup_members",
            "Amount of members in a consumer group",
            ["consumergroup"],
        )
        for summary in cluster.list_groups():
            group = summary.group_id
            try:
                detail = cluster.describe_group(group)
            except UnknownGroup:
                continue  # deleted since it was listed
            members.add_metric([group], len(detail.description.members))
            offset_sums: dict[str, int] = {}
            lag_sums: dict[str, int] = {}
            for row in detail.lag.partitions:
                if row.committed is None:
                    continue
                labels = [group, row.topic, str(row.partition)]
                g_offset.add_metric(labels, row.committed)
                g_lag.add_metric(labels, row.lag)
                offset_sums[row.topic] = offset_sums.get(row.topic, 0) + row.committed
                lag_sums[row.topic] = lag_sums.get(row.topic, 0) + row.lag
            for topic, total in offset_sums.items():
                g_offset_sum.add_metric([group, topic], total)
                g_lag_sum.add_metric([group, topic], lag_sums[topic])
        return [
            brokers, partitions, current, oldest, leader, replicas, isr, preferred, under,
            g_offset, g_offset_sum, g_lag, g_lag_sum, members,
        ]  # fmt: skip
