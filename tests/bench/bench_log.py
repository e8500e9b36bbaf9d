"""Benchmark `log`: Tidelog's log store against Redis Streams, measured in the same run.

Run: ``make bench BENCH=log``, ``python -m tests.bench log`` or ``python tests/bench/bench_log.py``.
``BENCH_SCALE`` (default 1.0) scales every size: 1.0 is the issue's 10 million records / ~1 GB,
0.01 a smoke run of a few seconds. Scratch data goes under ``BENCH_TMP`` (default /work/tmp) and
is removed at the end. Writes ``bench-results/log.json``.

What is measured (Tidelog | Redis Streams, AOF on, ``appendfsync everysec``, through redis-py
with the hiredis parser, as users run it, and for (1) and (3) also through redis-py's own
pure-Python parser; the targets are against redis-py + hiredis):

1. batched append, records/s: 100-byte values, ``append_batch`` of 1000 records to one partition
   (default durability: one fdatasync per batch) | XADD pipelined 1000 at a time
   (``transaction=False``);
2. single-record appends, records/s: ``append`` in a loop, with the default policy (fdatasync per
   append) and with ``flush.messages=10000`` | one XADD per call;
3. sequential read of the whole partition written by (1), records/s: ``read(max_records=1000)``
   in a loop | XRANGE ... COUNT 1000 in a loop;
4. p50/p99 latency of reading 100 records at a random offset of a 10-million-record partition,
   1000 reads: ``read(max_records=100)`` | XRANGE from the ID given at XADD (``0-<offset+1>``)
   COUNT 100;
5. restart after SIGKILL with that ~1 GB partition: a child process fills the store (and keeps
   appending) until it is killed; each restart opens + closes a ``cp -a`` copy of the killed
   directory in a fresh process (median of 3) | redis-server holding the same records in its AOF,
   killed, then timed from spawn until it answers PING (median of 3).

(1) and (3) run 5 times, (2) 3 times, interleaved Tidelog/Redis, and report medians. Redis's
background AOF rewrites fork; the benchmark waits for them to finish before each measurement.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis  # noqa: E402

from streams.log import LogStore, ProducerRecord  # noqa: E402
from streams.log import records as rb  # noqa: E402
from tests.bench.common import (  # noqa: E402
    REPO_ROOT,
    RedisServer,
    Row,
    at_least_ratio,
    at_most,
    dir_size,
    log,
    median,
    percentile,
    print_table,
    scale,
    scaled,
    temp_dir,
    write_results,
)

NAME = "log"
PEER_HIREDIS = "redis-streams+hiredis"  # redis-py with the hiredis parser: the peer as users run it
PEER_PLAIN = "redis-streams (redis-py plain)"  # redis-py's pure-Python reply parser
VALUE_SIZE = 100
BATCH = 1000
REPEATS = 5  # batched appends and sequential reads
SINGLE_REPEATS = 3
RANDOM_READS = 1000
READ_COUNT = 100
RESTARTS = 3
SINGLE_TIME_CAP_S = 8.0  # single-append loops stop after this long (rate = done / elapsed)
FIELD = b"v"
TOPIC = "bench"


def sizes() -> dict[str, int]:
    return {
        "big": scaled(10_000_000, 2 * BATCH),  # random reads and restart (~1.1 GB at 1.0)
        "throughput": scaled(1_000_000, 10 * BATCH),  # per batched-append / read trial
        "single_sync": scaled(20_000, 200),
        "single_nosync": scaled(200_000, 2_000),
        "single_redis": scaled(200_000, 2_000),
    }


def make_values(n: int = BATCH) -> list[bytes]:
    rng = random.Random(42)
    return [rng.randbytes(VALUE_SIZE) for _ in range(n)]


def hiredis_version() -> str:
    try:
        import hiredis
    except ImportError:
        return "(not installed)"
    return hiredis.__version__


def redis_id(offset: int) -> str:
    """The explicit stream ID of Tidelog offset `offset` (0-0 is not a valid Redis ID)."""
    return f"0-{offset + 1}"


# ============================================================================ Tidelog side


def tidelog_batched_append(store: LogStore, topic: str, total: int, values: list[bytes]) -> float:
    batch = [ProducerRecord(v) for v in values]
    store.create_topic(topic, 1)
    done = 0
    started = time.perf_counter()
    while done < total:
        chunk = batch if total - done >= len(batch) else batch[: total - done]
        store.append_batch(topic, chunk, partition=0)
        done += len(chunk)
    return done / (time.perf_counter() - started)


def tidelog_sequential_read(store: LogStore, topic: str, cpu: list[float] | None = None) -> float:
    """Records/s; appends the CPU seconds per record (this process) to `cpu` when given."""
    offset, end = store.offsets(topic, 0)
    n = 0
    cpu_started = time.process_time()
    started = time.perf_counter()
    while offset < end:
        records = store.read(topic, 0, offset, max_records=BATCH)
        n += len(records)
        offset = records[-1].offset + 1
    elapsed = time.perf_counter() - started
    if n != end:
        raise AssertionError(f"sequential read returned {n} records, expected {end}")
    if cpu is not None:
        cpu.append((time.process_time() - cpu_started) / n)
    return n / elapsed


def tidelog_single_appends(store: LogStore, topic: str, limit: int, config: dict) -> float:
    store.create_topic(topic, 1, config=config)
    value = make_values(1)[0]
    n = 0
    started = time.perf_counter()
    deadline = started + SINGLE_TIME_CAP_S
    while n < limit:
        store.append(topic, value, partition=0)
        n += 1
        if n % 100 == 0 and time.perf_counter() > deadline:
            break
    return n / (time.perf_counter() - started)


def tidelog_random_reads(store: LogStore, topic: str, records: int) -> list[float]:
    rng = random.Random(7)
    top = records - READ_COUNT
    for _ in range(20):  # warm-up
        store.read(topic, 0, rng.randrange(top), max_records=READ_COUNT)
    latencies = []
    for _ in range(RANDOM_READS):
        offset = rng.randrange(top)
        started = time.perf_counter()
        got = store.read(topic, 0, offset, max_records=READ_COUNT)
        latencies.append(time.perf_counter() - started)
        if len(got) != READ_COUNT or got[0].offset != offset:
            raise AssertionError(f"read at {offset}: {len(got)} records from {got[0].offset}")
    return latencies


# ------------------------------------------------------------------ child processes


def child_writer(path: str, records: int) -> None:
    """Fill a store with `records` records in batches, say ``ready``, keep appending until
    killed (so the SIGKILL lands mid-write, as a crash would)."""
    values = make_values()
    batch = [ProducerRecord(v) for v in values]
    store = LogStore.open(path)
    store.create_topic(TOPIC, 1)
    done = 0
    while done < records:
        chunk = batch if records - done >= BATCH else batch[: records - done]
        store.append_batch(TOPIC, chunk, partition=0)
        done += len(chunk)
    print(f"ready {done}", flush=True)
    while True:
        store.append_batch(TOPIC, batch, partition=0)


def child_restart(path: str) -> None:
    """Open (recovering) and close a killed store; print timings as JSON."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    started = time.perf_counter()
    store = LogStore.open(path)
    opened = time.perf_counter()
    start, end = store.offsets(TOPIC, 0)
    clean = store.was_clean_shutdown
    store.close()
    closed = time.perf_counter()
    print(
        json.dumps(
            {
                "open_s": opened - started,
                "close_s": closed - opened,
                "total_s": closed - started,
                "start": start,
                "end": end,
                "was_clean": clean,
            }
        ),
        flush=True,
    )


