"""ListOffsets (earliest, latest, max timestamp, by timestamp) and OffsetForLeaderEpoch.

A single node with leader epoch 0: OffsetForLeaderEpoch answers the high watermark as the end
offset of epoch 0, which is what KIP-320 offset validation in clients needs to pass.
"""

from __future__ import annotations

from streams.errors import TidelogError
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import BrokerContext, domain_error_code

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


async def handle_list_offsets(ctx: BrokerContext, req: Request):
    cls = codec.response_class(req.api_key)
    topic_cls = cls.ListOffsetsTopicResponse
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            code, offset, ts = _lookup(ctx, t.name, p.partition_index, p.timestamp)
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


def _lookup(ctx: BrokerContext, topic: str, partition: int, timestamp: int):
    """(error code, offset, timestamp) for one partition."""
    try:
        plog = ctx.store.partition_log(topic, partition)
        if timestamp == LATEST:
            return 0, plog.high_watermark, -1
        if timestamp == EARLIEST:
            return 0, plog.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            timestamp = max((s.max_timestamp for s in plog.segments), default=-1)
            if timestamp < 0:
                return 0, -1, -1
        found = plog.offset_for_timestamp(timestamp)
        if found is None:
            return 0, -1, -1
        records = plog.read(found, max_records=1)
        return 0, found, records[0].timestamp_ms if records else timestamp
    except TidelogError as exc:
        return domain_error_code(exc), -1, -1


async def handle_offset_for_leader_epoch(ctx: BrokerContext, req: Request):
    cls = codec.response_class(req.api_key)
    topic_cls = cls.OffsetForLeaderTopicResult
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            try:
                end = ctx.store.partition_log(t.topic, p.partition).high_watermark
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
