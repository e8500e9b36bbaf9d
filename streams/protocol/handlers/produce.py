"""Produce and InitProducerId (of idempotent producers; transactional ones: ``transactions``).

A Produce request is handled in two phases so that pipelined requests on one connection keep
their order and still share fsyncs:

1. synchronously, on the event loop, in request order: each partition's record set goes
   through the log's entry point (``streams.log.produce.append_record_set``: validation,
   the idempotent producer's sequence, the transaction coordinator's check of transactional
   batches, then the write as received);
2. then, off the loop, wait until the flush policy is satisfied (``sync_to``): the writes of
   many requests and connections made meanwhile share one fdatasync (group commit).

acks=0 gets no response; if such a request fails, the connection is closed, as Kafka does.

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from concurrent.futures import Future
from typing import Any, NamedTuple

from streams.errors import StorageError, TidelogError, UnknownTopic
from streams.log.partition import PartitionLog
from streams.log.produce import append_record_set
from streams.log.store import is_internal
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers import transactions
from streams.protocol.handlers.common import (
    BrokerContext,
    CloseConnection,
    ErrorCode,
    domain_error_code,
    log,
    topic_for_id,
)

MIN_MAGIC2_VERSION = 3  # Produce v0-2 carry message format v0/v1, which Tidelog does not store
MIN_TOPIC_ID_VERSION = 13  # topics named by id (KIP-516)
MAX_EPOCH = 32767


class PartitionResult(NamedTuple):
    index: int
    error: int
    base_offset: int = -1
    timestamp: int = -1
    log_start: int = -1
    message: str | None = None


def handle_produce(ctx: BrokerContext, req: Request) -> Awaitable:
    """Phase 1 now (see the module docstring); returns the awaitable of phase 2."""
    body = req.body
    syncs: list[tuple[PartitionLog, int]] = []
    results = []
    for topic_data in body.topic_data:
        name, topic_error = topic_data.name, 0
        if req.api_version >= MIN_TOPIC_ID_VERSION:  # by id (KIP-516): never auto-created
            try:
                name = topic_for_id(ctx, topic_data.topic_id)
            except TidelogError as exc:
                topic_error = domain_error_code(exc)
        parts = [
            PartitionResult(pd.index, topic_error)
            if topic_error
            else _produce_partition(ctx, req, body.acks, name, pd.index, pd.records, syncs)
            for pd in topic_data.partition_data
        ]
        results.append((name, topic_data.topic_id, parts))
    # requested now, not in `_complete`: written records must reach the disk (and the high
    # watermark) even if this request is cancelled, e.g. by its connection closing
    synced = ctx.executor.submit(_sync_all, syncs) if syncs else None
    return _complete(req, body.acks, results, synced)


def _produce_partition(ctx, req, acks, topic, partition, records, syncs) -> PartitionResult:
    if acks not in (0, 1, -1):
        return PartitionResult(partition, ErrorCode.INVALID_REQUIRED_ACKS)
    if req.api_version < MIN_MAGIC2_VERSION:
        return PartitionResult(partition, ErrorCode.UNSUPPORTED_VERSION)
    if is_internal(topic):
        return PartitionResult(partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        plog = _partition_log(ctx, topic, partition)
        return _append(ctx, plog, bytes(records or b""), syncs)
    except TidelogError as exc:
        return PartitionResult(partition, domain_error_code(exc), message=str(exc))


def _partition_log(ctx: BrokerContext, topic: str, partition: int) -> PartitionLog:
    try:
        return ctx.store.partition_log(topic, partition)
    except UnknownTopic:
        if not ctx.config.auto_create_topics:
            raise
        # rare (clients ask Metadata first, which creates): created inline to keep the order
        if topic not in ctx.store.list_topics():
            ctx.store.create_topic(topic, ctx.config.default_partitions)
            log.info("auto-created topic %s on produce", topic)
        return ctx.store.partition_log(topic, partition)


def _append(ctx, plog: PartitionLog, data: bytes, syncs) -> PartitionResult:
    """One partition's record set through the log's entry point (``streams.log.produce``)."""
    done = append_record_set(plog, data, ctx.producers, ctx.transactions.verify_produce)
    if done.sync_to is not None:
        syncs.append((plog, done.sync_to))
    start = plog.log_start_offset
    return PartitionResult(plog.partition, 0, done.base_offset, done.timestamp, start)


def _sync_all(syncs: list[tuple[PartitionLog, int]]) -> dict[tuple[str, int], StorageError]:
    """Wait for the disk; returns the partitions whose sync failed (they answer
    KAFKA_STORAGE_ERROR: their records may not be on disk, so they are not acknowledged)."""
    failed = {}
    for plog, end in syncs:
        try:
            plog.sync_to(end)
        except StorageError as exc:
            failed[(plog.topic, plog.partition)] = exc
    return failed


async def _complete(req: Request, acks: int, results, synced: Future | None) -> Any:
    if synced is not None:
        failed = await asyncio.shield(asyncio.wrap_future(synced))
        if failed:
            results = _with_sync_failures(results, failed)
    if acks == 0:
        failed = [r for _, _, parts in results for r in parts if r.error]
        if failed:
            raise CloseConnection(f"acks=0 produce failed with error {failed[0].error}")
        return None
    cls = codec.response_class(req.api_key)
    topic_cls = cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    responses = [
        topic_cls(
            name=name,
            topic_id=topic_id,  # v13+ answer by id
            partition_responses=[
                part_cls(
                    index=r.index,
                    error_code=r.error,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.timestamp,
                    log_start_offset=r.log_start,
                    record_errors=[],
                    error_message=r.message,
                )
                for r in parts
            ],
        )
        for name, topic_id, parts in results
    ]
    return codec.make_response(req, responses=responses, throttle_time_ms=0)


def _with_sync_failures(results, failed: dict[tuple[str, int], StorageError]):
    code = int(ErrorCode.KAFKA_STORAGE_ERROR)
    return [
        (
            name,
            [
                PartitionResult(r.index, code, message=str(failed[(name, r.index)]))
                if (name, r.index) in failed and not r.error
                else r
                for r in parts
            ],
        )
        for name, parts in results
    ]


async def handle_init_producer_id(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if body.transactional_id is not None:
        return await transactions.handle_init_producer_id(ctx, req)
    pid, epoch = body.producer_id, body.producer_epoch
    if req.api_version >= 3 and pid >= 0 and 0 <= epoch < MAX_EPOCH:
        epoch += 1  # KIP-360: the producer bumps its epoch to reset its sequences
    else:
        pid, epoch = await ctx.blocking(ctx.producers.allocate_id), 0
    return codec.make_response(
        req, throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch
    )