def _child(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.bench.bench_log", *args],
        cwd=REPO_ROOT,
        text=True,
        **kwargs,
    )


def fill_and_kill(path: str, records: int) -> int:
    """Run the writer child until it has written `records`, then SIGKILL it; return how many
    records it had confirmed."""
    proc = _child("_writer", path, str(records), stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"writer child failed (exit {proc.wait()}): {line!r}")
        time.sleep(0.3)  # let it get into the next appends
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    return int(line.split()[1])


def fsync_tree(path: str) -> None:
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def tidelog_restart(killed: str, copy: str) -> tuple[dict, float, str]:
    """Copy the killed directory (so every restart is unclean), open + close it in a fresh
    process; return (its report, process wall seconds, its warnings)."""
    subprocess.run(["cp", "-a", killed, copy], check=True)
    fsync_tree(copy)  # else the store's first fdatasync would pay for writing cp's copy out
    started = time.perf_counter()
    proc = _child("_restart", copy, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=600)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise RuntimeError(f"restart child failed ({proc.returncode}):\n{err}")
    return json.loads(out), wall, err.strip()


# ============================================================================ Redis side


def redis_batched_append(r, key: str, total: int, values: list[bytes], first: int = 0) -> float:
    r.delete(key)
    done = 0
    started = time.perf_counter()
    while done < total:
        n = min(BATCH, total - done)
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.xadd(key, {FIELD: values[i]}, id=redis_id(first + done + i))
        pipe.execute()
        done += n
    return done / (time.perf_counter() - started)


