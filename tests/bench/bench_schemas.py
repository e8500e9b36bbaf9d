"""Benchmark the schema registry and registry-encoded data.

Run: ``make bench BENCH=schemas`` or ``python -m tests.bench schemas``. ``BENCH_SCALE`` (default
1.0 = 1,000,000 records) scales the scanned topic.

Rows:
- message-browser scan of Avro records (a 10-field record, Confluent's wire format) decoded
  with the registry and filtered by CEL, against the same records as JSON scanned with the
  same expression: records/s, target ≥ 0.5× the JSON scan (`streams.cluster.browse` over a
  LogStore, the expression matching nothing so every record is decoded and evaluated; median
  of 3 interleaved scans each);
- registry look-ups by id: uncached (one ``GET /schemas/ids/{id}`` on a kept-alive HTTP/1.1
  connection, what a client pays once per id) and cached (confluent-kafka's
  ``SchemaRegistryClient`` answering from its own cache, what a serializer pays per record).
  No peer registry runs here (Karapace and Confluent's need a JVM or Kafka, and neither
  publishes a per-lookup latency figure we could find), so these rows have no peer;
- the produce path's validation cost: 1 KB Avro records through the Kafka port
  (confluent-kafka's producer) to a topic with ``confluent.value.schema.validation=true``
  against the same to one without, target ≤ 15 % (the ratio ≥ 0.85);
- a job reading Avro through the registry, Tidelog's worker against Quix Streams' with its
  ``AvroDeserializer``, target ≥ 10× (``tests/bench/schemas_jobs.py``).
"""

from __future__ import annotations

import http.client
import io
import json
import os
import statistics
import sys
import time

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

from tests.bench.common import (  # noqa: E402
    Row,
    at_least_ratio,
    log,
    print_table,
    scaled,
    temp_dir,
    write_results,
)

NAME = "schemas"
RUNS = 3
T0 = 1_767_225_600_000
EXPRESSION = 'value.amount > 1000000.0 && value.country == "nowhere"'

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "sku", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["PLACED", "PAID", "SHIPPED"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "express", "type": "boolean"},
        {"name": "placed_at", "type": "long"},
    ],
}  # fmt: skip


def _order(i: int) -> dict:
    return {
        "order_id": f"o-{i:08d}",
        "customer": f"cust-{i % 977:04d}",
        "country": ("DE", "FR", "NL", "US", "SE")[i % 5],
        "amount": (i % 500) + 0.5,
        "quantity": i % 7 + 1,
        "sku": f"SKU-{1000 + i % 50}",
        "status": ("PLACED", "PAID", "SHIPPED")[i % 3],
        "coupon": None if i % 4 else "WINTER",
        "express": i % 2 == 0,
        "placed_at": T0 + i,
    }


def _fill(store, topic: str, total: int, encode) -> None:
    from streams.log.records import ProducerRecord

    store.create_topic(topic, partitions=2)
    for p in range(2):
        batch = []
        for i in range(p, total, 2):
            batch.append(ProducerRecord(encode(_order(i)), b"k%d" % i, (), T0 + i))
            if len(batch) == 2000:
                store.append_batch(topic, batch, partition=p)
                batch = []
        if batch:
            store.append_batch(topic, batch, partition=p)


def _scan_seconds(store, topic: str, total: int, decoder) -> float:
    from streams.cluster import BrowseRequest
    from streams.cluster.browse import browse
    from streams.cluster.expressions import CelLanguage

    started = time.perf_counter()
    predicate = CelLanguage().compile(EXPRESSION).reading_with(decoder)  # once, as the page
    result = browse(
        store,
        BrowseRequest(
            topic,
            seek="oldest",
            page_size=10,
            expression=predicate,
            max_scan_records=10 * total,
            max_scan_bytes=1 << 40,
            max_time_ms=3_600_000,
        ),
    )
    elapsed = time.perf_counter() - started
    assert result.examined == total and not result.records, (result.examined, total)
    assert predicate.errors == 0, predicate.first_error  # every record was decoded
    return elapsed


def scan_rows(total: int) -> list[Row]:
    from fastavro import schemaless_writer
    from fastavro.schema import parse_schema

    from streams.log import LogStore
    from streams.schemas import SchemaRegistry, StoreSchemaLog
    from streams.schemas.wire import encode_header

    with temp_dir(NAME) as work:
        store = LogStore.open(work, background=False)
        try:
            registry = SchemaRegistry(StoreSchemaLog(store))
            schema_id = registry.register("orders-avro-value", json.dumps(ORDER)).id
            parsed, head = parse_schema(ORDER), encode_header(schema_id)

            def avro(obj: dict) -> bytes:
                buf = io.BytesIO()
                buf.write(head)
                schemaless_writer(buf, parsed, obj)
                return buf.getvalue()

            def as_json(obj: dict) -> bytes:
                return json.dumps(obj, separators=(",", ":")).encode()

            log(f"{NAME}: writing {total:,} records as Avro and as JSON")
            _fill(store, "orders-avro", total, avro)
            _fill(store, "orders-json", total, as_json)
            avro_s, json_s = [], []
            for run in range(RUNS):  # interleaved
                json_s.append(_scan_seconds(store, "orders-json", total, registry.decoder))
                avro_s.append(_scan_seconds(store, "orders-avro", total, registry.decoder))
                log(f"{NAME}: run {run + 1}: JSON {json_s[-1]:.2f} s, Avro {avro_s[-1]:.2f} s")
        finally:
            store.close()
    return [
        Row(
            f"browser scan of {total:,} Avro records, decoded + CEL",
            "records/s",
            total / statistics.median(avro_s),
            "the same records as JSON",
            total / statistics.median(json_s),
            target="≥ 0.5×",
            check=at_least_ratio(0.5),
        )
    ]


