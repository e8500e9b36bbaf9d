"""Offsets: ListOffsets (earliest, latest, max timestamp, by timestamp), OffsetForLeaderEpoch,
and the committed offsets of groups (OffsetCommit, OffsetFetch, OffsetDelete), which go through
the broker's `GroupCoordinator` like the console's.

A single node with leader epoch 0: OffsetForLeaderEpoch answers the high watermark as the end
offset of epoch 0, which is what KIP-320 offset validation in clients needs to pass.

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import uuid
from typing import Any

from streams.errors import GroupError, GroupNotEmpty, TidelogError, UnknownGroup
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import (
    NO_TOPIC_ID,
    BrokerContext,
    domain_error_code,
    topic_for_id,
    topic_uuid,
)

GROUP_SUBSCRIBED_TO_TOPIC = 86
READ_COMMITTED = 1


async def handle_list_offsets(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key)
    topic_cls = cls.ListOffsetsTopicResponse
    topics = []
    committed = req.api_version >= 2 and req.body.isolation_level == READ_COMMITTED
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            code, offset, ts = _lookup(ctx, t.name, p.partition_index, p.timestamp, committed)
            parts.append(
                topic_cls.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=code,
                    old_style_offsets=[offset] if offset >= 0 else [],
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=0 if code == 0 else -1,
                )
            )
        topics.append(topic_cls(name=t.name, partitions=parts))
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


def _lookup(ctx: BrokerContext, topic: str, partition: int, timestamp: int, committed: bool):
    """(error code, offset, timestamp) for one partition; "latest" is the last stable offset
    for read_committed (isolation level 1), else the high watermark."""
    try:
        return 0, *ctx.store.list_offset(topic, partition, timestamp, committed)
    except TidelogError as exc:
        return domain_error_code(exc), -1, -1


async def handle_offset_for_leader_epoch(ctx: BrokerContext, req: Request) -> Any:
    cls = codec.response_class(req.api_key)
    topic_cls = cls.OffsetForLeaderTopicResult
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            try:
                end = ctx.store.offsets(t.topic, p.partition)[1]
                code, epoch = 0, 0
            except TidelogError as exc:
                code, epoch, end = domain_error_code(exc), -1, -1
            parts.append(
                topic_cls.EpochEndOffset(
                    error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end
                )
            )
        topics.append(topic_cls(topic=t.topic, partitions=parts))
    return codec.make_response(req, throttle_time_ms=0, topics=topics)


# ---------------------------------------------------------------------- committed offsets

OFFSET_METADATA_TOO_LARGE = 12
MIN_COMMIT_TOPIC_ID_VERSION = 10  # OffsetCommit v10 names topics by id (KIP-516)
MIN_FETCH_TOPIC_ID_VERSION = 10  # OffsetFetch v10 too
OFFSET_METADATA_MAX_CHARS = 4096  # Kafka's offset.metadata.max.bytes (its default)


async def handle_offset_commit(ctx: BrokerContext, req: Request) -> Any:
    """OffsetCommit: all partitions in one coordinator write. Generation -1 (admin tools,
    ``assign()`` users) is accepted only while the group is Empty, as in Kafka. v10 names
    topics by id (KIP-516); an id no topic has gets UNKNOWN_TOPIC_ID.

    Any offset is stored, negative ones too (KafkaJS resets a group to "earliest" by committing
    -2): Kafka's OffsetMetadataManager refuses a partition only for metadata longer than
    offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE), counted in UTF-16 units as Java's
    ``String.length()``."""
    b = req.body
    generation = b.generation_id_or_member_epoch if req.api_version >= 1 else -1
    by_id = req.api_version >= MIN_COMMIT_TOPIC_ID_VERSION
    topics = [(*_topic_name(ctx, t, by_id), t) for t in b.topics]  # (name, error, topic)
    refused: dict[tuple[str | None, int], int] = {}
    offsets = {}
    for name, topic_error, t in topics:
        for p in t.partitions:
            if topic_error:
                refused[(name, p.partition_index)] = topic_error
            elif _metadata_chars(p.committed_metadata) > OFFSET_METADATA_MAX_CHARS:
                refused[(name, p.partition_index)] = OFFSET_METADATA_TOO_LARGE
            else:
                offsets[(name, p.partition_index)] = (
                    p.committed_offset,
                    p.committed_metadata or "",
                )
    code = 0
    if offsets:
        try:
            await ctx.blocking(
                lambda: ctx.coordinator.commit_offsets(
                    b.group_id, offsets, member_id=b.member_id or "", generation=generation
                )
            )
        except GroupError as exc:
            code = domain_error_code(exc)
    cls = codec.response_class(req.api_key).OffsetCommitResponseTopic
    response_topics = [
        cls(
            name=t.name,
            topic_id=t.topic_id,
            partitions=[
                cls.OffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=refused.get((name, p.partition_index), code),
                )
                for p in t.partitions
            ],
        )
        for name, _, t in topics
    ]
    return codec.make_response(req, throttle_time_ms=0, topics=response_topics)


def _topic_name(ctx: BrokerContext, t, by_id: bool) -> tuple[str | None, int]:
    """(name, 0) of a request's topic, named or (`by_id`) identified; (None, error) when no
    topic has its id."""
    if not by_id:
        return t.name, 0
    try:
        return topic_for_id(ctx, t.topic_id), 0
    except TidelogError as exc:
        return None, domain_error_code(exc)


def _metadata_chars(metadata: str | None) -> int:
    """The length Kafka checks: Java's ``String.length()``, in UTF-16 code units."""
    return len(metadata.encode("utf-16-le", "surrogatepass")) // 2 if metadata else 0


