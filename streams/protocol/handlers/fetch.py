"""Fetch: whole raw batches from the log, long-polling until `min_bytes` or `max_wait_ms`.

Each partition answers with the batches starting at the one containing the fetch offset (the
client skips the records before it), never past the high watermark, at least one batch even if
it exceeds the limits (KIP-74). read_uncommitted readers read up to the high watermark;
read_committed ones (isolation level 1, v4+) up to the last stable offset (the first offset of
the earliest open transaction), with the aborted transactions that overlap what is returned
(producer id, first offset), so the client drops those producers' records up to their ABORT
marker, as Kafka's fetch does (``streams.log.txn``).

From v13 the request names topics by id (KIP-516) and the response answers by id; an id no
topic has (deleted, or re-created under a new id) gets UNKNOWN_TOPIC_ID, which makes clients
refresh their metadata.

Waiting does not poll: the fetch registers with the `AppendNotifier` before reading, and sleeps
until an append to one of its partitions (or the deadline). No fetch sessions: session id 0
means "full fetch each time", which every client accepts.

Thread-safety: handlers run on the listener's event loop, one request of a connection at a
time (Produce and Fetch overlap later requests, see ``handlers``); blocking engine calls go
through ``BrokerContext.blocking``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streams import telemetry
from streams.errors import LogDamaged, OffsetOutOfRange, TidelogError
from streams.protocol import codec
from streams.protocol.codec import Request
from streams.protocol.handlers.common import (
    BrokerContext,
    ErrorCode,
    domain_error_code,
    topic_for_id,
)

READ_COMMITTED = 1
MIN_MAGIC2_VERSION = 4
MIN_TOPIC_ID_VERSION = 13
NO_LIMIT = 2**31 - 1


async def handle_fetch(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    topics = _named_topics(ctx, req)
    keys = [(name, p.partition) for name, t, _ in topics if name for p in t.partitions]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait_ms, 0) / 1000
    while True:
        remaining = deadline - loop.time()
        waiter = ctx.notifier.watch(keys) if remaining > 0 else None
        try:
            responses, size, failed = _read_all(ctx, req, topics)
            if waiter is None or size >= max(body.min_bytes, 1) or failed:
                break
            await asyncio.wait((waiter,), timeout=remaining)
        finally:
            if waiter is not None:
                ctx.notifier.unwatch(keys, waiter)
    return codec.make_response(
        req, throttle_time_ms=0, error_code=0, session_id=0, responses=responses
    )


def _named_topics(ctx: BrokerContext, req: Request) -> list[tuple[str | None, Any, int]]:
    """(name, request topic, error code) per requested topic: v13+ name them by id, resolved
    once per request (None and UNKNOWN_TOPIC_ID when no topic has that id)."""
    if req.api_version < MIN_TOPIC_ID_VERSION:
        return [(t.topic, t, 0) for t in req.body.topics]
    out = []
    for t in req.body.topics:
        try:
            out.append((topic_for_id(ctx, t.topic_id), t, 0))
        except TidelogError as exc:
            out.append((None, t, domain_error_code(exc)))
    return out


def _read_all(ctx: BrokerContext, req: Request, topics):
    body = req.body
    cls = codec.response_class(req.api_key)
    topic_cls = cls.FetchableTopicResponse
    budget = body.max_bytes if req.api_version >= 3 else NO_LIMIT
    # Fetch v0-3 clients read message format v0/v1 only: the versions are advertised (old
    # librdkafka needs them in range to enable features) but answered with an error
    old_format = req.api_version < MIN_MAGIC2_VERSION
    committed = req.api_version >= 4 and body.isolation_level == READ_COMMITTED
    out, total, failed = [], 0, False
    for name, t, topic_error in topics:
        parts = []
        for p in t.partitions:
            # once the response is full, later partitions only report their offsets; the first
            # batch of the response is returned even if it exceeds every limit (KIP-74)
            limit = min(p.partition_max_bytes, budget)
            limit = limit if total else max(limit, 1)
            aborted = []
            if old_format:
                data, fields = b"", _fields(ErrorCode.UNSUPPORTED_VERSION, -1, -1)
            elif name is None:
                data, fields = b"", _fields(topic_error, -1, -1)
            else:
                data, fields, aborted = _read_partition(
                    ctx, name, p.partition, p.fetch_offset, limit, committed
                )
            total += len(data)
            budget -= len(data)
            failed = failed or fields["error_code"] != 0
            parts.append(
                topic_cls.PartitionData(
                    partition_index=p.partition,
                    aborted_transactions=[
                        topic_cls.PartitionData.AbortedTransaction(
                            producer_id=pid, first_offset=first
                        )
                        for pid, first in aborted
                    ]
                    if committed
                    else None,
                    preferred_read_replica=-1,
                    records=data,
                    **fields,
                )
            )
        # v13+ answer by id (the name is not on the wire there)
        out.append(topic_cls(topic=name or "", topic_id=t.topic_id, partitions=parts))
    return out, total, failed


def _read_partition(
    ctx: BrokerContext, topic: str, partition: int, offset: int, limit: int, committed: bool
):
    """(records, response fields, aborted transactions in range) of one partition."""
    try:
        got = ctx.store.fetch(topic, partition, offset, limit, committed)
        if got.records:
            count = max(0, got.next_offset - offset)
            telemetry.current().records_out(topic, count, len(got.records))
        fields = _fields(0, got.high_watermark, got.log_start_offset, got.last_stable_offset)
        return got.records, fields, got.aborted
    except OffsetOutOfRange as exc:
        return b"", _fields(1, exc.end_offset, exc.log_start_offset), []
    except LogDamaged as exc:  # CORRUPT_MESSAGE, with the partition's offsets as Kafka sends
        start, hw = ctx.store.offsets(topic, partition)
        return b"", _fields(domain_error_code(exc), hw, start), []
    except TidelogError as exc:
        return b"", _fields(domain_error_code(exc), -1, -1), []


def _fields(error: int, hw: int, start: int, lso: int | None = None) -> dict:
    return {
        "error_code": error,
        "high_watermark": hw,
        "last_stable_offset": hw if lso is None else lso,
        "log_start_offset": start,
    }
