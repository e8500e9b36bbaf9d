"""Benchmark `jobs`: Tidelog's stream jobs against Quix Streams and Bytewax, in the same run.

Run: ``make bench BENCH=jobs`` or ``python -m tests.bench jobs``. ``BENCH_SCALE`` (default 1.0)
scales the record counts (0.05 is a smoke run); ``BENCH_JOBS_ONLY=window`` (or ``join``)
measures one job only (and writes ``jobs-<job>.json``). Writes ``bench-results/jobs.json``.

Two jobs (issue 13 item 10), each on the same input for every system:

(a) **window**: N records (200,000 at scale 1) of ``{"v": 0..999}`` over 1,000 keys (key
    ``k<i>``), record timestamps at 10,000 records/s of event time, in order; then one
    closing record per key 10 s later (so that every real window closes in every system,
    whatever its window-closing rule). Job: per key, a 1-second tumbling window with count
    and sum, grace 0, emitting each window once when it closes, to an output topic; state
    with changelogs.
(b) **join**: two topics (left, right) of N/2 records each, ``{"id": i}`` over 1,000 keys,
    timestamps 1 ms apart, in order on each side. Job: inner interval join, a left and a right
    record of one key match when their timestamps differ by at most 500 ms; each pair is
    written once, as ``[left, right]``, to an output topic.

Every output is read back from its topic (``read_committed``) and compared with a brute-force
oracle (window: ``(key, start) -> (count, sum)``; join: the multiset of ``(key, left id,
right id)``); a difference fails the benchmark loudly.

Systems:

- **Tidelog, embedded runner** (the default way to run a job: ``streams.jobs.runner.Runner``
  over a ``LogStore`` in the same process, with the cycle collector settled as the console's
  server process settles it (``streams.gcsettings``; Bytewax, which runs in this process, runs
  under the same setting), offsets committed to a ``GroupCoordinator``, state
  in memory with changelog topics; a checkpoint every 5 s, as Quix, once the runner takes
  ``checkpoint_interval_ms``, else a commit after every round). The input is appended to a
  fresh in-process ``LogStore`` (same keys, values and timestamps; not timed). Timed: from
  its first round to the end of its final checkpoint (``close``).
- **Tidelog, worker over Kafka** (``tests/bench/tidelog_jobs.py``: a ``Runner`` over
  ``KafkaLog`` in its own process, as ``python -m streams.jobs run`` runs it, checkpoint every
  5 s) against the same listener and topics as Quix, ``at-least-once`` and ``exactly-once``.
  Measured once ``streams.jobs.kafka`` exists (issue 13 items 4-5); until then its rows say
  "not measured". Its join has a grace as long as its input (see that script). The
  exactly-once target (cost at most 30 % of at-least-once throughput) is checked on these
  rows.
- **Quix Streams 3.28.1** (``tests/bench/quix_jobs.py`` in its own virtualenv ``.venv-quix``,
  because Quix pins confluent-kafka < 2.13 and Tidelog 2.16.1) against Tidelog's Kafka
  listener (``python -m streams.protocol``, a subprocess): its recommended defaults (RocksDB
  state, changelog topics on, commit every 5 s; its consumer's ``fetch.queue.backoff.ms``, 100
  by Quix's default, set to the Tidelog worker's 20: the same client settings on both sides),
  ``at-least-once`` and ``exactly-once``
  (``processing_guarantee``: Kafka transactions). Timed: from its first processed record
  until ``Application.run`` returns after its final checkpoint (start-up, group join and
  topic creation are not timed, for either side).
- **Bytewax 0.21.1** through its Kafka connector (``KafkaSource``/``KafkaSink``, same
  listener, same topics, its consumer with the Tidelog worker's ``fetch.queue.backoff.ms``):
  how its users run a job against Kafka, so it pays for the same
  reading and writing as the others; its in-memory ``TestingSource`` would skip the broker,
  and bench_windows already measures Bytewax's window operator alone that way. Its state
  recovery (SQLite snapshots every epoch, ``RecoveryConfig``) is its counterpart of
  changelogs and is on. It offers no exactly-once to Kafka (its sink is at-least-once), so
  it has no exactly-once row. The window job is ``fold_window`` with an ``EventClock`` (wait
  30 s of system time: its watermark also advances with the wall clock, and a record that
  comes after a longer pause would count as late; so most of its windows close at the end of the
  input, which it reaches since its source stops there) and a 1 s
  ``TumblingWindower``; Bytewax has no interval join operator, so the join is the
  ``stateful_flat_map`` a user writes (per key, both sides' recent records; a record is
  dropped once the other side's newest timestamp for the key is more than 500 ms past it).
  Timed: from its first record to the end of ``run_main`` (the source stops at the end of
  the topics).

Runs are interleaved (Tidelog, Quix at-least-once, Quix exactly-once, Bytewax) ``RUNS`` times;
medians of records/s (input records processed per second) are reported, and (informational
rows) medians of records per CPU-second of each system's own process over the same span: the
machine is shared, and CPU time moves less with its load than wall time does.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.common import (  # noqa: E402
    REPO_ROOT,
    Row,
    at_least_ratio,
    at_most,
    log,
    median,
    print_table,
    scaled,
    temp_dir,
    write_results,
)

NAME = "jobs"
RUNS = 3
KEYS = 1000
RATE = 10_000  # event-time records/s of the window job's input
SIZE_MS = 1000
WITHIN_MS = 500
T0 = 1_800_000_000_000  # a whole second
CLOSE_MS = 10_000  # the closing records come this long after the last real one
SEED = 20261202
QUIX_VERSION = "3.28.1"
BYTEWAX_VERSION = "0.21.1"
GUARANTEES = ("at-least-once", "exactly-once")
BYTEWAX_WAIT_S = 30
CHECKPOINT_MS = 5000
QUIX_PYTHON = REPO_ROOT / ".venv-quix" / "bin" / "python"

Rec = tuple[bytes, bytes, int]  # (key, value, timestamp ms)


# ------------------------------------------------------------------------------ inputs, oracles


def window_input(n: int) -> tuple[list[Rec], int]:
    """The window job's records and the start of the closing records' window."""
    rng = random.Random(SEED)
    recs = []
    for i in range(n):
        key = f"k{rng.randrange(KEYS)}".encode()
        recs.append((key, b'{"v":%d}' % rng.randrange(1000), T0 + i * 1000 // RATE))
    close_ts = recs[-1][2] + CLOSE_MS
    close_ts -= close_ts % SIZE_MS
    recs += [(f"k{k}".encode(), b'{"v":0}', close_ts) for k in range(KEYS)]
    return recs, close_ts


def window_oracle(recs: list[Rec], close_ts: int) -> dict[tuple[str, int], tuple[int, int]]:
    acc: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for key, value, ts in recs:
        if ts >= close_ts:
            continue
        a = acc[(key.decode(), ts - ts % SIZE_MS)]
        a[0] += 1
        a[1] += json.loads(value)["v"]
    return {k: (c, s) for k, (c, s) in acc.items()}


def join_input(n_side: int) -> tuple[list[Rec], list[Rec]]:
    rng = random.Random(SEED + 1)
    sides = []
    for side in range(2):
        recs = []
        for i in range(n_side):
            key = f"k{rng.randrange(KEYS)}".encode()
            recs.append((key, b'{"id":%d}' % (side * n_side + i), T0 + i + side))
        sides.append(recs)
    return sides[0], sides[1]


def join_oracle(left: list[Rec], right: list[Rec]) -> Counter:
    by_key: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for key, value, ts in right:
        by_key[key].append((ts, json.loads(value)["id"]))
    for v in by_key.values():
        v.sort()
    out: Counter = Counter()
    for key, value, ts in left:
        rs = by_key.get(key, [])
        i = bisect.bisect_left(rs, (ts - WITHIN_MS, -1))
        lid = json.loads(value)["id"]
        while i < len(rs) and rs[i][0] <= ts + WITHIN_MS:
            out[(key.decode(), lid, rs[i][1])] += 1
            i += 1
    return out


def check_windows(name: str, got: dict, want: dict) -> None:
    if got != want:
        missing = want.keys() - got.keys()
        extra = got.keys() - want.keys()
        wrong = [k for k in want.keys() & got.keys() if got[k] != want[k]]
        raise SystemExit(
            f"{name}: windows differ from the oracle: {len(missing)} missing "
            f"(e.g. {sorted(missing)[:2]}), {len(extra)} extra (e.g. {sorted(extra)[:2]}), "
            f"{len(wrong)} wrong (e.g. {[(k, got[k], want[k]) for k in wrong[:2]]})"
        )


def check_join(name: str, got: Counter, want: Counter) -> None:
    if got != want:
        missing, extra = want - got, got - want
        raise SystemExit(
            f"{name}: join output differs from the oracle ({sum(want.values()):,} pairs): "
            f"{sum(missing.values())} missing (e.g. {list(missing)[:2]}), "
            f"{sum(extra.values())} extra or repeated (e.g. {list(extra)[:2]})"
        )


def windows_of(rows, close_ts: int) -> dict[tuple[str, int], tuple[int, int]]:
    """``(key, {start, count, sum, ...})`` rows -> the oracle's shape; a window emitted twice
    is an error (each must be written once); windows of the closing records are left out."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for key, v in rows:
        if v["start"] >= close_ts:
            continue
        k = (key, v["start"])
        if k in out:
            raise SystemExit(f"window {k} written twice: {out[k]} and {v}")
        out[k] = (v["count"], v["sum"])
    return out