def redis_server_cpu(r) -> float:
    """CPU seconds redis-server's main process has used (user + system)."""
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def redis_sequential_read(r, key: str, cpu: list[float] | None = None) -> float:
    """Entries/s; appends the CPU seconds per entry (this client process plus redis-server) to
    `cpu` when given."""
    expected = r.xlen(key)
    n = 0
    low = "-"
    server_started = redis_server_cpu(r)
    cpu_started = time.process_time()
    started = time.perf_counter()
    while True:
        entries = r.xrange(key, min=low, max="+", count=BATCH)
        if not entries:
            break
        n += len(entries)
        low = b"(" + entries[-1][0]
    elapsed = time.perf_counter() - started
    if n != expected:
        raise AssertionError(f"XRANGE returned {n} entries, expected {expected}")
    if cpu is not None:
        client = time.process_time() - cpu_started
        cpu.append((client + redis_server_cpu(r) - server_started) / n)
    return n / elapsed


def redis_single_appends(r, key: str, limit: int) -> float:
    r.delete(key)
    value = make_values(1)[0]
    n = 0
    started = time.perf_counter()
    deadline = started + SINGLE_TIME_CAP_S
    while n < limit:
        r.xadd(key, {FIELD: value}, id=redis_id(n))
        n += 1
        if n % 100 == 0 and time.perf_counter() > deadline:
            break
    return n / (time.perf_counter() - started)


def redis_random_reads(r, key: str, records: int) -> list[float]:
    rng = random.Random(7)
    top = records - READ_COUNT
    for _ in range(20):
        r.xrange(key, min=redis_id(rng.randrange(top)), max="+", count=READ_COUNT)
    latencies = []
    for _ in range(RANDOM_READS):
        offset = rng.randrange(top)
        started = time.perf_counter()
        got = r.xrange(key, min=redis_id(offset), max="+", count=READ_COUNT)
        latencies.append(time.perf_counter() - started)
        if len(got) != READ_COUNT or got[0][0] != redis_id(offset).encode():
            raise AssertionError(f"XRANGE at {offset}: {len(got)} entries")
    return latencies


def redis_restart(server: RedisServer, key: str, expected: int) -> float:
    server.kill()
    seconds = server.start()
    r = server.client(parser="hiredis")
    try:
        length = r.xlen(key)
    finally:
        r.close()
    if length != expected:
        raise AssertionError(f"redis restarted with {length} entries, expected {expected}")
    return seconds


# ============================================================================ phases


