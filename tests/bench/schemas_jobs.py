"""The Avro job rows of ``bench_schemas``: a job reading Avro values in Confluent's wire
format through the schema registry, Tidelog's worker against Quix Streams.

The workload is ``bench_jobs``' window job (a 1 s tumbling window counting and summing ``v``
per key over 1,000 keys) with its values as a 10-field Avro record instead of JSON, written
through Tidelog's registry with the registry's id in each record. Tidelog's worker
(``tests/bench/tidelog_jobs.py avro-window``, a ``Runner`` over ``KafkaLog`` as ``python -m
streams.jobs run --schema-registry URL`` runs it) reads them with ``Avro(subject)``; Quix
Streams 3.28.1 (``quix_jobs.py avro-window``, its own virtualenv) with its
``AvroDeserializer`` given the same registry. Both at-least-once and exactly-once, the same
consumer settings, runs interleaved, every output checked against the oracle; records/s
from the first record processed to the final checkpoint, median of ``RUNS``.
"""

from __future__ import annotations

import io
import json
import os
import statistics

from tests.bench.bench_jobs import (
    GUARANTEES,
    QUIX_VERSION,
    check_windows,
    create_topics,
    produce,
    quix_available,
    quix_run,
    tidelog_kafka_run,
    window_input,
    window_oracle,
    windows_of,
)
from tests.bench.common import Row, at_least_ratio, log, temp_dir

RUNS = 3
TOPIC = "avro-win-in"
RECORD = {
    "type": "record",
    "name": "Reading",
    "namespace": "bench",
    "fields": [
        {"name": "v", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "site", "type": "string"},
        {"name": "unit", "type": {"type": "enum", "name": "Unit", "symbols": ["C", "F", "K"]}},
        {"name": "reading", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "seq", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "firmware", "type": "string"},
        {"name": "at", "type": "long"},
    ],
}


def _avro_values(recs, schema_id: int):
    from fastavro import schemaless_writer
    from fastavro.schema import parse_schema

    from streams.schemas.wire import encode_header

    parsed = parse_schema(RECORD)
    out = []
    for i, (key, value, ts) in enumerate(recs):
        buf = io.BytesIO()
        buf.write(encode_header(schema_id))
        datum = {
            "v": json.loads(value)["v"], "sensor": key.decode(), "site": f"site-{i % 7}",
            "unit": "C", "reading": i / 10, "ok": i % 2 == 0, "seq": i % 1000,
            "note": None if i % 3 else "checked", "firmware": "1.4.2", "at": ts,
        }  # fmt: skip
        schemaless_writer(buf, parsed, datum)
        out.append((key, buf.getvalue(), ts))
    return out


def avro_job_rows(n: int) -> list[Row]:
    from streams.log import LogStore
    from streams.schemas import RegistryConfig, RegistryServer, SchemaRegistry, StoreSchemaLog
    from tests.kafka_servers import TidelogListener

    missing = quix_available()
    recs, close_ts = window_input(n)
    want = window_oracle(recs, close_ts)
    rates: dict[str, list[float]] = {}
    with temp_dir("bench-schemas-jobs-") as tmp:
        store = LogStore.open(os.path.join(tmp, "registry"))
        server = None
        try:
            registry = SchemaRegistry(StoreSchemaLog(store))
            schema_id = registry.register(f"{TOPIC}-value", json.dumps(RECORD)).id
            server = RegistryServer(registry, RegistryConfig(port=0)).start()
            extra = ["--schema-registry", server.url]
            with TidelogListener(os.path.join(tmp, "listener")) as listener:
                bootstrap = listener.bootstrap
                create_topics(bootstrap, [TOPIC])
                produce(bootstrap, TOPIC, _avro_values(recs, schema_id))
                log(f"avro job: {len(recs):,} Avro records, {len(want):,} windows")
                total = len(recs)
                for run in range(1, RUNS + 1):
                    for guarantee in GUARANTEES:
                        sides = [("tidelog worker", None)]
                        if missing is None:
                            sides.append(("quix", tmp))
                        for system, quix_tmp in sides:
                            if quix_tmp is None:
                                seconds, _cpu, rows = tidelog_kafka_run(
                                    "avro-window", bootstrap, [TOPIC], total, guarantee, extra
                                )
                            else:
                                seconds, _cpu, rows = quix_run(
                                    "avro-window", bootstrap, [TOPIC], total, guarantee,
                                    quix_tmp, extra,
                                )  # fmt: skip
                            name = f"{system} {guarantee}"
                            check_windows(name, windows_of(rows, close_ts), want)
                            rates.setdefault(name, []).append(total / seconds)
                            log(f"run {run} avro job {name}: {total / seconds:,.0f} records/s,"
                                " output matches the oracle")  # fmt: skip
        finally:
            if server is not None:
                server.stop()
            store.close()
    rows = []
    for guarantee in GUARANTEES:
        ours = statistics.median(rates[f"tidelog worker {guarantee}"])
        peer = rates.get(f"quix {guarantee}")
        rows.append(Row(
            f"Avro window job (registry), worker, {guarantee}", "records/s", ours,
            f"quix {QUIX_VERSION} {guarantee}", statistics.median(peer) if peer else None,
            "≥ 10× peer", at_least_ratio(10) if peer else None,
            note=None if peer else f"peer not measured: {missing}",
        ))  # fmt: skip
    return rows
