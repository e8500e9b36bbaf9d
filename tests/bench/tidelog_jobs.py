"""The Tidelog worker side of ``bench_jobs``: one job over the Kafka protocol, in its own
process, as ``python -m streams.jobs run`` runs it (a ``Runner`` over ``KafkaLog``, checkpoint
every 5 s), so that it meets Quix on the same ground: the same listener, the same topics::

    python tests/bench/tidelog_jobs.py window|join --bootstrap HOST:PORT --inputs T [T2] \
        --output OUT --expect N --guarantee at-least-once|exactly-once

The CLI runs until stopped; this script stops once it has processed N input records, then
closes the runner (its final checkpoint: outputs flushed, changelogs and offsets committed;
with exactly-once, each task's transaction committed). The job is ``bench_jobs.tidelog_job``,
except that the join gets a grace (``--join-grace-ms``; the bench gives the span of its input's
timestamps): over Kafka the runner feeds whatever each input's fetch has brought, and one
input's fetches can run many seconds of event time ahead of the other's; a record behind the
watermark would be dropped as late. (Quix keeps its join state for 7 days by default: it too
holds the whole input.)
On stdout, one JSON line: ``{"seconds": <first round with records .. close() returned>,
"cpu_seconds": <the process's CPU time over the same span>, "processed": N, "late": L}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=("window", "join", "avro-window"))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--inputs", nargs="+", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--guarantee", default="at-least-once")
    ap.add_argument("--join-grace-ms", type=int, default=0)
    ap.add_argument("--schema-registry", help="the registry of avro-window's values")
    args = ap.parse_args()
    if args.schema_registry:  # as python -m streams.jobs run --schema-registry does
        import os

        os.environ["TIDELOG_SCHEMA_REGISTRY"] = args.schema_registry

    from streams.jobs.kafka import KafkaLog
    from streams.jobs.runner import Runner
    from streams.jobs.worker import settle_gc
    from tests.bench.bench_jobs import CHECKPOINT_MS, tidelog_job

    job = tidelog_job(args.job, args.inputs, args.output)
    if args.job == "join":
        next(n for n in job.nodes if n.kind == "interval_join").params["grace_ms"] = (
            args.join_grace_ms
        )
    log = KafkaLog(args.bootstrap, exactly_once=args.guarantee == "exactly-once")
    runner = Runner(job, log=log, checkpoint_interval_ms=CHECKPOINT_MS)
    settle_gc()  # as python -m streams.jobs run does
    runner.start()
    done, started, cpu_started = 0, None, 0.0
    deadline = time.monotonic() + 1800
    while done < args.expect:
        if time.monotonic() > deadline:
            raise SystemExit(f"processed {done} of {args.expect} records in 30 minutes")
        before, cpu_before = time.perf_counter(), time.process_time()
        n = runner.poll_once()
        if n and started is None:
            started, cpu_started = before, cpu_before
        done += n
    late = runner.late_count()
    runner.close()
    ended, cpu = time.perf_counter(), time.process_time()
    result = {
        "seconds": ended - started,
        "cpu_seconds": cpu - cpu_started,  # every thread of the process (librdkafka's too)
        "processed": done,
        "late": late,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