async def handle_offset_fetch(ctx: BrokerContext, req: Request) -> Any:
    """OffsetFetch: v0-7 ask for one group, v8+ for several; null topics mean all. v10 names
    topics by id (KIP-516): asked-for ids no topic has get UNKNOWN_TOPIC_ID, and "all" leaves
    out the offsets of deleted topics, which have no id any more."""
    b = req.body
    cls = codec.response_class(req.api_key)
    if req.api_version < 8:
        topics = _fetched(ctx, b.group_id, b.topics, cls.OffsetFetchResponseTopic, 7)
        return codec.make_response(req, throttle_time_ms=0, topics=topics, error_code=0)
    group_cls = cls.OffsetFetchResponseGroup
    groups = [
        group_cls(
            group_id=g.group_id,
            topics=_fetched(
                ctx, g.group_id, g.topics, group_cls.OffsetFetchResponseTopics, req.api_version
            ),
            error_code=0,
        )
        for g in b.groups
    ]
    return codec.make_response(req, throttle_time_ms=0, groups=groups)


def _fetched(ctx: BrokerContext, group_id: str, wanted, topic_cls, version: int) -> list:
    committed = ctx.coordinator.committed(group_id, sentinels=True)
    by_id = version >= MIN_FETCH_TOPIC_ID_VERSION
    # (name or None, wire id or None, error code, partitions)
    asked: list[tuple[str | None, uuid.UUID | None, int, list[int]]] = []
    if wanted is None:
        partitions: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            partitions.setdefault(topic, []).append(partition)
        for topic, parts in partitions.items():
            topic_id = topic_uuid(ctx, topic) if by_id else None
            if topic_id != NO_TOPIC_ID:
                asked.append((topic, topic_id, 0, parts))
    else:
        for t in wanted:
            name, error = _topic_name(ctx, t, by_id)
            asked.append((name, t.topic_id if by_id else None, error, list(t.partition_indexes)))
    part_cls = (
        topic_cls.OffsetFetchResponsePartitions
        if version >= 8
        else topic_cls.OffsetFetchResponsePartition
    )
    out = []
    for topic, topic_id, error, parts in asked:
        rows = []
        for p in parts:
            c = committed.get((topic, p)) if topic is not None else None
            rows.append(
                part_cls(
                    partition_index=p,
                    committed_offset=c.offset if c else -1,
                    committed_leader_epoch=-1,
                    metadata=c.metadata if c else "",
                    error_code=error,
                )
            )
        by_name = {} if version < 8 else {"topic_id": topic_id}  # v0-7 have no id field
        out.append(topic_cls(name=topic or "", partitions=rows, **by_name))
    return out


async def handle_offset_delete(ctx: BrokerContext, req: Request) -> Any:
    """OffsetDelete: refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) while active members
    subscribe to the topic."""
    b = req.body
    cls = codec.response_class(req.api_key).OffsetDeleteResponseTopic
    top_code, topics = 0, []
    for t in b.topics:
        try:
            partitions = {p.partition_index for p in t.partitions}
            await ctx.blocking(ctx.coordinator.delete_offsets, b.group_id, t.name, partitions)
            code = 0
        except UnknownGroup as exc:
            top_code = code = domain_error_code(exc)
        except GroupNotEmpty:
            code = GROUP_SUBSCRIBED_TO_TOPIC
        topics.append(
            cls(
                name=t.name,
                partitions=[
                    cls.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=0 if top_code else code
                    )
                    for p in t.partitions
                ],
            )
        )
    return codec.make_response(req, error_code=top_code, throttle_time_ms=0, topics=topics)
