"""Writing records to a topic (one service for the console's produce page and the JSON API),
exporting what a browse query selects, and importing a JSON Lines export.

Records are appended one at a time, so a refusal says how many went out; what was written is
audited once (``records.produce``, target ``topic NAME``): after = records, tombstones,
per partition first/last offset and count, and the error when one record was refused. Payloads
are never audited (offsets, not values).

Exports (``records.export``) are audited when they start: format, the query (expression,
filters, partition, start) and the offset range per partition. Imports (``records.import``)
after writing: the file's name, size and SHA-256, the records and partitions written, and the
exporting query when the file has one. ``settings.TIDELOG_EXPORT_ENABLED`` (env
``TIDELOG_EXPORT=0``) turns export off.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime

from django.conf import settings

from brokerui.access.masking import Masker
from brokerui.audit.services import Actor, AuditSink
from streams.cluster import BrowseRequest, Cluster, ProduceRequest, tail
from streams.cluster.tail import TailStep
from streams.cluster.transfer import PAGE, ExportRun, ImportedRecord, ParsedImport, parse_jsonl
from streams.errors import TidelogError
from streams.schemas.mapping import TopicDecoders

BATCH_OVERHEAD = 61 + 21  # record batch v2 header + one record's framing, roughly


@dataclasses.dataclass
class Produced:
    """The appended records' (partition, offset, timestamp) results, in order; the error that
    stopped the batch and the index of the refused record (None when all went out)."""

    results: list
    error: TidelogError | None = None
    refused_index: int | None = None


def partition_summary(results) -> dict[str, dict[str, int]]:
    """{"partition": {"first", "last", "count"}} of appended records."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        s = out.setdefault(str(r.partition), {"first": r.offset, "last": r.offset, "count": 0})
        s["first"], s["last"] = min(s["first"], r.offset), max(s["last"], r.offset)
        s["count"] += 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def records_produce(
    *, cluster: Cluster, sink: AuditSink, actor: Actor, topic: str, records: list[ProduceRequest]
) -> Produced:
    """Append `records` to `topic` in order, stopping at the first refused (RecordTooLarge, a
    topic deleted meanwhile...); audits what was written."""
    done = _append(cluster, topic, records)
    if done.results:
        n = len(done.results)
        after: dict = {
            "records": n,
            "partitions": partition_summary(done.results),
            "tombstones": sum(1 for r in records[:n] if r.value is None),
        }
        if done.error is not None and done.refused_index is not None:
            after["error"] = f"record {done.refused_index + 1} was refused: {done.error}"
        actor.record(sink, "records.produce", f"topic {topic}", after=after)
    return done


def _append(cluster: Cluster, topic: str, records: list[ProduceRequest]) -> Produced:
    done = Produced([])
    for i, r in enumerate(records):
        try:
            done.results += cluster.produce(topic=topic, records=[r])
        except TidelogError as exc:
            done.error, done.refused_index = exc, i
            break
    return done


def batch_size(r: ProduceRequest) -> int:
    """About the bytes of `r` as a one-record batch (what max.message.bytes limits)."""
    return (
        BATCH_OVERHEAD
        + len(r.key or b"")
        + len(r.value or b"")
        + sum(len(k) + len(v or b"") + 2 for k, v in r.headers)
    )


# ================================================================================ export


class ExportDisabled(TidelogError):
    code = "export_disabled"

    def __init__(self) -> None:
        super().__init__(
            "exporting records is turned off on this server (TIDELOG_EXPORT=0); ask its operator"
        )


def export_enabled() -> bool:
    return bool(getattr(settings, "TIDELOG_EXPORT_ENABLED", True))


@dataclasses.dataclass
class Export:
    filename: str
    content_type: str
    chunks: Iterator[bytes]
    run: ExportRun


