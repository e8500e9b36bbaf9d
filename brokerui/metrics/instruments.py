"""`PrometheusInstruments`: the ``streams.telemetry.Instruments`` of the web process, in
prometheus_client counters, a gauge and histograms.

Label children are looked up once per label value and kept in dicts, so a hot-path call is a
dict look-up and one ``observe``/``inc`` (about 1 µs; see tests/bench/bench_metrics.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Kafka request latency (decoded -> written): 0.25 ms .. 10 s, long-polling fetches included
REQUEST_BUCKETS = (
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0
)  # fmt: skip
# one fsync of a segment: tmpfs is microseconds, a busy disk tens of milliseconds
FSYNC_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0
)  # fmt: skip


class PrometheusInstruments:
    def __init__(self, registry: CollectorRegistry):
        self.request_seconds = Histogram(
            "tidelog_kafka_request_duration_seconds",
            "Kafka requests answered by the listener, by API, from decoded to written.",
            ["api"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.fsync_seconds = Histogram(
            "tidelog_log_fsync_duration_seconds",
            "Time of one partition segment fsync.",
            buckets=FSYNC_BUCKETS,
            registry=registry,
        )
        self.connections = Gauge(
            "tidelog_kafka_connections",
            "Open Kafka client connections to the listener.",
            registry=registry,
        )
        per_topic = [("records_in", "Records appended by producers over the Kafka listener.")]
        per_topic.append(("bytes_in", "Record batch bytes appended by producers (Kafka listener)."))
        per_topic.append(("records_out", "Records sent to fetching clients (Kafka listener)."))
        per_topic.append(("bytes_out", "Record batch bytes sent to fetching clients."))
        self.counters = {
            name: Counter(f"tidelog_{name}", doc, ["topic"], registry=registry)
            for name, doc in per_topic
        }
        self._requests: dict[str, object] = {}
        self._topics: dict[str, tuple] = {}

    def request(self, api: str, seconds: float) -> None:
        child = self._requests.get(api)
        if child is None:
            child = self._requests[api] = self.request_seconds.labels(api)
        child.observe(seconds)

    def fsync(self, seconds: float) -> None:
        self.fsync_seconds.observe(seconds)

    def connection(self, delta: int) -> None:
        self.connections.inc(delta)

    def _topic(self, topic: str) -> tuple:
        children = self._topics.get(topic)
        if children is None:
            c = self.counters
            children = self._topics[topic] = tuple(
                c[name].labels(topic) for name in ("records_in", "bytes_in", "records_out",
                                                   "bytes_out")
            )  # fmt: skip
        return children

    def records_in(self, topic: str, records: int, nbytes: int) -> None:
        children = self._topic(topic)
        children[0].inc(records)
        children[1].inc(nbytes)

    def records_out(self, topic: str, records: int, nbytes: int) -> None:
        children = self._topic(topic)
        children[2].inc(records)
        children[3].inc(nbytes)
