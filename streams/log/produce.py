"""The one entry point for client-built record sets (Kafka's ``LogValidator`` +
``ProducerStateManager`` step of ``UnifiedLog.append``), used by the Kafka listener.

``append_record_set`` takes one partition's record set as the client sent it (uncompressed sets
may hold several batches) and:

1. validates every batch before writing any: framing, magic, CRC-32C, record count, not a
   control batch, ``max.message.bytes``, keys on a compacted topic;
2. checks every idempotent batch's sequence (``ProducerStateManager.check_batches``): a retry of
   one of the last five batches is answered with the original's offsets, not written again;
3. writes the rest as received (``PartitionLog.write_raw``: only the base offset is assigned),
   a transactional batch only if `verify_txn` lets it (see ``PartitionLog.write_raw``), and
   records each in the producer state.

It does not wait for the disk: each result says up to which offset to ``sync_to`` before
acknowledging, so many requests share one fdatasync (group commit).

Thread-safety: call it for a given partition from one thread at a time (the listener's event
loop), as the producer-state check and the writes must not interleave with another client's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from streams import telemetry
from streams.errors import InvalidRecord
from streams.log import records as rb
from streams.log.partition import PartitionLog
from streams.log.producer_state import ProducerStateManager


class Appended(NamedTuple):
    base_offset: int
    timestamp: int  # the append time under LogAppendTime, else -1
    sync_to: int | None  # offset to sync up to before acknowledging (None: nothing to wait)


def append_record_set(
    plog: PartitionLog,
    data: bytes,
    producers: ProducerStateManager,
    verify_txn: Callable[[str, int, rb.BatchHeader], None] | None = None,
) -> Appended:
    """Validate, deduplicate and write one partition's record set; the first batch's result.
    Raises CorruptRecord, InvalidRecord, RecordTooLarge, OutOfOrderSequence, ProducerFenced
    (nothing written) or what `verify_txn(topic, partition, header)` raises for a
    transactional batch (that batch and the ones after it are not written)."""
    verify = None
    if verify_txn is not None:

        def verify(h: rb.BatchHeader) -> None:
            verify_txn(plog.topic, plog.partition, h)

    batches = split_batches(data)
    for h, batch in batches:
        plog.check_client_batch(batch, h)  # CRC already checked by split_batches
        if plog.config.compact and len(batches) > 1:  # one batch: write_raw checks keys
            _check_keys(plog, h, batch)
    # every batch's sequence, continuity across the set's batches included, before any write
    dups = producers.check_batches(plog.topic, plog.partition, [h for h, _ in batches])
    results = []
    for (h, batch), dup in zip(batches, dups, strict=True):
        if dup is not None:  # a retry: acknowledged with the original once that is durable
            results.append(Appended(dup.base_offset, dup.timestamp, dup.last_offset + 1))
            continue
        base, last, ts, needs_sync = plog.write_raw(batch, checked=h, verify_txn=verify)
        producers.record(plog.topic, plog.partition, h, base, ts)
        telemetry.current().records_in(plog.topic, h.count, len(batch))
        results.append(Appended(base, ts, last + 1 if needs_sync else None))
    first = results[0]
    syncs = [r.sync_to for r in results if r.sync_to is not None]
    return first._replace(sync_to=max(syncs) if syncs else None)


def _check_keys(plog: PartitionLog, h: rb.BatchHeader, batch: bytes) -> None:
    """``write_raw``'s key check of a compacted topic, for a batch that is not the first."""
    if any(r.key is None for r in rb.decode_records(batch, h)):
        raise InvalidRecord(f"topic {plog.topic!r} is compacted: every record needs a key")


def split_batches(data: bytes) -> list[tuple[rb.BatchHeader, bytes]]:
    """The batches of a record set, each validated (framing, magic, CRC-32C)."""
    if not data:
        raise InvalidRecord("empty record set")
    out = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < rb.LOG_OVERHEAD:
            raise InvalidRecord("record set ends inside a batch header")
        _, size = rb.peek_size(data, pos)
        h = rb.validate_batch(data, pos, min(size, len(data) - pos))
        whole = pos == 0 and h.size == len(data)  # the usual case: one batch, no copy
        out.append((h, data if whole else data[pos : pos + h.size]))
        pos += h.size
    return out
