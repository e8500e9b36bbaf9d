"""Live-metrics push latency: from an append to a browser receiving the 1-second window with it.

Setting (the issue's): 10,000 records/s appended to a topic, 20 open dashboards — 20 WebSocket
clients on a real Daphne server, logged in (a session cookie), subscribed to the overview. For
every window a client receives, the latency of each record in it is the receive time minus the
record's append time (when ``append_batch`` returned); the table gives p50 and p99 over all
records and clients.

The issue names no peer, so the comparison row is the same measurement with the channels-redis
layer (``REDIS_URL`` set, a private redis-server started here) instead of the in-memory layer.

Each run is a child process (settings are read once per process): it opens a fresh data
directory, starts Daphne in-process (the broker and its metrics hub run in the same process, as
under ``make run``), appends from a thread, and starts the 20 clients as one more child process
(asyncio + ``websockets``) so they do not share the server's interpreter. Medians of
``BENCH_RUNS`` runs (default 3); ``BENCH_SCALE`` scales the measured seconds.

    python -m tests.bench.bench_push                # what `make bench BENCH=push` runs
    python -m tests.bench.bench_push --run memory   # one run, JSON on stdout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.bench.common import (
    REPO_ROOT,
    RedisServer,
    Row,
    at_most,
    free_port,
    log,
    median,
    percentile,
    print_table,
    scale,
    temp_dir,
    write_results,
)

RATE = 10_000  # records/s
BATCH = 100  # records per append: 100 appends per second
CLIENTS = 20
TOPIC = "bench-push"
PARTITIONS = 4
WARMUP_S = 3
TARGET_P99_MS = 1500
TAIL_TARGET_P99_MS = 250  # issue 27: produce -> row visible


# ------------------------------------------------------------------------------ the parent


def main() -> None:
    runs = int(os.environ.get("BENCH_RUNS", "3"))
    seconds = max(5, int(20 * scale()))
    results: dict[str, list[dict]] = {"memory": [], "redis": []}
    with temp_dir("bench-push-") as scratch:
        with RedisServer(os.path.join(scratch, "redis"), appendonly=False) as redis:
            for i in range(runs):
                for layer in results:
                    url = f"redis://127.0.0.1:{redis.port}/0" if layer == "redis" else ""
                    log(f"run {i + 1}/{runs}: {layer} layer, {seconds} s at {RATE:,} records/s")
                    results[layer].append(_child_run(layer, url, seconds, scratch))
                    log(
                        f"  p50 {results[layer][-1]['p50']:.0f} ms, "
                        f"p99 {results[layer][-1]['p99']:.0f} ms"
                    )
    rows = _rows(results, runs, seconds)
    print_table(rows)
    write_results("push", rows)


def _child_run(layer: str, redis_url: str, seconds: int, scratch: str) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)
    if redis_url:
        env["REDIS_URL"] = redis_url
    cmd = [
        sys.executable,
        "-m",
        "tests.bench.bench_push",
        "--run",
        layer,
        "--seconds",
        str(seconds),
        "--scratch",
        scratch,
    ]
    done = subprocess.run(
        cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=seconds + 240
    )
    if done.returncode != 0:
        raise SystemExit(f"bench push run failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = "RedisChannelLayer" if redis_url else "InMemoryChannelLayer"
    if result["layer"] != expected:
        raise SystemExit(f"bench push: ran on {result['layer']}, expected {expected}")
    return result


def _rows(results: dict[str, list[dict]], runs: int, seconds: int) -> list[Row]:
    def row(metric: str, unit: str, key: str, note: str, **extra) -> Row:
        """One measured key, in-memory layer against the channels-redis one (medians)."""
        return Row(
            metric=metric,
            unit=unit,
            tidelog=median([r[key] for r in results["memory"]]),
            peer="channels-redis layer",
            peer_value=median([r[key] for r in results["redis"]]),
            note=note,
            **extra,
        )

    def latency(metric: str, key: str, note: str, target_ms: int | None = None) -> Row:
        if target_ms is None:
            return row(metric, "ms", key, note, higher_is_better=False)
        return row(metric, "ms", key, note, higher_is_better=False,
                   target=f"p99 <= {target_ms} ms", check=at_most(target_ms))  # fmt: skip

    note = (
        f"{CLIENTS} WebSocket clients on Daphne, overview subscription, {RATE:,} records/s "
        f"in batches of {BATCH} to a {PARTITIONS}-partition topic, {seconds} s per run after "
        f"{WARMUP_S} s warm-up, median of {runs} runs; latency = receive time - append time "
        f"of each record in the received 1-s window. Peer: the same with the channels-redis "
        f"layer (the issue names no peer; redis-server {_redis_version()} started by the "
        f"bench); ratio > 1: in-memory is faster"
    )
    push = (
        "the push path alone: receive time - end of the 1-s window (sampler tick, hub, relay, "
        "channel layer, 20 sockets)"
    )
    tail = (
        "one message browser with the live tail on the bench topic (newest first), beside the "
        "20 dashboards: /ws/tail/ says ready, the rows are fetched (console:messages_tail, "
        "rendered as the page's), asked again; latency = fetch received - the newest row's "
        "record timestamp (append time)"
    )
    return [
        latency("append to browser p50", "p50", note),
        latency("append to browser p99", "p99", note, TARGET_P99_MS),
        latency("window end to browser p50", "close_p50", push),
        latency("window end to browser p99", "close_p99", push),
        latency("live tail: produce to row p50", "tail_p50", tail),
        latency("live tail: produce to row p99", "tail_p99", tail, TAIL_TARGET_P99_MS),
        row("live tail fetches per second", "fetches/s", "tail_fetches_per_s",
            "each fetch brings up to 100 rows; at 10,000 records/s a tail keeps the newest (a "
            "tail more than 1,000 records behind skips to the newest page)"),
        row("windows received per client", "windows", "windows",
            "1-s windows with bench records each client got (medians)"),
        row("records appended per second", "records/s", "rate",
            "achieved append rate (target 10,000)"),
    ]  # fmt: skip


def _redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
        return out.stdout.split("v=")[1].split()[0]
    except (OSError, IndexError):
        return "?"


# ------------------------------------------------------------------------------ one run


def run(layer: str, seconds: int, scratch: str) -> None:
    """One measurement in this process: server, appender, clients; prints a JSON line."""
    data_dir = Path(scratch) / f"data-{layer}-{os.getpid()}"
    os.environ.update(
        {
            "TIDELOG_DATA_DIR": str(data_dir),
            "TIDELOG_DEMO": "0",
            "TIDELOG_KAFKA_LISTENER": "0",
            "DJANGO_SETTINGS_MODULE": "brokerui.settings",
        }
    )
    import daphne.server  # noqa: F401 - installs the asyncio reactor before anything else
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    cookie = _session_cookie()
    from brokerui.asgi import application
    from brokerui.broker import get_broker

    store = get_broker().store
    store.create_topic(TOPIC, PARTITIONS, {"flush.messages": "1000000", "flush.ms": "1000"})
    from channels.layers import get_channel_layer

    port = free_port()
    result: dict = {"layer": type(get_channel_layer()).__name__}
    control = threading.Thread(
        target=_control, args=(store, port, cookie, seconds, scratch, result), daemon=True
    )
    server = daphne.server.Server(
        application=application,
        endpoints=[f"tcp:port={port}:interface=127.0.0.1"],
        signal_handlers=False,
        verbosity=0,
        ready_callable=control.start,
    )
    server.run()  # returns when the control thread stops the reactor
    if "error" in result:
        raise SystemExit(result["error"])
    print(json.dumps(result), flush=True)
    os._exit(0)  # the broker's threads and Daphne's executor need no orderly goodbye here


def _session_cookie() -> str:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.create_user("bench", password="bench-push-password-1")
    user.groups.add(Group.objects.get(name="viewer"))
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    # the backend that signed the user in must be one of the console's (a session naming any
    # other is anonymous: the socket was refused, HTTP 403, once the console had its own)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def _control(store, port: int, cookie: str, seconds: int, scratch: str, result: dict) -> None:
    from twisted.internet import reactor

    try:
        out = Path(scratch) / f"clients-{os.getpid()}.json"
        total = WARMUP_S + seconds
        clients = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.bench.bench_push",
                "--clients",
                str(port),
                cookie,
                str(total + 2),
                str(out),
            ],
            cwd=REPO_ROOT,
        )
        time.sleep(1.0)  # let the clients connect and subscribe
        appends = _append(store, total)
        clients.wait(timeout=total + 60)
        if clients.returncode != 0:
            raise RuntimeError(f"the WebSocket clients failed ({clients.returncode})")
        received = json.loads(out.read_text())
        measured_from = time.time() - seconds - 2
        result.update(_latencies(appends, received["metrics"], measured_from))
        result.update(_tail_latencies(received["tail"], measured_from))
        result["rate"] = sum(n for _a, n in appends) / total
    except Exception as exc:  # reported by the parent, with the child's output
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        reactor.callFromThread(reactor.stop)


def _append(store, seconds: float) -> list[tuple[float, int]]:
    """RATE records/s for `seconds`, BATCH at a time; [(append time in s, records)]."""
    from streams.log.records import ProducerRecord

    value = json.dumps({"order": "ord-000000", "total": 42.5, "status": "paid"}).encode()
    batch = [ProducerRecord(value, None, (), None) for _ in range(BATCH)]
    appends: list[tuple[float, int]] = []
    interval = BATCH / RATE
    start = time.time()
    i = 0
    while True:
        due = start + i * interval
        now = time.time()
        if now - start >= seconds:
            return appends
        if due > now:
            time.sleep(due - now)
        store.append_batch(TOPIC, batch, i % PARTITIONS)
        appends.append((time.time(), BATCH))
        i += 1


def _latencies(appends, received: list[list[list]], measured_from: float) -> dict:
    """Per received window, receive time − append time of each record in it (ms)."""
    by_window: dict[int, list[float]] = {}
    for at, _n in appends:
        by_window.setdefault(int(at * 1000) // 1000 * 1000, []).append(at)
    samples: list[float] = []
    after_close: list[float] = []  # the push path alone: receive time − window end
    windows = []
    for client in received:
        got = 0
        for t, recv in client:
            if t / 1000 < measured_from or t not in by_window:
                continue
            got += 1
            samples += [(recv - at) * 1000 for at in by_window[t]]  # one sample per BATCH
            after_close.append(recv * 1000 - (t + 1000))
        windows.append(got)
    if not samples:
        raise RuntimeError("no window reached the clients")
    return {
        "p50": percentile(samples, 50),
        "p99": percentile(samples, 99),
        "close_p50": percentile(after_close, 50),
        "close_p99": percentile(after_close, 99),
        "windows": median(windows),
        "samples": len(samples) * BATCH,
    }


def _tail_latencies(fetches: list[list[float]], measured_from: float) -> dict:
    """Produce to row fetched: per fetch, receive time - the newest row's record timestamp
    (the broker's append time), ms."""
    samples = [(recv - stamp) * 1000 for recv, stamp in fetches if recv >= measured_from]
    if not samples:
        raise RuntimeError("the live tail fetched no rows")
    return {
        "tail_p50": percentile(samples, 50),
        "tail_p99": percentile(samples, 99),
        "tail_fetches_per_s": len(samples) / max(1.0, fetches[-1][0] - measured_from),
    }


# ------------------------------------------------------------------------------ the clients


def clients(port: int, cookie: str, seconds: float, out: str) -> None:
    received = asyncio.run(_clients(port, cookie, seconds))
    Path(out).write_text(json.dumps(received))


async def _clients(port: int, cookie: str, seconds: float) -> dict:
    dashboards = [_client(port, cookie, seconds) for _ in range(CLIENTS)]
    *metrics, tail = await asyncio.gather(*dashboards, _tail_client(port, cookie, seconds))
    return {"metrics": metrics, "tail": tail}


async def _tail_client(port: int, cookie: str, seconds: float) -> list[list[float]]:
    """The message browser's live tail on the bench topic, as tail.js runs it: wait for the
    socket's "ready", fetch the rows after the position (console:messages_tail), ask again.
    [(receive time, the newest fetched record's timestamp)] per fetch, both in seconds."""
    import re
    import urllib.request

    import websockets

    base = f"http://127.0.0.1:{port}/topics/{TOPIC}/messages/tail/?seek=newest"
    headers = {"Cookie": f"sessionid={cookie}"}

    def fetch(after: str | None) -> tuple[str, str]:
        url = base + (f"&after={after}" if after else "")
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
            return response.headers["X-Tail-Cursor"], response.read().decode()

    got: list[list[float]] = []
    deadline = time.monotonic() + seconds
    cursor, _ = await asyncio.to_thread(fetch, None)
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/ws/tail/",
        origin=f"http://127.0.0.1:{port}",
        additional_headers=headers,
    ) as socket:
        while (left := deadline - time.monotonic()) > 0:
            await socket.send(json.dumps({"type": "subscribe", "topic": TOPIC, "after": cursor}))
            try:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=left))
            except TimeoutError:
                break
            if message.get("type") != "ready":
                raise RuntimeError(f"the tail socket said {message}")
            cursor, html = await asyncio.to_thread(fetch, cursor)
            received = time.time()
            stamps = [int(t) for t in re.findall(r'data-timestamp="(\d+)"', html)]
            if stamps:
                got.append([received, max(stamps) / 1000])
    return got


async def _client(port: int, cookie: str, seconds: float) -> list[list]:
    import websockets

    from streams.broker.metrics import series

    wanted = series("records_in", TOPIC)
    got: list[list] = []
    deadline = time.monotonic() + seconds
    async with websockets.connect(
        f"ws://127.0.0.1:{port}/ws/metrics/",
        origin=f"http://127.0.0.1:{port}",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        max_size=None,
    ) as socket:
        await socket.send(json.dumps({"type": "subscribe", "scope": "overview", "range_ms": 2000}))
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(socket.recv(), timeout=left)
            except TimeoutError:
                break
            recv = time.time()
            message = json.loads(raw)
            if message.get("type") == "points":
                got += [[p[1], recv] for p in message["points"] if p[0] == wanted]
    return got


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", choices=["memory", "redis"])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--scratch", default="/work/tmp")
    parser.add_argument("--clients", nargs=4, metavar=("PORT", "COOKIE", "SECONDS", "OUT"))
    args = parser.parse_args()
    if args.clients:
        port, cookie, secs, out = args.clients
        clients(int(port), cookie, float(secs), out)
    elif args.run:
        run(args.run, args.seconds, args.scratch)
    else:
        main()
