"""Writing records to a topic: one service for the console's produce page and the JSON API.

Records are appended one at a time, so a refusal says how many went out; what was written is
audited once (``records.produce``, target ``topic NAME``): after = records, tombstones,
per partition first/last offset and count, and the error when one record was refused. Payloads
are never audited (offsets, not values).
"""

from __future__ import annotations

import dataclasses

from brokerui.audit.services import Actor, AuditSink
from streams.cluster import Cluster, ProduceRequest
from streams.errors import TidelogError


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
    done = Produced([])
    for i, r in enumerate(records):
        try:
            done.results += cluster.produce(topic=topic, records=[r])
        except TidelogError as exc:
            done.error, done.refused_index = exc, i
            break
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
