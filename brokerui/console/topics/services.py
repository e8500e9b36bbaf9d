"""Topic services the command line uses: verifying and repairing the log on disk.

``log_verify`` is what ``manage.py verify_log`` calls. It opens the data directory itself (the
directory has one owner at a time, so the server must be stopped: a running one is reported
with its pid), runs the engine's deep verification (``streams.log.verify``) and, when asked,
its repair; every partition repaired is written to the audit log (source ``cli``, by the
operating-system user), as the console's changes are.
"""

from __future__ import annotations

import getpass

from brokerui.audit.services import Actor, AuditLog, AuditSink, record
from streams.cluster import Cluster
from streams.log import LogStore
from streams.log.verify import VerifyReport, verify_store


def log_verify(*, data_dir, topic: str | None = None, repair: bool = False) -> VerifyReport:
    """Verify every partition (of `topic`), repairing when `repair`; raises TidelogError
    (DataDirLocked while the server runs, UnknownTopic)."""
    store = LogStore.open(str(data_dir), background=False)
    try:
        if topic is not None:
            store.partition_count(topic)  # UnknownTopic before anything is read
        report = verify_store(store, topic=topic, repair=repair)
        for p in report.partitions:
            if p.repaired:
                _audit_repair(store, p)
        return report
    finally:
        store.close()


def _audit_repair(store: LogStore, p) -> None:
    cut = [
        {
            "file": r.file,
            "bytes": [r.start, r.end],
            "offsets": [r.first_offset, r.end_offset],
            "reason": r.reason,
        }
        for r in p.repaired
    ]
    record(
        None,
        "log.repair",
        f"topic {p.topic} partition {p.partition}",
        before={"damaged": cut},
        after={
            "offsets_lost": sum(r.offset_count for r in p.repaired),
            "bytes_cut": sum(r.byte_count for r in p.repaired),
        },
        source="cli",
        who=f"cli:{getpass.getuser()}",
        sink=AuditLog(store),
    )


# ---------------------------------------------------------------------- topic changes
#
# One function per change, called alike by the console's views and the JSON API; each writes
# one audit record through the `AuditSink` it is given, in the payload the Kafka port writes for
# the same change (``streams.protocol.audit``):
#
#   topic.create          - / partitions, config (overrides)
#   topic.config          overrides / overrides (only when they changed)
#   topic.add_partitions  partitions / partitions
#   topic.purge           log_start_offsets / log_start_offsets, records_deleted, request
#   topic.delete          partitions, records, size_bytes, config, end_offsets / -


def _target(name: str) -> str:
    return f"topic {name}"


def topic_create(
    *, cluster: Cluster, sink: AuditSink, actor: Actor, name: str, partitions: int, config: dict
):
    """Create the topic; its description. Engine errors (TopicAlreadyExists, InvalidConfig...)
    are raised and nothing is audited."""
    d = cluster.create_topic(name=name, partitions=partitions, config=config)
    actor.record(
        sink,
        "topic.create",
        _target(d.name),
        after={"partitions": len(d.partitions), "config": dict(d.overrides)},
    )
    return d


def topic_config_update(
    *, cluster: Cluster, sink: AuditSink, actor: Actor, name: str, set_: dict, delete: list
):
    """Set and reset (back to the default) config keys; the new description."""
    before = dict(cluster.describe_topic(name).overrides)
    d = cluster.alter_topic_config(name=name, set_=set_, delete=delete)
    if dict(d.overrides) != before:
        actor.record(sink, "topic.config", _target(name), before=before, after=dict(d.overrides))
    return d


def topic_partitions_add(*, cluster: Cluster, sink: AuditSink, actor: Actor, name: str, total: int):
    """Grow the topic to `total` partitions; the new description."""
    before = len(cluster.describe_topic(name).partitions)
    d = cluster.add_partitions(name=name, total=total)
    actor.record(
        sink,
        "topic.add_partitions",
        _target(name),
        before={"partitions": before},
        after={"partitions": len(d.partitions)},
    )
    return d


def topic_delete(*, cluster: Cluster, sink: AuditSink, actor: Actor, name: str) -> None:
    d = cluster.describe_topic(name)
    cluster.delete_topic(name=name)
    actor.record(
        sink,
        "topic.delete",
        _target(name),
        before={
            "partitions": len(d.partitions),
            "records": d.record_count,
            "size_bytes": d.size_bytes,
            "config": dict(d.overrides),
            "end_offsets": {str(p.partition): p.end_offset for p in d.partitions},
        },
    )


def purge_request(
    partitions: list[int] | None,
    count: int,
    before_offset: int | None,
    before_timestamp_ms: int | None,
) -> dict:
    """What a purge asked for, as the audit records it (the Kafka port's shape)."""
    if partitions is None or sorted(set(partitions)) == list(range(count)):
        part: object = "all"
    elif len(partitions) == 1:
        part = partitions[0]
    else:
        part = sorted(set(partitions))
    out: dict = {"partition": part}
    if before_offset is not None:
        out.update(mode="offset", before_offset=before_offset)
    elif before_timestamp_ms is not None:
        out.update(mode="timestamp", before_timestamp_ms=before_timestamp_ms)
    else:
        out["mode"] = "all"
    return out


def topic_purge(
    *,
    cluster: Cluster,
    sink: AuditSink,
    actor: Actor,
    name: str,
    partitions: list[int] | None = None,
    before_offset: int | None = None,
    before_timestamp_ms: int | None = None,
):
    """Delete records below an offset, before a time, or all (every partition when
    `partitions` is None); the engine's PurgeResult."""
    count = len(cluster.describe_topic(name).partitions)
    kwargs: dict = {"partitions": partitions}
    if before_offset is not None:
        kwargs["before_offset"] = before_offset
    if before_timestamp_ms is not None:
        kwargs["before_timestamp_ms"] = before_timestamp_ms
    result = cluster.purge(topic=name, **kwargs)
    actor.record(
        sink,
        "topic.purge",
        _target(name),
        before={"log_start_offsets": {str(p): o for p, o in result.before.items()}},
        after={
            "log_start_offsets": {str(p): o for p, o in result.after.items()},
            "records_deleted": result.records_deleted,
            "request": purge_request(partitions, count, before_offset, before_timestamp_ms),
        },
    )
    return result
