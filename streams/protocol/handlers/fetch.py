"""Fetch: whole raw batches from the log, long-polling until `min_bytes` or `max_wait_ms`.

Each partition answers with the batches starting at the one containing the fetch offset (the
client skips the records before it), never past the high watermark, at least one batch even if
it exceeds the limits (KIP-74). There are no transactions, so the last stable offset is the
high watermark and read_committed consumers read the same as read_uncommitted ones.

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
from streams.log import records as rb
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
            if old_format:
                data, fields = b"", _fields(ErrorCode.UNSUPPORTED_VERSION, -1, -1)
            elif name is None:
                data, fields = b"", _fields(topic_error, -1, -1)
            else:
                data, fields = _read_partition(ctx, name, p.partition, p.fetch_offset, limit)
            total += len(data)
            budget -= len(data)
            failed = failed or fields["error_code"] != 0
            parts.append(
                topic_cls.PartitionData(
                    partition_index=p.partition,
                    aborted_transactions=[] if committed else None,
                    preferred_read_replica=-1,
                    records=data,
                    **fields,
                )
            )
        # v13+ answer by id (the name is not on the wire there)
        out.append(topic_cls(topic=name or "", topic_id=t.topic_id, partitions=parts))
    return out, total, failed


def _read_partition(ctx: BrokerContext, topic: str, partition: int, offset: int, limit: int):
    try:
        plog = ctx.store.partition_log(topic, partition)
        hw = plog.high_watermark
        if not plog.log_start_offset <= offset <= hw:
            raise OffsetOutOfRange(topic, partition, offset, plog.log_start_offset, hw)
        data = plog.read_batches(offset, limit) if offset < hw and limit > 0 else b""
        if data:
            telemetry.current().records_out(topic, _records_in(data, offset), len(data))
        return data, _fields(0, hw, plog.log_start_offset)
    except OffsetOutOfRange as exc:
        return b"", _fields(1, exc.end_offset, exc.log_start_offset)
    except LogDamaged as exc:  # CORRUPT_MESSAGE, with the partition's offsets as Kafka sends
        return b"", _fields(domain_error_code(exc), plog.high_watermark, plog.log_start_offset)
    except TidelogError as exc:
        return b"", _fields(domain_error_code(exc), -1, -1)


def _records_in(data: bytes, offset: int) -> int:
    """Records a fetch answer holds from `offset` on, from its batch headers (the last batch
    may be cut short by the size limit: only whole ones count)."""
    pos, last = 0, offset - 1
    while pos + rb.HEADER_SIZE <= len(data):
        h = rb.parse_header(data, pos)
        if pos + h.size > len(data):
            break
        last, pos = h.last_offset, pos + h.size
    return max(0, last - offset + 1)


def _fields(error: int, hw: int, start: int) -> dict:
    return {
        "error_code": error,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": start,
    }