def phase_throughput(work: str, n: dict[str, int], values: list[bytes]) -> list[Row]:
    keys = ("t_batch", "h_batch", "p_batch", "t_read", "h_read", "p_read")
    keys += ("t_sync", "t_nosync", "h_single", "t_read_cpu", "h_read_cpu", "p_read_cpu")
    results: dict[str, list[float]] = {k: [] for k in keys}
    with RedisServer(os.path.join(work, "redis-throughput")) as server:
        rh = server.client(parser="hiredis")
        rp = server.client(parser="python")
        parsers = f"{server.parser_in_use(rh)} / {server.parser_in_use(rp)}"
        if not parsers.startswith("_Hiredis") or "Hiredis" in parsers.split("/")[1]:
            raise AssertionError(f"redis-py parsers are {parsers}, wanted hiredis / pure Python")
        store = LogStore.open(os.path.join(work, "tidelog-throughput"))
        try:
            for rep in range(REPEATS):
                topic = f"batched-{rep}"
                server.wait_persistence_idle()
                results["t_batch"].append(
                    tidelog_batched_append(store, topic, n["throughput"], values)
                )
                results["h_batch"].append(redis_batched_append(rh, topic, n["throughput"], values))
                server.wait_persistence_idle()
                results["p_batch"].append(
                    redis_batched_append(rp, f"{topic}-plain", n["throughput"], values)
                )
                rp.delete(f"{topic}-plain")
                server.wait_persistence_idle()
                # both Redis clients read the stream the hiredis run wrote
                results["t_read"].append(
                    tidelog_sequential_read(store, topic, results["t_read_cpu"])
                )
                results["h_read"].append(redis_sequential_read(rh, topic, results["h_read_cpu"]))
                results["p_read"].append(redis_sequential_read(rp, topic, results["p_read_cpu"]))
                store.delete_topic(topic)
                rh.delete(topic)
                log(
                    f"rep {rep + 1}/{REPEATS}: batched append {results['t_batch'][-1]:,.0f} vs "
                    f"{results['h_batch'][-1]:,.0f} hiredis, {results['p_batch'][-1]:,.0f} plain; "
                    f"sequential read {results['t_read'][-1]:,.0f} vs "
                    f"{results['h_read'][-1]:,.0f} hiredis, {results['p_read'][-1]:,.0f} plain "
                    f"records/s (decoder {rb.decoder()})"
                )
            for rep in range(SINGLE_REPEATS):
                server.wait_persistence_idle()
                results["t_sync"].append(
                    tidelog_single_appends(store, f"single-sync-{rep}", n["single_sync"], {})
                )
                results["t_nosync"].append(
                    tidelog_single_appends(
                        store,
                        f"single-nosync-{rep}",
                        n["single_nosync"],
                        {"flush.messages": 10_000},
                    )
                )
                results["h_single"].append(
                    redis_single_appends(rh, f"single-{rep}", n["single_redis"])
                )
                store.delete_topic(f"single-sync-{rep}")
                store.delete_topic(f"single-nosync-{rep}")
                rh.delete(f"single-{rep}")
                log(
                    f"rep {rep + 1}/{SINGLE_REPEATS}: single appends fdatasync "
                    f"{results['t_sync'][-1]:,.0f}, flush.messages=10000 "
                    f"{results['t_nosync'][-1]:,.0f}, redis {results['h_single'][-1]:,.0f}/s"
                )
            version = server.version()
        finally:
            store.close()
            rh.close()
            rp.close()
    m = {k: median(v) for k, v in results.items()}
    spread = {k: f"{min(v):,.0f}..{max(v):,.0f}" for k, v in results.items()}
    runs = f"median of {REPEATS} x {n['throughput']:,} records, interleaved"
    paired = {
        k: median([t / p for t, p in zip(results[f"t_{k}"], results[f"h_{k}"], strict=True)])
        for k in ("batch", "read")
    }
    us = 1e6
    cpu = (
        f"CPU per record (a loaded machine stretches wall time, less so CPU time): Tidelog "
        f"{m['t_read_cpu'] * us:.2f} us, Redis+hiredis {m['h_read_cpu'] * us:.2f} us "
        f"(client + redis-server), {m['h_read_cpu'] / m['t_read_cpu']:.2f}x"
    )
    return [
        Row(
            "batched append (1000/batch)",
            "records/s",
            m["t_batch"],
            PEER_HIREDIS,
            m["h_batch"],
            ">= 6x redis+hiredis",
            at_least_ratio(6),
            note=(
                f"{runs} (Tidelog {spread['t_batch']}, Redis {spread['h_batch']}; median of "
                f"the runs' own ratios {paired['batch']:.2f}x); Tidelog "
                f"fdatasyncs each batch, Redis {version} AOF everysec, XADD pipelined through "
                f"redis-py {redis.__version__} with hiredis {hiredis_version()} (parsers {parsers})"
            ),
        ),
        Row(
            "batched append (1000/batch)",
            "records/s",
            m["t_batch"],
            PEER_PLAIN,
            m["p_batch"],
            note=f"same Tidelog runs; Redis {spread['p_batch']} (redis-py's own parser)",
        ),
        Row(
            "single appends, fdatasync each",
            "records/s",
            m["t_sync"],
            PEER_HIREDIS,
            m["h_single"],
            note=(
                f"Tidelog default flush.messages=1 ({spread['t_sync']}); Redis XADD per call, "
                f"AOF fsync once a second ({spread['h_single']})"
            ),
        ),
        Row(
            "single appends, flush.messages=10000",
            "records/s",
            m["t_nosync"],
            PEER_HIREDIS,
            m["h_single"],
            note=f"Tidelog {spread['t_nosync']}; same Redis runs as the row above",
        ),
        Row(
            "sequential read (1000/call)",
            "records/s",
            m["t_read"],
            PEER_HIREDIS,
            m["h_read"],
            ">= 4x redis+hiredis",
            at_least_ratio(4),
            note=(
                f"whole partition, {runs} (Tidelog {spread['t_read']}, Redis "
                f"{spread['h_read']}; median of the runs' own ratios {paired['read']:.2f}x); "
                f"{cpu}; Tidelog's decoder: {rb.decoder()}, encoder: {rb.encoder()}"
            ),
        ),
        Row(
            "sequential read (1000/call)",
            "records/s",
            m["t_read"],
            PEER_PLAIN,
            m["p_read"],
            note=(
                f"same Tidelog runs; Redis {spread['p_read']} (redis-py's own parser); CPU per "
                f"record, client + redis-server: {m['p_read_cpu'] * us:.2f} us"
            ),
        ),
    ]


