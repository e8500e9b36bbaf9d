"""Produce and InitProducerId (of idempotent producers; transactional ones: ``transactions``).

A Produce request is handled in two phases so that pipelined requests on one connection keep
their order and still share fsyncs:

1. in request order, on the event loop: each partition's record set goes through the log's
   one produce path (``LogStore.produce``: validation, the idempotent producer's sequence, the
   transaction coordinator's check of transactional batches, then the write as received). The
   write does not wait for the disk (a segment roll leaves its fsyncs to the next sync). A
   topic to auto-create is created first on the listener's thread pool; the connection's next
   request waits until this phase is done (``Deferred``), so the order holds;
2. then, on the thread pool, wait until the flush policy is satisfied (``sync_to``): the
   writes of many requests and connections made meanwhile share one fdatasync (group commit).
   A transactional producer's request also waits, in a second task beside it, for the
   transaction coordinator's state log (``TransactionCoordinator.sync_state``): its
   AddPartitionsToTxn was answered before it was on disk. When the flush policy wants no
   sync (Kafka's, ``--flush kafka``) there is nothing to wait for: the answer is a future
   already done, with no task of its own.

acks=0 gets no response; if such a request fails, the connection is closed, as Kafka does.

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``. Embedded producers append to the same partitions from their
own threads: the partition's write lock orders them with the listener's writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from concurrent.futures import Future
from typing import Any, NamedTuple

from streams.errors import StorageError, TidelogError, TopicAlreadyExists
from streams.log import is_internal
from streams.protocol import codec, fastcodec
from streams.protocol.codec import Request
from streams.protocol.handlers import transactions
from streams.protocol.handlers.common import (
    BrokerContext,
    CloseConnection,
    Deferred,
    ErrorCode,
    domain_error_code,
    log,
    topic_for_id,
)

MIN_MAGIC2_VERSION = 3  # Produce v0-2 carry message format v0/v1, which Tidelog does not store
MIN_TOPIC_ID_VERSION = 13  # topics named by id (KIP-516)
MAX_EPOCH = 32767

Sync = tuple[str, int, int]  # topic, partition, offset to sync up to


class PartitionResult(NamedTuple):
    index: int
    error: int
    base_offset: int = -1
    timestamp: int = -1
    log_start: int = -1
    message: str | None = None


def handle_produce(ctx: BrokerContext, req: Request) -> Awaitable:
    """Phase 1 now (see the module docstring); returns the awaitable of phase 2. When a topic
    must be auto-created first, phase 1 runs after that creation, off the loop, and the answer
    is a ``Deferred`` whose ordered part ends once phase 1 has."""
    missing = _to_create(ctx, req)
    if not missing:
        return _phase_two(ctx, req, _phase_one(ctx, req))
    ordered = asyncio.get_running_loop().create_future()

    async def create_then_produce() -> Any:
        try:
            await ctx.blocking(_create_topics, ctx, missing)
            results = _phase_one(ctx, req)
        finally:
            ordered.set_result(None)
        return await _phase_two(ctx, req, results)

    return Deferred(ordered, asyncio.ensure_future(create_then_produce()))


def _to_create(ctx: BrokerContext, req: Request) -> list[str]:
    """The topics of `req` to auto-create (named, unknown, not internal, auto-create on)."""
    if not ctx.config.auto_create_topics or req.api_version >= MIN_TOPIC_ID_VERSION:
        return []  # by id (KIP-516): never auto-created
    names = {t.name for t in req.body.topic_data if not is_internal(t.name)}
    return sorted(name for name in names if not ctx.store.has_topic(name))


def _create_topics(ctx: BrokerContext, names: list[str]) -> None:
    """Auto-create (blocking: the new partitions and the topic's metadata are fsynced); a
    name another request created meanwhile is fine, and an invalid one is left for the
    append to report."""
    for name in names:
        try:
            ctx.store.create_topic(name, ctx.config.default_partitions)
            log.info("auto-created topic %s on produce", name)
        except TopicAlreadyExists:
            pass
        except TidelogError as exc:
            log.info("topic %s not auto-created on produce: %s", name, exc)


def _phase_one(ctx: BrokerContext, req: Request) -> tuple[list, list[Sync], bool]:
    """Write each partition's records; returns the results, what to sync, and whether a
    transactional batch was written (its transaction's state must be on disk too)."""
    body = req.body
    syncs: list[Sync] = []
    results = []
    transactional: list[bool] = []

    def verify(topic: str, partition: int, h) -> None:
        ctx.transactions.verify_produce(topic, partition, h)
        transactional.append(True)

    for topic_data in body.topic_data:
        name, topic_error = topic_data.name, 0
        if req.api_version >= MIN_TOPIC_ID_VERSION:
            try:
                name = topic_for_id(ctx, topic_data.topic_id)
            except TidelogError as exc:
                topic_error = domain_error_code(exc)
        parts = [
            PartitionResult(pd.index, topic_error)
            if topic_error
            else _produce_partition(ctx, req, name, pd.index, pd.records, syncs, verify)
            for pd in topic_data.partition_data
        ]
        results.append((name, topic_data.topic_id, parts))
    return results, syncs, bool(transactional)


def _phase_two(
    ctx: BrokerContext, req: Request, phase_one: tuple[list, list[Sync], bool]
) -> Awaitable:
    results, syncs, transactional = phase_one
    # requested now, not in `_complete`: written records must reach the disk (and the high
    # watermark) even if this request is cancelled, e.g. by its connection closing
    synced = ctx.executor.submit(_sync_all, ctx, syncs) if syncs else None
    state = None
    if syncs and transactional:
        # the AddPartitionsToTxn records that let these records in, beside their fdatasync
        state = ctx.executor.submit(ctx.transactions.sync_state)
    if synced is None:  # nothing to wait for (a relaxed flush policy): answered now, no task
        done = asyncio.get_running_loop().create_future()
        try:
            done.set_result(_answer(req, req.body.acks, results))
        except CloseConnection as exc:
            done.set_exception(exc)
        return done
    return _complete(req, req.body.acks, results, synced, state)


def _produce_partition(ctx, req, topic, partition, records, syncs, verify) -> PartitionResult:
    if req.body.acks not in (0, 1, -1):
        return PartitionResult(partition, ErrorCode.INVALID_REQUIRED_ACKS)
    if req.api_version < MIN_MAGIC2_VERSION:
        return PartitionResult(partition, ErrorCode.UNSUPPORTED_VERSION)
    if is_internal(topic):
        return PartitionResult(partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    data = bytes(records or b"")
    if ctx.record_check is not None:
        problem = ctx.record_check(topic, partition, data)
        if problem is not None:
            return PartitionResult(partition, ErrorCode.INVALID_RECORD, message=problem)
    try:
        done = ctx.store.produce(topic, partition, data, verify)
    except TidelogError as exc:
        return PartitionResult(partition, domain_error_code(exc), message=str(exc))
    if done.sync_to is not None:
        syncs.append((topic, partition, done.sync_to))
    return PartitionResult(partition, 0, done.base_offset, done.timestamp, done.log_start_offset)


def _sync_all(ctx: BrokerContext, syncs: list[Sync]) -> dict[tuple[str, int], StorageError]:
    """Wait for the disk; returns the partitions whose sync failed (they answer
    KAFKA_STORAGE_ERROR: their records may not be on disk, so they are not acknowledged)."""
    failed = {}
    for topic, partition, end in syncs:
        try:
            ctx.store.sync_to(topic, partition, end)
        except StorageError as exc:
            failed[(topic, partition)] = exc
    return failed


async def _complete(
    req: Request, acks: int, results, synced: Future | None, state: Future | None = None
) -> Any:
    if synced is not None:
        failed = await asyncio.shield(asyncio.wrap_future(synced))
        if state is not None:
            try:
                await asyncio.shield(asyncio.wrap_future(state))
            except StorageError as exc:  # the transaction's state is not known to be on disk
                failed = {(name, r.index): exc for name, _, parts in results for r in parts}
        if failed:
            results = _with_sync_failures(results, failed)
    return _answer(req, acks, results)


def _answer(req: Request, acks: int, results) -> bytearray | None:
    """The framed response (None for acks=0, or CloseConnection if such a request failed)."""
    if acks == 0:
        failed = [r for _, _, parts in results for r in parts if r.error]
        if failed:
            raise CloseConnection(f"acks=0 produce failed with error {failed[0].error}")
        return None
    # framed here (``fastcodec``: what kafka-python's encoder writes for the same fields)
    return fastcodec.encode_produce_response(req.correlation_id, req.api_version, results)


def _with_sync_failures(results, failed: dict[tuple[str, int], StorageError]):
    code = int(ErrorCode.KAFKA_STORAGE_ERROR)
    return [
        (
            name,
            topic_id,
            [
                PartitionResult(r.index, code, message=str(failed[(name, r.index)]))
                if (name, r.index) in failed and not r.error
                else r
                for r in parts
            ],
        )
        for name, topic_id, parts in results
    ]


async def handle_init_producer_id(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    if body.transactional_id is not None:
        return await transactions.handle_init_producer_id(ctx, req)
    pid, epoch = body.producer_id, body.producer_epoch
    if req.api_version >= 3 and pid >= 0 and 0 <= epoch < MAX_EPOCH:
        epoch += 1  # KIP-360: the producer bumps its epoch to reset its sequences
    else:
        pid, epoch = await ctx.blocking(ctx.store.allocate_producer_id), 0
    return codec.make_response(
        req, throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch
    )
