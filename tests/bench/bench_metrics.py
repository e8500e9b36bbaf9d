"""Benchmark `metrics`: what the Prometheus instruments on the engine's hot paths cost.

Run: ``make bench BENCH=metrics`` or ``python -m tests.bench metrics``. ``BENCH_SCALE`` scales
the counts. Writes ``bench-results/metrics.json``. The peer is Tidelog itself with the default
``streams.telemetry.NullInstruments`` (what runs when nobody scrapes), in the same process:

1. per call: ``request`` (a Histogram.observe per Kafka API), ``records_in`` (two
   Counter.inc per topic) and ``fsync`` of ``brokerui.metrics.instruments.PrometheusInstruments``
   against the no-op, 200,000 calls each (scale 1), median of 5;
2. end to end: a broker with its Kafka listener in this process (port 0, a temporary data
   directory, the default flush policy) and a confluent-kafka producer sending one record at a
   time and waiting for each acknowledgement (acks=1), 2,000 records (scale 1): every record is
   one Produce request, so a per-request cost shows. Runs alternate on/off (ABBA order), 5 each,
   medians. On a shared, loaded machine this row is noise-bound: an A/A run (both sides off)
   spread 290..1,480 records/s; the per-call rows bound the cost instead (a Produce request
   calls ``request`` once and ``records_in`` once per batch: a few µs against ~1.5 ms).
"""

from __future__ import annotations

import os
import time

from confluent_kafka import Producer
from prometheus_client import CollectorRegistry

from brokerui.metrics.instruments import PrometheusInstruments
from streams import telemetry
from streams.broker.runtime import Broker
from streams.protocol import ListenerConfig
from tests.bench.common import Row, median, print_table, scaled, temp_dir, write_results

RUNS = 5


def per_call_ns(fn, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e9


def micro() -> list[Row]:
    n = scaled(200_000, 1000)
    on, off = PrometheusInstruments(CollectorRegistry()), telemetry.NullInstruments()
    cases = {
        "instrument call: request (Histogram.observe by api)": lambda i: (
            lambda: i.request("Produce", 0.0012)
        ),
        "instrument call: records_in (2 Counter.inc by topic)": lambda i: (
            lambda: i.records_in("orders", 10, 1000)
        ),
        "instrument call: fsync (Histogram.observe)": lambda i: lambda: i.fsync(0.0003),
    }
    rows = []
    for metric, make in cases.items():
        ons, offs = [], []
        for _ in range(RUNS):
            ons.append(per_call_ns(make(on), n))
            offs.append(per_call_ns(make(off), n))
        rows.append(
            Row(
                metric, "ns/call", median(ons), "no-op instruments", median(offs),
                higher_is_better=False, note=f"{n:,} calls, median of {RUNS}",
            )
        )  # fmt: skip
    return rows


def produce_one_by_one(bootstrap: str, topic: str, n: int) -> float:
    """Records/s producing `n` records, each acknowledged before the next is sent."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    value = os.urandom(100)
    started = time.perf_counter()
    for _ in range(n):
        producer.produce(topic, value=value)
        producer.flush(30)
    elapsed = time.perf_counter() - started
    return n / elapsed


def end_to_end() -> Row:
    n = scaled(2_000, 50)
    instruments = PrometheusInstruments(CollectorRegistry())
    ons, offs = [], []
    with temp_dir("bench-metrics-") as tmp:
        broker = Broker.open(tmp, metrics=False, kafka_listener=ListenerConfig(port=0))
        try:
            host, port = broker.kafka_address
            bootstrap = f"{host}:{port}"
            broker.store.create_topic("bench", 1)
            produce_one_by_one(bootstrap, "bench", min(n, 200))  # warm up
            for run in range(2 * RUNS):  # on, off, off, on, on, off, ...: no order bias
                on = run % 4 in (0, 3)
                telemetry.install(instruments if on else None)
                (ons if on else offs).append(produce_one_by_one(bootstrap, "bench", n))
        finally:
            telemetry.install(None)
            broker.close()
    return Row(
        "Kafka produce, one record per request, instruments on", "records/s", median(ons),
        "instruments off", median(offs),
        note=f"{n:,} records acks=1 each awaited, in-process listener, median of {RUNS}",
    )  # fmt: skip


def main() -> None:
    table = [*micro(), end_to_end()]
    print_table(table)
    print(f"wrote {write_results('metrics', table)}")


if __name__ == "__main__":
    main()
