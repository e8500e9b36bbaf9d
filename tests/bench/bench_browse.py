"""Benchmark `browse`: server time of one message-browser page anywhere in a big topic.

Run: ``make bench BENCH=browse`` or ``python -m tests.bench browse``. ``BENCH_SCALE`` (default
1.0 = 10,000,000 records of ~120-byte JSON in 6 partitions) scales the topic.

Tidelog: the console's message-browser view (Django view + template, called through a
RequestFactory, so the time is the server's: engine seek, scan, decode and rendering of 50 rows),
for the seeks users make: newest first across all partitions, an offset in the middle of one
partition, a timestamp in the middle, newest − 1000, and the 100th page by cursor. 50 requests
each; p50 and p99 in milliseconds. Target (issue 4): a page anywhere in a 10-million-record
topic in <= 100 ms of server time.

Peer: Redis Streams holding the same records in one stream, reached by redis-py: XREVRANGE
COUNT 50 (newest page) and XRANGE from a middle id COUNT 50 (a page at an offset) — the raw
read a console on Redis would do, without any rendering.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

from tests.bench.common import (  # noqa: E402
    RedisServer,
    Row,
    at_most,
    log,
    percentile,
    print_table,
    scaled,
    temp_dir,
    write_results,
)

NAME = "browse"
PARTITIONS = 6
BATCH = 1000
REPS = 50
T0 = 1_767_225_600_000


def _value(i: int) -> bytes:
    return json.dumps(
        {
            "order": i,
            "customer": f"c{i % 977}",
            "total": i % 500 + 0.5,
            "items": [{"sku": "SKU-1001", "qty": 1}],
        }
    ).encode()


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _fill_tidelog(store, total: int) -> None:
    from streams.log import ProducerRecord

    store.create_topic("big", PARTITIONS, {"flush.messages": "100000000"})
    per = total // PARTITIONS
    for p in range(PARTITIONS):
        for base in range(0, per, BATCH):
            recs = [
                ProducerRecord(_value(i), b"c%d" % (i % 977), (("trace", b"%d" % i),), T0 + i * 10)
                for i in range(
                    base * PARTITIONS + p, min(base + BATCH, per) * PARTITIONS, PARTITIONS
                )
            ]
            store.append_batch("big", recs, partition=p)


def _time_view(view, factory, user, path: str, params: dict) -> list[float]:
    from django_htmx.middleware import HtmxDetails

    times = []
    for i in range(REPS + 1):
        request = factory.get(path, params)
        request.user = user
        request.htmx = HtmxDetails(request)
        started = time.perf_counter()
        response = view(request, topic="big")
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.status_code
        assert b"<tr" in response.content, "no rows rendered"
        if i:  # the first request warms caches
            times.append(elapsed)
    return times


def _tidelog(work: str, total: int) -> dict[str, list[float]]:
    os.environ["TIDELOG_DATA_DIR"] = os.path.join(work, "tidelog")
    os.environ["TIDELOG_DEMO"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brokerui.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import RequestFactory

    from brokerui.broker import close_broker, get_broker
    from brokerui.cluster import get_cluster
    from brokerui.console.messages.views import browse_messages

    call_command("migrate", verbosity=0)
    user = User.objects.create_superuser("bench", password="x")
    store = get_broker().store
    started = time.perf_counter()
    _fill_tidelog(store, total)
    log(f"Tidelog: {total:,} records written in {time.perf_counter() - started:.1f} s")
    per = total // PARTITIONS
    factory = RequestFactory()
    path = "/topics/big/messages/"
    cursor = None
    cluster = get_cluster()
    from streams.cluster import BrowseRequest

    for _ in range(99):  # the 100th page, newest first
        page = cluster.browse(BrowseRequest("big", seek="newest", cursor=cursor, page_size=50))
        cursor = page.next_cursor
    cases = {
        "newest first, all partitions": {"seek": "newest"},
        "offset in the middle, one partition": {
            "seek": "offset",
            "offset": str(per // 2),
            "partition": "3",
        },
        "timestamp in the middle": {"seek": "timestamp", "at": _iso(T0 + total * 5)},
        "newest - 1000, all partitions": {"seek": "newest-n", "n": "1000"},
        "100th page by cursor": {"cursor": cursor},
    }
    results = {}
    for name, params in cases.items():
        results[name] = _time_view(browse_messages, factory, user, path, params)
        log(
            f"Tidelog {name}: p50 {percentile(results[name], 50):.1f} ms, "
            f"p99 {percentile(results[name], 99):.1f} ms"
        )
    engine = {  # the read alone, comparable with the peer's raw XRANGE
        "newest first, all partitions": BrowseRequest("big", seek="newest", page_size=50),
        "offset in the middle, one partition": BrowseRequest(
            "big", partition=3, seek="offset", value=per // 2, page_size=50
        ),
    }
    for name, req in engine.items():
        times = []
        for _ in range(REPS):
            started = time.perf_counter()
            assert len(cluster.browse(req).records) == 50
            times.append((time.perf_counter() - started) * 1000)
        results[f"engine read: {name}"] = times
    close_broker()
    return results


def _redis(work: str, total: int) -> dict[str, list[float]]:
    with RedisServer(os.path.join(work, "redis")) as server:
        r = server.client()
        for base in range(0, total, BATCH):
            pipe = r.pipeline(transaction=False)
            for i in range(base, min(base + BATCH, total)):
                pipe.xadd("big", {"v": _value(i)}, id=f"0-{i + 1}")
            pipe.execute()
        rng = random.Random(1)
        out: dict[str, list[float]] = {
            "newest first, all partitions": [],
            "offset in the middle, one partition": [],
        }
        for _ in range(REPS):
            started = time.perf_counter()
            assert len(r.xrevrange("big", count=50)) == 50
            out["newest first, all partitions"].append((time.perf_counter() - started) * 1000)
            mid = total // 2 + rng.randint(0, 1000)
            started = time.perf_counter()
            assert len(r.xrange("big", min=f"0-{mid}", count=50)) == 50
            out["offset in the middle, one partition"].append(
                (time.perf_counter() - started) * 1000
            )
        return out


def main() -> list[Row]:
    total = scaled(10_000_000, minimum=60_000)
    total -= total % PARTITIONS
    log(f"{total:,} records in {PARTITIONS} partitions")
    with temp_dir("bench-browse-") as work:
        tidelog = _tidelog(work, total)
        peer = _redis(work, total)
    rows = []
    for name, times in tidelog.items():
        engine = name.startswith("engine read: ")
        peer_times = peer.get(name.removeprefix("engine read: ")) if engine else None
        for p in (50, 99):
            view_target = not engine and p == 99
            rows.append(
                Row(
                    metric=f"{name if engine else 'page view: ' + name}, p{p}",
                    unit="ms",
                    tidelog=percentile(times, p),
                    peer="redis-streams" if peer_times else None,
                    peer_value=percentile(peer_times, p) if peer_times else None,
                    target="<= 100 ms" if view_target else None,
                    check=at_most(100.0) if view_target else None,
                    higher_is_better=False,
                )
            )
    rows[0].note = (
        f"{total:,} records in {PARTITIONS} partitions; page view = the console's "
        f"view with 50 rows rendered ({REPS} requests per seek, no peer: no Redis "
        "console to compare); engine read = cluster.browse of 50 records, against "
        "Redis XREVRANGE / XRANGE COUNT 50 through redis-py"
    )
    print()
    print_table(rows)
    path = write_results(NAME, rows)
    print(f"\nwrote {path}", flush=True)
    return rows


if __name__ == "__main__":
    main()