def phase_big(work: str, n: dict[str, int], values: list[bytes]) -> list[Row]:
    big = n["big"]
    # ---- Tidelog: fill in a child, SIGKILL it, restart copies of the killed directory
    killed = os.path.join(work, "tidelog-killed")
    log(f"Tidelog: child process appends {big:,} records, then is killed")
    started = time.perf_counter()
    confirmed = fill_and_kill(killed, big)
    size = dir_size(killed)
    log(
        f"Tidelog: {confirmed:,} records confirmed in {time.perf_counter() - started:.1f} s; "
        f"killed with {size / 1e9:.2f} GB on disk"
    )
    reports, walls, warnings = [], [], ""
    copy = ""
    for i in range(RESTARTS):
        if copy:
            shutil.rmtree(copy)
        copy = os.path.join(work, f"tidelog-restart-{i}")
        report, wall, warnings = tidelog_restart(killed, copy)
        if report["was_clean"] or report["end"] < confirmed:
            raise AssertionError(f"restart {i}: {report} (confirmed {confirmed})")
        reports.append(report)
        walls.append(wall)
        log(
            f"Tidelog restart {i + 1}/{RESTARTS}: open {report['open_s']:.3f} s + close "
            f"{report['close_s']:.3f} s (process wall {wall:.2f} s), end offset {report['end']:,}"
        )
    shutil.rmtree(killed)
    if warnings:
        log("Tidelog recovery said:\n    " + warnings.replace("\n", "\n    "))

    # ---- Tidelog random reads on the last (now cleanly closed) copy
    store = LogStore.open(copy)
    try:
        t_lat = tidelog_random_reads(store, TOPIC, big)
    finally:
        store.close()
    shutil.rmtree(copy)

    # ---- Redis: same records, random reads, SIGKILL + restart
    with RedisServer(os.path.join(work, "redis-big")) as server:
        r = server.client(parser="hiredis")
        try:
            log(f"Redis: XADD {big:,} entries, pipelined {BATCH} at a time")
            fill_rate = redis_batched_append(r, TOPIC, big, values)
            server.wait_persistence_idle()
            memory = r.info("memory")["used_memory"]
            log(f"Redis: filled at {fill_rate:,.0f} entries/s, used_memory {memory / 1e9:.2f} GB")
            r_lat = redis_random_reads(r, TOPIC, big)
            server.wait_persistence_idle()
            time.sleep(1.5)  # appendfsync everysec: let the last second reach the disk
            aof = dir_size(os.path.join(server.directory, "appendonlydir"))
        finally:
            r.close()
        r_restarts = []
        for i in range(RESTARTS):
            r_restarts.append(redis_restart(server, TOPIC, big))
            log(f"Redis restart {i + 1}/{RESTARTS}: {r_restarts[-1]:.3f} s to PONG")

    ms = 1000.0
    open_close = median([rep["total_s"] for rep in reports])
    return [
        Row(
            "random read 100 records, p50",
            "ms",
            percentile(t_lat, 50) * ms,
            PEER_HIREDIS,
            percentile(r_lat, 50) * ms,
            higher_is_better=False,
            note=f"{RANDOM_READS} reads at random offsets of a {big:,}-record partition",
        ),
        Row(
            "random read 100 records, p99",
            "ms",
            percentile(t_lat, 99) * ms,
            PEER_HIREDIS,
            percentile(r_lat, 99) * ms,
            "p99 <= 5 ms",
            at_most(5.0),
            higher_is_better=False,
        ),
        Row(
            "restart after SIGKILL",
            "s",
            open_close,
            PEER_HIREDIS,
            median(r_restarts),
            "<= 5 s",
            at_most(5.0),
            higher_is_better=False,
            note=(
                f"Tidelog: LogStore.open + close of a killed {size / 1e9:.2f} GB store, median of "
                f"{RESTARTS} (open {median([x['open_s'] for x in reports]):.3f} s; whole process "
                f"incl. interpreter start {median(walls):.2f} s); Redis: spawn until PING with "
                f"the same {big:,} records in a {aof / 1e9:.2f} GB AOF; page cache warm for both"
            ),
        ),
    ]


def main() -> list[Row]:
    n = sizes()
    values = make_values()
    log(f"BENCH_SCALE={scale()}: sizes {n}")
    busy = load_warning()
    with temp_dir("bench-log-") as work:
        rows = phase_throughput(work, n, values)
        rows += phase_big(work, n, values)
    if busy:
        rows[0].note = f"{rows[0].note}; {busy}"
    print()
    print_table(rows)
    path = write_results(NAME, rows)
    print(f"\nwrote {path}", flush=True)
    return rows


def load_warning() -> str:
    """A warning when other processes already load the CPUs as the run starts (the numbers
    are then pessimistic)."""
    load = os.getloadavg()[0]
    log(f"load average (1 min) {load:.2f} on {os.cpu_count()} CPUs")
    if load > 0.5:
        return f"machine busy: load average {load:.2f} from other processes during the run"
    return ""


def _cli(argv: list[str]) -> int:
    if argv[:1] == ["_writer"]:
        child_writer(argv[1], int(argv[2]))
    elif argv[:1] == ["_restart"]:
        child_restart(argv[1])
    else:
        main()
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli(sys.argv[1:]))
