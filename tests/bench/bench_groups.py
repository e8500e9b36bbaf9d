"""Benchmark `groups`: consuming through a consumer group, Tidelog against Redis Streams.

Run: ``make bench BENCH=groups``, ``python -m tests.bench groups`` or
``python tests/bench/bench_groups.py``. ``BENCH_SCALE`` (default 1.0) scales the record count:
1.0 is the issue's 1,000,000 records of 100 bytes per variant, 0.05 a run of a few seconds.
Scratch data goes under ``BENCH_TMP`` (default /work/tmp) and is removed at the end. Writes
``bench-results/groups.json``.

What is measured, records/s from the first poll until every record has been consumed and
acknowledged, over a pre-filled log (filling is not timed):

    Tidelog        ``streams.client.Consumer`` subscribed in a group (coordinator running, as in
                   the server), ``poll(max_records=1000)`` in a loop, ``commit()`` (synchronous:
                   one batch to ``__consumer_offsets``, fdatasync'd) every 1,000 records
    Redis Streams  redis-py against a private redis-server (AOF on, ``appendfsync everysec``,
                   as in ``bench_log``): ``XREADGROUP GROUP g c COUNT 1000 STREAMS ... >`` in a
                   loop, then ``XACK`` of every id read (one XACK per stream, pipelined)

in two variants: 1 partition | 1 stream, and 6 partitions | 6 streams (the records spread evenly;
Redis reads all six in each XREADGROUP, COUNT 1000 per stream). Each variant runs 3 times,
alternating Tidelog and Redis, each run with a fresh group reading from the start; the table
shows medians. Every run checks that it saw every record once and left nothing uncommitted
(Tidelog: committed offsets = end offsets; Redis: an empty pending entries list).

``python tests/bench/bench_groups.py --profile`` runs the Tidelog side once under cProfile and
prints the top functions instead.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams.client import Consumer  # noqa: E402
from streams.groups import GroupCoordinator  # noqa: E402
from streams.log import LogStore, ProducerRecord  # noqa: E402
from tests.bench.common import (  # noqa: E402
    RedisServer,
    Row,
    at_least_ratio,
    log,
    median,
    print_table,
    scale,
    scaled,
    temp_dir,
    write_results,
)

NAME = "groups"
PEER = "redis-streams"
VALUE_SIZE = 100
BATCH = 1000  # records per poll / XREADGROUP COUNT, and per commit / XACK
REPEATS = 3
VARIANTS = (1, 6)  # partitions (Tidelog) = streams (Redis)
FIELD = b"v"
TARGET = 5.0


def record_count() -> int:
    return scaled(1_000_000, 10 * BATCH)


def make_values(n: int = BATCH) -> list[bytes]:
    rng = random.Random(42)
    return [rng.randbytes(VALUE_SIZE) for _ in range(n)]


def spread(total: int, parts: int) -> list[int]:
    """`total` records over `parts` partitions, as evenly as possible."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


# ============================================================================ Tidelog side


def tidelog_fill(store: LogStore, topic: str, partitions: int, total: int, values) -> None:
    store.create_topic(topic, partitions)
    batch = [ProducerRecord(v) for v in values]
    for p, count in enumerate(spread(total, partitions)):
        done = 0
        while done < count:
            chunk = batch[: min(BATCH, count - done)]
            store.append_batch(topic, chunk, partition=p)
            done += len(chunk)


def tidelog_consume(store: LogStore, coordinator: GroupCoordinator, topic: str, group: str):
    """Consume `topic` from the start in a fresh group; return (records/s, records)."""
    partitions = store.partition_count(topic)
    ends = {(topic, p): store.offsets(topic, p)[1] for p in range(partitions)}
    total = sum(ends.values())
    consumer = Consumer(
        store,
        coordinator,
        group,
        client_id="bench",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=BATCH,
    )
    try:
        consumer.subscribe([topic])
        seen = uncommitted = 0
        started = time.perf_counter()
        while seen < total:
            records = consumer.poll(timeout_ms=1000, max_records=BATCH)
            if not records:
                raise AssertionError(f"poll returned nothing after {seen:,} of {total:,}")
            seen += len(records)
            uncommitted += len(records)
            if uncommitted >= BATCH:
                consumer.commit()
                uncommitted = 0
        if uncommitted:
            consumer.commit()
        elapsed = time.perf_counter() - started
        committed = {tp: c.offset for tp, c in coordinator.committed(group).items()}
    finally:
        consumer.close(autocommit=False)
    if seen != total or committed != ends:
        raise AssertionError(f"{group}: saw {seen:,} of {total:,}; committed {committed}")
    return seen / elapsed, seen


# ============================================================================ Redis side


def redis_fill(r, keys: list[str], total: int, values) -> None:
    for key, count in zip(keys, spread(total, len(keys)), strict=True):
        r.delete(key)
        done = 0
        while done < count:
            n = min(BATCH, count - done)
            pipe = r.pipeline(transaction=False)
            for i in range(n):
                pipe.xadd(key, {FIELD: values[i]})
            pipe.execute()
            done += n