def records_export(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    request: BrowseRequest,
    query: dict,
    fmt: str,
    reading: TopicDecoders | None = None,
    masker: Masker | None = None,
) -> Export:
    """Stream what `request` selects (from its start to the end offsets now) as `fmt` (jsonl or
    csv); `query` (the query as typed) is recorded in the file and in the audit log. With a
    `reading` (``streams.schemas.mapping.TopicReading``), keys and values it reads (the
    registry's wire format, a mapped topic's) are also written decoded; with a `masker`
    (brokerui.access.masking), the fields it masks are masked in every row."""
    if not export_enabled():
        raise ExportDisabled()
    topic = request.topic
    ends = cluster.partition_offsets(topic=topic)
    forward_seek = "oldest" if request.seek == "newest" else request.seek
    key_decoder = reading.key(topic) if reading is not None else None
    value_decoder = reading.value(topic) if reading is not None else None
    browse = cluster.browse
    if masker:  # the fields the user may not see are masked before anything is written

        def browse(req, _browse=cluster.browse):
            result = _browse(req)
            shown = [masker.record(r, key_decoder, value_decoder) for r in result.records]
            return dataclasses.replace(result, records=shown)

        key_decoder = None if masker.masks("key") else key_decoder
        value_decoder = None if masker.masks("value") else value_decoder
    run = ExportRun(
        browse,
        dataclasses.replace(
            request,
            seek=forward_seek,
            cursor=None,
            page_size=PAGE,
            until=tuple((p, end) for p, (_, end) in enumerate(ends)),
        ),
        query,
        value_decoder=value_decoder,
        key_decoder=key_decoder,
    )
    actor.record(
        sink,
        "records.export",
        f"topic {topic}",
        after={"format": fmt, "filter": query, "range": run.range},
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if fmt == "csv":
        return Export(f"{topic}-{stamp}.csv", "text/csv; charset=utf-8", run.csv(), run)
    return Export(f"{topic}-{stamp}.jsonl", "application/x-ndjson; charset=utf-8", run.jsonl(), run)


# ================================================================================ import


def _produce_requests(parsed: ParsedImport, keep_partitions: bool) -> list[ProduceRequest]:
    return [
        ProduceRequest(
            value=r.value,
            key=r.key,
            headers=r.headers,
            partition=r.partition if keep_partitions else None,
            timestamp_ms=r.timestamp_ms,
        )
        for r in parsed.records
    ]


def records_import_check(
    *, cluster: Cluster, topic: str, data: bytes, keep_partitions: bool
) -> ParsedImport:
    """Parse and check a JSON Lines file for `topic` without writing: every bad line (JSON,
    fields, a partition the topic lacks, a record over max.message.bytes) by number."""
    desc = cluster.describe_topic(topic)
    parsed = parse_jsonl(
        data.splitlines(), partitions=len(desc.partitions) if keep_partitions else None
    )
    limit = int(desc.config["max.message.bytes"])
    records: list[ImportedRecord] = parsed.records
    for r, req in zip(records, _produce_requests(parsed, keep_partitions), strict=True):
        size = batch_size(req)
        if size > limit and len(parsed.errors) < 20:
            parsed.errors.append(
                f"line {r.line}: the record is {size:,} bytes as a record batch; {topic} "
                f"accepts at most {limit:,} (max.message.bytes)"
            )
    return parsed


@dataclasses.dataclass
class Imported:
    parsed: ParsedImport
    produced: Produced | None  # None: nothing written (the file has errors)


def records_import(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    topic: str,
    data: bytes,
    filename: str,
    keep_partitions: bool,
) -> Imported:
    """Write the records of a JSON Lines file to `topic` (keys, headers, timestamps and, when
    `keep_partitions`, partitions as in the file), all checked first: a file with any bad
    line writes nothing. Audited (``records.import``)."""
    parsed = records_import_check(
        cluster=cluster, topic=topic, data=data, keep_partitions=keep_partitions
    )
    if not parsed.ok:
        return Imported(parsed, None)
    requests = _produce_requests(parsed, keep_partitions)
    done = _append(cluster, topic, requests)
    n = len(done.results)
    after: dict = {
        "file": filename,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "records": n,
        "of": len(requests),
        "partitions": partition_summary(done.results),
        "kept_partitions": keep_partitions,
    }
    if parsed.meta:
        after["exported"] = {
            k: parsed.meta.get(k) for k in ("topic", "exported_at", "filter", "range")
        }
    if done.error is not None and done.refused_index is not None:
        line = parsed.records[done.refused_index].line
        after["error"] = f"line {line} was refused: {done.error}"
    actor.record(sink, "records.import", f"topic {topic}", after=after)
    return Imported(parsed, done)


def rows_with_markers(
    *, cluster: Cluster, topic: str, rows: list, newest_first: bool
) -> tuple[list, str | None]:
    """The browser's record rows with the transaction markers (COMMIT/ABORT control batches)
    among them: each after the record it follows in its partition (before it, newest first).
    Only markers between the first record shown in a partition and the next record past the
    page are looked for. Returns (rows, why no markers could be read or None)."""
    by_partition: dict[int, list[int]] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r.offset)
    markers: dict[int, list] = {}
    try:
        for p, offsets in by_partition.items():
            markers[p] = cluster.control_markers(
                topic=topic, partition=p, start=min(offsets), last=max(offsets)
            )
    except TidelogError as exc:
        return rows, str(exc)
    shown = {p: sorted(o) for p, o in by_partition.items()}
    out = []
    for r in rows:
        offsets = shown[r.partition]
        i = offsets.index(r.offset)
        upper = offsets[i + 1] if i + 1 < len(offsets) else None
        after = [
            m
            for m in markers.get(r.partition, ())
            if m.offset > r.offset and (upper is None or m.offset < upper)
        ]
        if newest_first:
            out.extend(reversed(after))
            out.append(r)
        else:
            out.append(r)
            out.extend(after)
    return out, None


# ================================================================================ live tail


def tail_read(*, cluster: Cluster, request: BrowseRequest, after: str | None) -> TailStep:
    """What a live tail shows next: the records of `request` written after `after` (a
    forward cursor; None: a tail that starts now, at each partition's end)."""
    if after is None:
        after = tail.start_cursor(cluster, request.topic, request.partition)
    return tail.tail_step(cluster, request, after)


async def tail_wait(*, cluster: Cluster, topic: str, after: str, timeout_s: float) -> bool:
    """Whether records of `topic` past `after` arrived within `timeout_s`: woken by the
    built-in broker's appends, or by asking an external cluster's ends every few 100 ms."""
    store = getattr(cluster, "store", None)  # LocalCluster's: it tells of each append
    subscribe = tail.store_subscription(store, topic) if store is not None else None
    return await tail.wait_for_records(cluster, topic, after, timeout_s, subscribe)