def lookup_rows(lookups: int) -> list[Row]:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from streams.log import LogStore
    from streams.schemas import RegistryConfig, RegistryServer, SchemaRegistry, StoreSchemaLog

    with temp_dir(NAME) as work:
        store = LogStore.open(work, background=False)
        server = None
        try:
            registry = SchemaRegistry(StoreSchemaLog(store))
            ids = [
                registry.register(f"s{i}-value", json.dumps({**ORDER, "name": f"Order{i}"})).id
                for i in range(20)
            ]
            server = RegistryServer(registry, RegistryConfig(port=0)).start()
            uncached = []  # the registry's answer: GET /schemas/ids/{id} on a kept-alive connection
            conn = http.client.HTTPConnection(*server.address)
            for n in range(lookups):
                started = time.perf_counter()
                conn.request("GET", f"/schemas/ids/{ids[n % len(ids)]}")
                response = conn.getresponse()
                assert response.status == 200 and b"Order" in response.read()
                uncached.append(time.perf_counter() - started)
            conn.close()
            client = SchemaRegistryClient({"url": server.url})
            for i in ids:
                client.get_schema(i)
            started = time.perf_counter()
            for n in range(lookups * 20):
                client.get_schema(ids[n % len(ids)])
            cached = (time.perf_counter() - started) / (lookups * 20)
        finally:
            if server is not None:
                server.stop()
            store.close()
    uncached.sort()
    return [
        Row("registry lookup by id, uncached (HTTP), p50", "ms", 1e3 * uncached[len(uncached) // 2],
            higher_is_better=False, note="no peer registry measured here"),
        Row("registry lookup by id, uncached (HTTP), p99", "ms",
            1e3 * uncached[int(len(uncached) * 0.99)], higher_is_better=False),
        Row("registry lookup by id, cached (client)", "µs", 1e6 * cached, higher_is_better=False),
    ]  # fmt: skip


def _produce_seconds(bootstrap: str, topic: str, values: list[bytes]) -> float:
    """Seconds for confluent-kafka's producer to send `values` and have them acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    failed = []

    def done(err, _msg):
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    assert not failed, failed[:3]
    return elapsed


def validation_rows(total: int) -> list[Row]:
    """1 KB Avro records produced through the Kafka port to a topic with
    ``confluent.value.schema.validation=true`` and to one without, interleaved runs."""
    from fastavro import schemaless_writer
    from fastavro.schema import parse_schema

    from streams.broker.runtime import Broker
    from streams.log.config import KAFKA_FLUSH_DEFAULTS
    from streams.protocol import ListenerConfig
    from streams.schemas.wire import encode_header

    record = {"type": "record", "name": "Blob", "fields": [
        {"name": "id", "type": "long"}, {"name": "body", "type": "string"}]}  # fmt: skip
    with temp_dir(NAME) as work:
        # Kafka's flush policy on both topics: an fdatasync per batch would hide the check
        broker = Broker.open(work, metrics=False, health=False, topic_defaults=KAFKA_FLUSH_DEFAULTS)
        try:
            broker.start_kafka_listener(ListenerConfig(port=0))
            schema_id = broker.schemas.register("checked-value", json.dumps(record)).id
            parsed = parse_schema(record)
            values = []
            for i in range(total):
                buf = io.BytesIO()
                buf.write(encode_header(schema_id))
                schemaless_writer(buf, parsed, {"id": i, "body": "x" * 1000})
                values.append(buf.getvalue())
            assert 1000 <= len(values[0]) <= 1100
            broker.store.create_topic("checked", 1, {"confluent.value.schema.validation": "true"})
            broker.store.create_topic("plain", 1)
            bootstrap = "{}:{}".format(*broker.kafka_address)
            times: dict[str, list[float]] = {"checked": [], "plain": []}
            for _ in range(RUNS):
                for topic in ("plain", "checked"):
                    times[topic].append(_produce_seconds(bootstrap, topic, values))
            assert broker.store.partition_log("checked", 0).high_watermark == RUNS * total
        finally:
            broker.close()
    checked = total / statistics.median(times["checked"])
    plain = total / statistics.median(times["plain"])
    return [
        Row("produce 1 KB records, value schema validation on", "records/s", checked,
            "Tidelog, validation off", plain, "≥ 0.85× (≤ 15 % cost)", at_least_ratio(0.85),
            note=f"confluent-kafka producer, linger.ms=5, acks=all; median of {RUNS}"),
    ]  # fmt: skip


def main() -> list[Row]:
    from tests.bench.schemas_jobs import avro_job_rows

    rows = scan_rows(scaled(1_000_000, 5_000))
    rows += lookup_rows(scaled(500, 50))
    rows += validation_rows(scaled(200_000, 5_000))
    rows += avro_job_rows(scaled(200_000, 5_000))
    print_table(rows)
    write_results(NAME, rows)
    return rows


if __name__ == "__main__":
    main()
