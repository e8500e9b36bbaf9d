"""Benchmark the message filters: engine time per record of a full filtered scan.

Run: ``make bench BENCH=filters`` or ``python -m tests.bench filters``. ``BENCH_SCALE`` (default
1.0 = 200,000 records of ~120-byte JSON in 2 partitions) scales the topic.

Tidelog: `streams.cluster.browse` over a LogStore, scanning the whole topic (no match, so no page
fills) with a CEL expression (common-expression-language 0.10.0: a JSON field compared; a
case-insensitive contains) — compiled once, evaluated per record. Peer: the same scan with the
plain "value contains" filter (bytes substring), the cheapest filter the page has.
Median of 5 scans; microseconds per record.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

from tests.bench.common import Row, log, print_table, scaled, temp_dir, write_results  # noqa: E402

NAME = "filters"
RUNS = 5
T0 = 1_767_225_600_000


def _fill(store, total: int) -> None:
    from streams.log.records import ProducerRecord

    store.create_topic("orders", partitions=2)
    for p in range(2):
        batch = []
        for i in range(p, total, 2):
            value = json.dumps(
                {"order": i, "customer": f"Cust-{i % 977}", "total": i % 500 + 0.5}
            ).encode()
            batch.append(ProducerRecord(value, b"k%d" % i, (), T0 + i))
            if len(batch) == 1000:
                store.append_batch("orders", batch, partition=p)
                batch = []
        if batch:
            store.append_batch("orders", batch, partition=p)


def _scan_us_per_record(store, total: int, **request) -> float:
    from streams.cluster import BrowseRequest
    from streams.cluster.browse import browse
    from streams.cluster.expressions import CelLanguage

    times = []
    for _ in range(RUNS):
        source = request.get("expression")
        kw = dict(request)
        started = time.perf_counter()
        if source:
            kw["expression"] = CelLanguage().compile(source)  # once per request, as the page
        result = browse(
            store,
            BrowseRequest(
                "orders",
                seek="oldest",
                page_size=10,
                max_scan_records=10 * total,
                max_time_ms=600_000,
                **kw,
            ),
        )
        times.append(time.perf_counter() - started)
        assert result.examined == total and not result.records, (result.examined, total)
    return statistics.median(times) / total * 1e6


def main() -> list[Row]:
    from streams.cluster import Filter
    from streams.log import LogStore

    total = scaled(200_000, 2_000)
    with temp_dir(NAME) as work:
        store = LogStore.open(work, background=False)
        try:
            log(f"{NAME}: writing {total:,} records")
            _fill(store, total)
            contains = _scan_us_per_record(
                store, total, filters=(Filter("value", "contains", "no such text"),)
            )
            field = _scan_us_per_record(store, total, expression="value.total > 1000.0")
            lower = _scan_us_per_record(
                store, total, expression='value.customer.lowerAscii().contains("nobody")'
            )
        finally:
            store.close()
    rows = [
        Row(
            "scan, CEL value.total > 1000.0",
            "µs/record",
            field,
            "value contains (bytes)",
            contains,
            higher_is_better=False,
        ),
        Row(
            "scan, CEL lowerAscii().contains",
            "µs/record",
            lower,
            "value contains (bytes)",
            contains,
            higher_is_better=False,
        ),
    ]
    print_table(rows)
    write_results(NAME, rows)
    return rows


if __name__ == "__main__":
    main()