def pairs_of(rows) -> Counter:
    return Counter((key, lv["id"], rv["id"]) for key, (lv, rv) in rows)


# ------------------------------------------------------------------------------ Kafka helpers


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=30)
    for f in futures.values():
        f.result(timeout=30)


def produce(bootstrap: str, topic: str, recs: list[Rec]) -> None:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
        "queue.buffering.max.messages": 10_000_000, "queue.buffering.max.kbytes": 2_097_151,
    })  # fmt: skip
    failed: list = []
    for key, value, ts in recs:
        producer.produce(
            topic, value, key, timestamp=ts, on_delivery=lambda e, _m: e and failed.append(e)
        )
        producer.poll(0)
    if producer.flush(120) or failed:
        raise SystemExit(f"producing {topic}: {len(failed)} failed ({failed[:1]})")


def consume_all(bootstrap: str, topic: str) -> list[tuple[str, object]]:
    """Every committed record of `topic` (one partition) as ``(key text, JSON value)``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(10_000, 1.0)
            eof = False
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof = True
                        continue
                    raise SystemExit(f"reading {topic}: {m.error()}")
                out.append((m.key().decode(), json.loads(m.value())))
            if eof:
                return out
        raise SystemExit(f"reading {topic}: no end of partition in 120 s")
    finally:
        consumer.close()


# ------------------------------------------------------------------------------ Tidelog


def tidelog_job(workload: str, inputs: list[str], output: str):
    """The benchmark's job in Tidelog's API (the same for the embedded and the Kafka runner)."""
    from streams.jobs import JSON, TEXT, Count, Job, Sum, Tumbling

    job = Job(f"bench-{workload}-{uuid.uuid4().hex[:8]}")
    if workload == "avro-window":  # Avro values read with their writer's schema (registry)
        from streams.jobs.serde import Avro

        (
            job.stream(inputs[0], value=Avro(f"{inputs[0]}-value"))
            .window(Tumbling(SIZE_MS))
            .aggregate(count=Count(), sum=Sum("v"))
            .to(output, key=TEXT)
        )
    elif workload == "window":
        (
            job.stream(inputs[0], value=JSON)
            .window(Tumbling(SIZE_MS))
            .aggregate(count=Count(), sum=Sum("v"))
            .to(output, key=TEXT)  # keys as the input has them (Quix and Bytewax alike)
        )
    else:
        left = job.stream(inputs[0], value=JSON)
        left.join(job.stream(inputs[1], value=JSON), within=WITHIN_MS).to(output, key=TEXT)
    return job


def checkpoint_option() -> dict:
    """``checkpoint_interval_ms=5000`` (Quix's commit interval and the issue's default) when
    the runner takes one (issue 13 item 5); else nothing: it commits after every round."""
    import inspect

    from streams.jobs.runner import Runner

    if "checkpoint_interval_ms" in inspect.signature(Runner).parameters:
        return {"checkpoint_interval_ms": CHECKPOINT_MS}
    return {}


def tidelog_run(workload: str, inputs: dict[str, list[Rec]], tmp: str) -> tuple[float, float, list]:
    """(seconds, CPU seconds, output rows) of the embedded runner on a fresh LogStore holding
    `inputs`; timed from its first round to the end of its final checkpoint (``close``)."""
    from streams.groups import GroupCoordinator
    from streams.jobs.runner import Runner
    from streams.log import LogStore

    store = LogStore.open(os.path.join(tmp, f"tidelog-{uuid.uuid4().hex[:8]}"))
    coordinator = GroupCoordinator(store)
    coordinator.load()
    try:
        for topic, recs in inputs.items():
            store.create_topic(topic, 1)
            for i in range(0, len(recs), 5000):
                store.append_batch(topic, [(v, k, (), ts) for k, v, ts in recs[i : i + 5000]])
        job = tidelog_job(workload, list(inputs), "out")
        runner = Runner(job, store, coordinator=coordinator, **checkpoint_option())
        runner.start()
        started, cpu_started = time.perf_counter(), time.process_time()
        n = runner.run_until_idle()
        late = runner.late_count()
        runner.close()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        expected = sum(len(r) for r in inputs.values())
        if n != expected:
            raise SystemExit(f"tidelog: processed {n} of {expected} records")
        if late:
            raise SystemExit(f"tidelog: {late} late records where none can be")
        rows = []
        pos, end = store.offsets("out", 0)
        while pos < end:
            recs = store.read("out", 0, pos, max_records=10_000)
            rows += [(r.key.decode(), json.loads(r.value)) for r in recs]
            pos = recs[-1].offset + 1
        return elapsed, cpu, rows
    finally:
        coordinator.close()
        store.close()


def kafka_runner_available() -> str | None:
    """None if the runner can run over the Kafka protocol (``streams.jobs.kafka``), else why
    not."""
    try:
        from streams.jobs.kafka import KafkaLog  # noqa: F401
    except ImportError:
        return "the Kafka-protocol runner (python -m streams.jobs run, issue 13 item 4) is absent"
    return None


def tidelog_kafka_run(
    workload: str,
    bootstrap: str,
    inputs: list[str],
    expect: int,
    guarantee: str,
    extra: Sequence[str] = (),
) -> tuple[float, float, list]:
    """``tests/bench/tidelog_jobs.py``: a worker process like ``python -m streams.jobs run``
    (a ``Runner`` over ``KafkaLog``) against the listener, as Quix runs."""
    out = f"tidelog-out-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [out])
    args = [
        sys.executable, str(REPO_ROOT / "tests" / "bench" / "tidelog_jobs.py"), workload,
        "--bootstrap", bootstrap, "--inputs", *inputs, "--output", out,
        "--expect", str(expect), "--guarantee", guarantee,
        "--join-grace-ms", str(expect // 2 + 1000),  # the span of the join input's timestamps
        *extra,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=REPO_ROOT)
    if done.returncode != 0:
        raise SystemExit(f"tidelog worker {workload} {guarantee} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["processed"] != expect or result["late"]:
        raise SystemExit(f"tidelog worker: {result}, expected {expect} records, none late")
    return result["seconds"], result["cpu_seconds"], consume_all(bootstrap, out)


# ------------------------------------------------------------------------------ Quix Streams


def quix_available() -> str | None:
    if not QUIX_PYTHON.exists():
        return f"{QUIX_PYTHON} missing: make bench creates it (requirements-bench-quix.txt)"
    probe = subprocess.run(
        [str(QUIX_PYTHON), "-c", "import quixstreams; print(quixstreams.__version__)"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"quixstreams does not import in .venv-quix: {probe.stderr.strip()[-300:]}"
    if probe.stdout.strip() != QUIX_VERSION:
        return f".venv-quix has quixstreams {probe.stdout.strip()}, want {QUIX_VERSION}"
    return None


def quix_run(
    workload: str,
    bootstrap: str,
    inputs: list[str],
    expect: int,
    guarantee: str,
    tmp: str,
    extra: Sequence[str] = (),
) -> tuple[float, float, list]:
    from streams.librdkafka import FETCH_DEFAULTS

    out = f"quix-out-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [out])
    group = f"quix-{workload}-{uuid.uuid4().hex[:8]}"
    args = [
        str(QUIX_PYTHON), str(REPO_ROOT / "tests" / "bench" / "quix_jobs.py"), workload,
        "--bootstrap", bootstrap, "--group", group, "--inputs", *inputs, "--output", out,
        "--expect", str(expect), "--guarantee", guarantee,
        "--state-dir", os.path.join(tmp, group), "--size-ms", str(SIZE_MS),
        "--within-ms", str(WITHIN_MS),
        # the same consumer settings as the Tidelog worker's (KafkaLog's defaults)
        "--consumer-config", json.dumps(FETCH_DEFAULTS),
        *extra,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"quix {workload} {guarantee} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["processed"] != expect:
        raise SystemExit(f"quix: processed {result['processed']} of {expect}")
    return result["seconds"], result["cpu_seconds"], consume_all(bootstrap, out)


# ------------------------------------------------------------------------------ Bytewax


def bytewax_available() -> str | None:
    try:
        import bytewax.connectors.kafka  # noqa: F401
        import bytewax.operators.windowing  # noqa: F401
    except Exception as e:  # ImportError, or a wheel that does not load here
        return f"bytewax {BYTEWAX_VERSION} could not be imported: {e}"
    return None


def bytewax_run(
    workload: str, bootstrap: str, inputs: list[str], tmp: str
) -> tuple[float, float, list]:
    from datetime import UTC, datetime, timedelta

    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
    from bytewax.dataflow import Dataflow
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import TestingSink, run_main

    from streams.librdkafka import FETCH_DEFAULTS

    out = f"bytewax-out-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [out])
    first: list[float] = []  # [wall, CPU] at the first record
    late: list = []

    def parse(msg):
        if not first:
            first.extend((time.perf_counter(), time.process_time()))
        return msg.key.decode(), (msg.topic, json.loads(msg.value), msg.timestamp[1])

    flow = Dataflow(f"bench_jobs_{workload}")
    # its consumer with the same librdkafka settings as the Tidelog worker's (KafkaLog's)
    fetching = {k: str(v) for k, v in FETCH_DEFAULTS.items()}
    src = KafkaSource([bootstrap], inputs, tail=False, batch_size=1000, add_config=fetching)
    stream = op.map("parse", op.input("in", flow, src), parse)
    if workload == "window":
        clock = win.EventClock(
            lambda item: datetime.fromtimestamp(item[2] / 1000, tz=UTC),
            # its watermark also moves with the system clock: a record that comes after a
            # pause longer than the wait is late, and a loaded machine pauses for seconds
            wait_for_system_duration=timedelta(seconds=BYTEWAX_WAIT_S),
        )
        windower = win.TumblingWindower(
            length=timedelta(milliseconds=SIZE_MS), align_to=datetime(1970, 1, 1, tzinfo=UTC)
        )

        def folder(acc, item):
            acc[0] += 1
            acc[1] += item[1]["v"]
            return acc

        folded = win.fold_window(
            "fold",
            stream,
            clock,
            windower,
            lambda: [0, 0],
            folder,
            lambda a, b: [a[0] + b[0], a[1] + b[1]],
        )

        def encode(kw):
            key, (window_id, (count, total)) = kw
            value = {"start": window_id * SIZE_MS, "count": count, "sum": total}
            return KafkaSinkMessage(key.encode(), json.dumps(value).encode())

        results = op.map("encode", folded.down, encode)
        op.output("late", folded.late, TestingSink(late))
    else:
        left_topic = inputs[0]

        def join(state, item):
            # state: ([left (ts, value)], [right (ts, value)], [newest left ts, newest right ts])
            if state is None:
                state = ([], [], [-1, -1])
            topic, value, ts = item
            side = 0 if topic == left_topic else 1
            mine, other, newest = state[side], state[1 - side], state[2]
            newest[side] = max(newest[side], ts)
            matches = [
                (value, o) if side == 0 else (o, value)
                for t, o in other
                if abs(t - ts) <= WITHIN_MS
            ]
            mine.append((ts, value))
            # a record can match no later record of the other side once that side's newest
            # timestamp is more than WITHIN_MS past it (each topic is in time order)
            for s in (0, 1):
                horizon = newest[1 - s] - WITHIN_MS
                if state[s] and state[s][0][0] < horizon:
                    state[s][:] = [e for e in state[s] if e[0] >= horizon]
            return state, matches

        joined = op.stateful_flat_map("join", stream, join)
        results = op.map(
            "encode",
            joined,
            lambda kv: KafkaSinkMessage(kv[0].encode(), json.dumps(list(kv[1])).encode()),
        )
    op.output("out", results, KafkaSink([bootstrap], out))
    db = os.path.join(tmp, f"bytewax-recovery-{uuid.uuid4().hex[:8]}")
    os.makedirs(db)
    init_db_dir(Path(db), 1)
    run_main(flow, recovery_config=RecoveryConfig(db))
    elapsed, cpu = time.perf_counter() - first[0], time.process_time() - first[1]
    if late:
        raise SystemExit(f"bytewax: {len(late)} records came out late")
    return elapsed, cpu, consume_all(bootstrap, out)


# ------------------------------------------------------------------------------ main


def main() -> None:
    from streams.gcsettings import settle_gc
    from tests.kafka_servers import TidelogListener

    n = scaled(200_000, 5_000)
    win_recs, close_ts = window_input(n)
    win_want = window_oracle(win_recs, close_ts)
    left, right = join_input(n // 2)
    join_want = join_oracle(left, right)
    log(f"window: {len(win_recs):,} records, {len(win_want):,} windows; join: "
        f"{len(left):,} + {len(right):,} records, {sum(join_want.values()):,} pairs")  # fmt: skip
    missing = {
        "quix": quix_available(),
        "bytewax": bytewax_available(),
        "tidelog kafka": kafka_runner_available(),
    }
    for why in missing.values():
        if why:
            log(f"peer not measured: {why}")
    # the embedded runner runs in the console's server process, which settles the cycle
    # collector once it is up (brokerui/asgi.py); so does this process, where Bytewax's run
    # runs too (Quix and the Tidelog worker run in processes of their own, as their users do)
    settle_gc()
    workloads = {
        "window": ({"win-in": win_recs}, len(win_recs)),
        "join": ({"join-left": left, "join-right": right}, len(left) + len(right)),
    }
    only = [w for w in os.environ.get("BENCH_JOBS_ONLY", "").split(",") if w]
    if only:  # BENCH_JOBS_ONLY=window (or join): measure that job only
        unknown = set(only) - workloads.keys()
        if unknown:
            raise SystemExit(f"BENCH_JOBS_ONLY: unknown job(s) {sorted(unknown)}: window, join")
        workloads = {w: v for w, v in workloads.items() if w in only}
    rates: dict[tuple[str, str], list[float]] = defaultdict(list)
    cpu_rates: dict[tuple[str, str], list[float]] = defaultdict(list)
    with temp_dir("bench-jobs-") as tmp:
        listener = TidelogListener(os.path.join(tmp, "listener"))
        with listener:
            bootstrap = listener.bootstrap
            create_topics(bootstrap, ["win-in", "join-left", "join-right"])
            for topic, recs in (("win-in", win_recs), ("join-left", left), ("join-right", right)):
                produce(bootstrap, topic, recs)
            log(f"inputs written to the Tidelog listener on {bootstrap}")
            for run in range(1, RUNS + 1):
                for workload, (inputs, total) in workloads.items():
                    want = win_want if workload == "window" else join_want
                    for system, rate, cpu_rate in measure_once(
                        workload, inputs, total, want, close_ts, bootstrap, tmp, missing
                    ):
                        rates[(workload, system)].append(rate)
                        cpu_rates[(workload, system)].append(cpu_rate)
                        log(f"run {run} {workload} {system}: {rate:,.0f} records/s, "
                            f"{cpu_rate:,.0f} records per CPU-second, output matches the "
                            f"oracle (load {os.getloadavg()[0]:.1f})")  # fmt: skip
    table = rows_of({k: median(v) for k, v in rates.items()}, missing)
    table += cpu_rows_of({k: median(v) for k, v in cpu_rates.items()})
    print_table(table)
    log(f"wrote {write_results(NAME + ''.join(f'-{w}' for w in only), table)}")


def measure_once(workload, inputs, total, want, close_ts, bootstrap, tmp, missing):
    """One interleaved round of `workload`: yields ``(system, records/s, records per
    CPU-second)`` per system, each output checked against the oracle first."""
    topics = list(inputs)

    def verify(name: str, rows: list) -> None:
        if workload == "window":
            check_windows(name, windows_of(rows, close_ts), want)
        else:
            check_join(name, pairs_of(rows), want)

    seconds, cpu, rows = tidelog_run(workload, inputs, tmp)
    verify("tidelog", rows)
    yield "tidelog embedded", total / seconds, total / cpu
    if missing["tidelog kafka"] is None:
        for guarantee in GUARANTEES:
            seconds, cpu, rows = tidelog_kafka_run(workload, bootstrap, topics, total, guarantee)
            verify(f"tidelog worker {guarantee}", rows)
            yield f"tidelog worker {guarantee}", total / seconds, total / cpu
    if missing["quix"] is None:
        for guarantee in GUARANTEES:
            seconds, cpu, rows = quix_run(workload, bootstrap, topics, total, guarantee, tmp)
            verify(f"quix {guarantee}", rows)
            yield f"quix {guarantee}", total / seconds, total / cpu
    if missing["bytewax"] is None:
        seconds, cpu, rows = bytewax_run(workload, bootstrap, topics, tmp)
        verify("bytewax", rows)
        yield "bytewax", total / seconds, total / cpu


def measured(value: float | None, peer: float | None):
    """The 10x check for a row whose two sides were measured; none (no verdict) if not."""
    return at_least_ratio(10) if value and peer else None


def rows_of(m: dict, missing: dict) -> list[Row]:
    out = []
    labels = {
        "window": "(a) keyed 1 s tumbling count+sum, changelogs",
        "join": "(b) stream-stream interval join (500 ms), changelogs",
    }
    quix, bytewax = f"quix {QUIX_VERSION}", f"bytewax {BYTEWAX_VERSION}"
    checkpoints = (
        f"checkpoint every {CHECKPOINT_MS} ms" if checkpoint_option() else "commit every round"
    )
    for workload, label in labels.items():
        if (workload, "tidelog embedded") not in m:  # left out (BENCH_JOBS_ONLY)
            continue
        t = m[(workload, "tidelog embedded")]
        w_alo = m.get((workload, "tidelog worker at-least-once"))
        w_eos = m.get((workload, "tidelog worker exactly-once"))
        q_alo = m.get((workload, "quix at-least-once"))
        q_eos = m.get((workload, "quix exactly-once"))
        bw = m.get((workload, "bytewax"))
        no_worker = f"Tidelog not measured: {missing['tidelog kafka']}"
        out += [
            Row(f"{label}, at-least-once, embedded runner", "records/s", t,
                f"{quix} at-least-once", q_alo, ">= 10x peer", measured(t, q_alo),
                note=f"Tidelog: embedded Runner over the LogStore, {checkpoints}"
                if q_alo else f"peer not measured: {missing['quix']}"),
            Row(f"{label}, at-least-once, embedded runner", "records/s", t, bytewax, bw,
                ">= 10x peer", measured(t, bw),
                note=None if bw else f"peer not measured: {missing['bytewax']}"),
            Row(f"{label}, at-least-once, worker over Kafka", "records/s", w_alo,
                f"{quix} at-least-once", q_alo, ">= 10x peer", measured(w_alo, q_alo),
                note="Tidelog: Runner over KafkaLog (python -m streams.jobs run), checkpoint "
                     f"every {CHECKPOINT_MS} ms, same listener as Quix"
                if w_alo else no_worker),
            Row(f"{label}, exactly-once, worker over Kafka", "records/s", w_eos,
                f"{quix} exactly-once", q_eos, ">= 10x peer", measured(w_eos, q_eos),
                note=None if w_eos else no_worker),
        ]  # fmt: skip
        if w_alo and w_eos:
            out.append(
                Row(f"{label}: Tidelog's exactly-once cost", "% of at-least-once",
                    100 * (1 - w_eos / w_alo), target="<= 30 %", check=at_most(30.0),
                    higher_is_better=False,
                    note="1 - (worker exactly-once / worker at-least-once records/s)"),
            )  # fmt: skip
        if q_alo and q_eos:
            out.append(
                Row(f"{label}: Quix's exactly-once cost", "% of at-least-once",
                    100 * (1 - q_eos / q_alo),
                    note="informational: the throughput Quix gives up for transactions"),
            )  # fmt: skip
    return out


def cpu_rows_of(m: dict) -> list[Row]:
    """Informational: input records per CPU-second of each system's own process (every
    thread; the broker's CPU counted for none), over the span its records/s is timed. On a
    shared machine this moves less with the load than records/s does."""
    out = []
    pairs = [
        ("tidelog embedded", "quix at-least-once", "at-least-once, embedded runner"),
        ("tidelog embedded", "bytewax", "at-least-once, embedded runner"),
        ("tidelog worker at-least-once", "quix at-least-once", "at-least-once, worker"),
        ("tidelog worker exactly-once", "quix exactly-once", "exactly-once, worker"),
    ]
    for workload in ("window", "join"):
        for mine, peer, label in pairs:
            t, p = m.get((workload, mine)), m.get((workload, peer))
            if t is None or p is None:
                continue
            name = (
                f"quix {QUIX_VERSION} {peer[5:]}"
                if peer.startswith("quix")
                else (f"bytewax {BYTEWAX_VERSION}")
            )
            note = (
                None
                if out
                else (
                    "informational: records per CPU-second of the system's own process (all its "
                    "threads) over the span its records/s is timed; the broker's CPU counts for "
                    "no one"
                )
            )
            out.append(
                Row(f"({workload}) {label}: CPU efficiency", "records/CPU-s", t, name, p,
                    note=note)
            )  # fmt: skip
    return out


if __name__ == "__main__":
    main()