def redis_consume(r, keys: list[str], group: str):
    """XREADGROUP from the start in a fresh group, XACK what was read; (records/s, records)."""
    total = sum(r.xlen(k) for k in keys)
    for key in keys:
        r.xgroup_create(key, group, id="0")
    streams = {key: ">" for key in keys}
    seen = 0
    started = time.perf_counter()
    while seen < total:
        reply = r.xreadgroup(group, "bench", streams, count=BATCH)
        if not reply:
            raise AssertionError(f"XREADGROUP returned nothing after {seen:,} of {total:,}")
        pipe = r.pipeline(transaction=False)
        for key, entries in reply:
            if entries:
                seen += len(entries)
                pipe.xack(key, group, *[entry_id for entry_id, _ in entries])
        pipe.execute()
    elapsed = time.perf_counter() - started
    pending = sum(r.xpending(key, group)["pending"] for key in keys)
    if seen != total or pending:
        raise AssertionError(f"{group}: read {seen:,} of {total:,}; {pending} still pending")
    for key in keys:
        r.xgroup_destroy(key, group)
    return seen / elapsed, seen


# ============================================================================ the run


def run_variant(work: str, server: RedisServer, partitions: int, total: int, values) -> Row:
    topic = f"bench-{partitions}p"
    keys = [f"{topic}-{i}" for i in range(partitions)]
    store = LogStore.open(os.path.join(work, f"tidelog-{partitions}p"))
    coordinator = GroupCoordinator(store).start()
    r = server.client()
    t_rates, r_rates = [], []
    try:
        log(f"{partitions} partition(s): filling {total:,} records of {VALUE_SIZE} bytes")
        tidelog_fill(store, topic, partitions, total, values)
        redis_fill(r, keys, total, values)
        for rep in range(REPEATS):
            server.wait_persistence_idle()
            t_rate, _ = tidelog_consume(store, coordinator, topic, f"g{rep}")
            t_rates.append(t_rate)
            server.wait_persistence_idle()
            r_rate, _ = redis_consume(r, keys, f"g{rep}")
            r_rates.append(r_rate)
            log(
                f"{partitions} partition(s), run {rep + 1}/{REPEATS}: Tidelog {t_rate:,.0f}, "
                f"Redis {r_rate:,.0f} records/s"
            )
        for key in keys:
            r.delete(key)
    finally:
        r.close()
        coordinator.close()
        store.close()
    return Row(
        f"group consume, {partitions} partition{'s' if partitions > 1 else ''} "
        "(poll + commit/1000)",
        "records/s",
        median(t_rates),
        PEER,
        median(r_rates),
        f">= {TARGET:g}x peer",
        at_least_ratio(TARGET),
        note=(
            f"median of {REPEATS} x {total:,} records (Tidelog {min(t_rates):,.0f}.."
            f"{max(t_rates):,.0f}, Redis {min(r_rates):,.0f}..{max(r_rates):,.0f}); "
            + (
                "Redis: one stream"
                if partitions == 1
                else f"Redis: {partitions} streams in each XREADGROUP (COUNT {BATCH} per stream)"
            )
        ),
    )


def main() -> list[Row]:
    total = record_count()
    values = make_values()
    log(f"BENCH_SCALE={scale()}: {total:,} records per variant, variants {VARIANTS} partitions")
    busy = load_warning()
    rows = []
    with temp_dir("bench-groups-") as work:
        with RedisServer(os.path.join(work, "redis")) as server:
            version = server.version()
            for partitions in VARIANTS:
                rows.append(run_variant(work, server, partitions, total, values))
    rows[0].note = (
        f"{rows[0].note}; Tidelog's consumer runs in-process over the embedded store and "
        "commits to __consumer_offsets (member commits reach disk within flush.ms, as in "
        f"Kafka), Redis {version} is reached over loopback TCP by redis-py {redis_parser()}"
    )
    if busy:
        rows[0].note = f"{rows[0].note}; {busy}"
    print()
    print_table(rows)
    path = write_results(NAME, rows)
    print(f"\nwrote {path}", flush=True)
    return rows


def redis_parser() -> str:
    """Which reply parser redis-py uses: most of the Redis side's client time is parsing."""
    import redis
    from redis.utils import HIREDIS_AVAILABLE

    parser = "hiredis" if HIREDIS_AVAILABLE else "its pure-Python reply parser (no hiredis)"
    return f"{redis.__version__} with {parser}"


def load_warning() -> str:
    load = os.getloadavg()[0]
    log(f"load average (1 min) {load:.2f} on {os.cpu_count()} CPUs")
    if load > 0.5:
        return f"machine busy: load average {load:.2f} from other processes during the run"
    return ""


def profile(partitions: int = 1) -> None:
    """The Tidelog side once under cProfile: the top functions by own and cumulative time."""
    total = record_count()
    with temp_dir("bench-groups-profile-") as work:
        store = LogStore.open(os.path.join(work, "tidelog"))
        coordinator = GroupCoordinator(store).start()
        try:
            tidelog_fill(store, "bench", partitions, total, make_values())
            profiler = cProfile.Profile()
            profiler.enable()
            rate, _ = tidelog_consume(store, coordinator, "bench", "profiled")
            profiler.disable()
        finally:
            coordinator.close()
            store.close()
    print(f"{total:,} records, {partitions} partition(s): {rate:,.0f} records/s under cProfile")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)


def _cli(argv: list[str]) -> int:
    if argv[:1] == ["--profile"]:
        profile(int(argv[1]) if len(argv) > 1 else 1)
    else:
        main()
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli(sys.argv[1:]))
