"""Committed offsets and group metadata, stored in the compacted topic ``__consumer_offsets``.

Every write for a group goes to that group's partition of the topic (Kafka's
``abs(hash(group)) % 50``), as one record batch — so a multi-partition commit (an offset reset
plan) is on disk entirely or not at all: a torn batch is cut whole by crash recovery.

The in-memory view is rebuilt at start-up by replaying the topic; compaction keeps that replay
short. Not thread-safe on its own: the coordinator serialises access.
"""

from __future__ import annotations

import dataclasses
import logging

from streams.groups import schemas
from streams.groups.schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from streams.log import LogStore, ProducerRecord

log = logging.getLogger(__name__)

# Like Kafka, member commits are not fsynced one by one: a commit lost in a power cut only
# means records are delivered again (at-least-once holds). They reach disk within flush.ms.
# Admin writes (offset resets, deletions) are flushed before they return: see `_write`.
OFFSETS_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "min.compaction.lag.ms": "0",
    "flush.messages": "10000",
    "flush.ms": "1000",
}

TopicPartition = tuple[str, int]


@dataclasses.dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str
    commit_timestamp_ms: int


class OffsetStore:
    def __init__(self, store: LogStore, partitions: int = schemas.OFFSETS_TOPIC_PARTITIONS):
        self.store = store
        self.partitions = partitions
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self.metadata: dict[str, GroupMetadataValue] = {}

    def load(self) -> None:
        """Create the topic if needed and replay it into memory."""
        topic = schemas.OFFSETS_TOPIC
        if topic not in self.store.list_topics():
            self.store.create_topic(topic, self.partitions, OFFSETS_TOPIC_CONFIG)
        elif any(
            self.store.describe_topic(topic).overrides.get(k) != v
            for k, v in OFFSETS_TOPIC_CONFIG.items()
        ):
            self.store.alter_config(topic, OFFSETS_TOPIC_CONFIG)
        self.partitions = self.store.partition_count(topic)
        count = 0
        for p in range(self.partitions):
            start, end = self.store.offsets(topic, p)
            offset = start
            while offset < end:
                batch = self.store.read(topic, p, offset, max_records=10_000, max_bytes=8 << 20)
                if not batch:
                    break
                for rec in batch:
                    self._apply(rec.key, rec.value)
                count += len(batch)
                offset = batch[-1].offset + 1
        log.info("loaded %d groups' offsets from %d records of %s", len(self.offsets), count, topic)

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = schemas.decode_key(key)
        if isinstance(k, OffsetCommitKey):
            group = self.offsets.setdefault(k.group, {})
            if value is None:
                group.pop((k.topic, k.partition), None)
                if not group:
                    del self.offsets[k.group]
            else:
                v = OffsetCommitValue.decode(value)
                group[(k.topic, k.partition)] = CommittedOffset(
                    v.offset, v.metadata, v.commit_timestamp
                )
        elif value is None:
            self.metadata.pop(k.group, None)
        else:
            self.metadata[k.group] = GroupMetadataValue.decode(value)

    # ------------------------------------------------------------------ writes

    def appends_unsynced(self, group: str, offsets: int) -> bool:
        """Whether a member's (non-durable) commit of `offsets` offsets of `group` now waits
        on no fdatasync of its partition (see ``PartitionLog.appends_unsynced``)."""
        partition = schemas.offsets_partition_for(group, self.partitions)
        plog = self.store.partition_log(schemas.OFFSETS_TOPIC, partition)
        return plog.appends_unsynced(offsets)

    def _write(
        self, group: str, records: list[ProducerRecord], durable: bool = True, apply=None
    ) -> None:
        """One batch on the group's partition: all of it lands or none of it. `durable`: on
        disk before returning (admin writes); otherwise within the topic's flush.ms. Then
        the records are applied to the view (`apply()` does it if given, without decoding
        them back)."""
        partition = schemas.offsets_partition_for(group, self.partitions)
        self.store.append_batch(schemas.OFFSETS_TOPIC, records, partition=partition)
        if durable:
            self.store.partition_log(schemas.OFFSETS_TOPIC, partition).flush()
        if apply is not None:
            apply()
            return
        for r in records:
            self._apply(r.key, r.value)

    def commit(
        self,
        group: str,
        offsets: dict[TopicPartition, tuple[int, str]],
        now_ms: int,
        durable: bool = True,
    ) -> None:
        ordered = sorted(offsets.items())
        records = [
            ProducerRecord(
                OffsetCommitValue(offset, metadata, now_ms).encode(),
                OffsetCommitKey(group, topic, partition).encode(),
            )
            for (topic, partition), (offset, metadata) in ordered
        ]

        def apply() -> None:  # what ``_apply`` decodes back from these records
            view = self.offsets.setdefault(group, {})
            for tp, (offset, metadata) in ordered:
                view[tp] = CommittedOffset(offset, metadata or "", now_ms)

        if records:
            self._write(group, records, durable, apply)

    def delete_offsets(self, group: str, partitions: list[TopicPartition]) -> None:
        records = [
            ProducerRecord(None, OffsetCommitKey(group, t, p).encode()) for t, p in partitions
        ]
        if records:
            self._write(group, records)

    def store_metadata(self, group: str, value: GroupMetadataValue) -> None:
        self._write(group, [ProducerRecord(value.encode(), GroupMetadataKey(group).encode())])

    def delete_group(self, group: str) -> None:
        records = [
            ProducerRecord(None, OffsetCommitKey(group, t, p).encode())
            for t, p in sorted(self.offsets.get(group, {}))
        ]
        records.append(ProducerRecord(None, GroupMetadataKey(group).encode()))
        self._write(group, records)

    # ------------------------------------------------------------------ reads

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self.offsets.get(group, {}))

    def groups(self) -> set[str]:
        return set(self.offsets) | set(self.metadata)
