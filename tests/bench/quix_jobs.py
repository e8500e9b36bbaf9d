"""The Quix Streams side of ``bench_jobs``: one job, run by the Quix virtualenv's Python.

Quix Streams 3.28.1 pins ``confluent-kafka<2.13`` while Tidelog pins 2.16.1, so Quix runs in
its own virtualenv (``.venv-quix``, made by ``make bench``; requirements-bench-quix.txt) and
this script imports nothing of Tidelog. ``bench_jobs`` starts it once per measurement::

    .venv-quix/bin/python tests/bench/quix_jobs.py window|join --bootstrap HOST:PORT \
        --group G --inputs T [T2] --output OUT --expect N --guarantee at-least-once \
        --state-dir DIR [--size-ms 1000] [--within-ms 500] [--consumer-config JSON]

The jobs, as Quix's documentation writes them (its defaults otherwise: RocksDB state with
changelog topics, ``commit_interval`` 5 s, JSON values), its consumer given the librdkafka
settings the Tidelog worker's consumer has (``--consumer-config``: ``fetch.queue.backoff.ms``,
``streams.librdkafka.FETCH_DEFAULTS``):

- ``window``: ``tumbling_window(size).agg(count=Count(), sum=Sum("v")).final()`` to OUT;
- ``avro-window``: the same over Avro values in Confluent's wire format, read with Quix's
  ``AvroDeserializer`` given the registry (``--schema-registry URL``; Confluent's
  deserializer underneath);
- ``join``: ``left.join_interval(right, backward_ms=W, forward_ms=W)`` (inner) to OUT, merged
  as ``[left, right]``.

It stops once it has processed N input records (``on_message_processed``), which makes
``Application.run`` return after its final checkpoint (outputs flushed, changelogs and offsets
committed; with exactly-once, the transaction committed). On stdout, one JSON line:
``{"seconds": <first processed record .. run() returned>, "cpu_seconds": <the process's CPU
time over the same span>, "processed": N}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=("window", "join", "avro-window"))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--inputs", nargs="+", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--consumer-config", default="{}", help="librdkafka consumer settings, JSON")
    ap.add_argument("--guarantee", default="at-least-once")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--size-ms", type=int, default=1000)
    ap.add_argument("--within-ms", type=int, default=500)
    ap.add_argument("--schema-registry", help="the registry of avro-window's values")
    args = ap.parse_args()

    from quixstreams import Application
    from quixstreams.dataframe.windows import Count, Sum

    seen = {"n": 0, "first": None, "cpu": None}
    app: Application

    def processed(topic: str, partition: int, offset: int) -> None:
        if seen["first"] is None:
            seen["first"], seen["cpu"] = time.perf_counter(), time.process_time()
        seen["n"] += 1
        if seen["n"] == args.expect:
            app.stop()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        state_dir=args.state_dir,
        on_message_processed=processed,
        loglevel=logging.WARNING,
        # the consumer settings the Tidelog worker's consumer has (``--consumer-config``)
        consumer_extra_config=json.loads(args.consumer_config),
    )
    out = app.topic(args.output, key_serializer="bytes", value_serializer="json")
    if args.job in ("window", "avro-window"):
        values = "json"
        if args.job == "avro-window":  # Confluent's AvroDeserializer with the registry's schema
            from quixstreams.models.serializers.avro import AvroDeserializer
            from quixstreams.models.serializers.schema_registry import SchemaRegistryClientConfig

            values = AvroDeserializer(
                schema_registry_client_config=SchemaRegistryClientConfig(url=args.schema_registry)
            )
        src = app.topic(args.inputs[0], key_deserializer="bytes", value_deserializer=values)
        sdf = app.dataframe(src)
        sdf = sdf.tumbling_window(args.size_ms).agg(count=Count(), sum=Sum("v")).final()
        sdf.to_topic(out)
    else:
        left = app.dataframe(
            app.topic(args.inputs[0], key_deserializer="bytes", value_deserializer="json")
        )
        right = app.dataframe(
            app.topic(args.inputs[1], key_deserializer="bytes", value_deserializer="json")
        )
        joined = left.join_interval(
            right,
            how="inner",
            on_merge=lambda lv, rv: [lv, rv],
            backward_ms=args.within_ms,
            forward_ms=args.within_ms,
        )
        joined.to_topic(out)
    app.run()
    ended, cpu = time.perf_counter(), time.process_time()
    result = {
        "seconds": ended - (seen["first"] or ended),
        "cpu_seconds": cpu - (seen["cpu"] or cpu),  # every thread of the process
        "processed": seen["n"],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
