"""The validator of the one produce path (Kafka's ``LogValidator``): what a record set must pass
before ``PartitionLog`` appends it, by where it comes from (Kafka's ``AppendOrigin``).

Every append of records goes through ``PartitionLog.append_batches`` (dedupe against the
partition's producer state, the transaction check, the write, the producer-state and
transaction bookkeeping, all under the partition's write lock). This module makes the batches
it takes:

- ``client_batches``: a record set as a Kafka client sent it (the listener's Produce, the
  embedded transactional producer). Uncompressed sets may hold several batches; every one is
  validated before any is written: framing, magic, CRC-32C, at least one record and the record
  count against the body, not a control batch, a producer id on a transactional batch,
  ``max.message.bytes``, a key on every record of a compacted topic (checked by decoding the
  batch). A batch is stored as received (only its base offset is assigned) unless the topic's
  config demands a re-encoding (another ``compression.type``, or
  ``message.timestamp.type=LogAppendTime``), as Kafka's ``LogValidator`` does.
- ``store_batch``: records the store encodes itself (``LogStore.append*``, the embedded
  producer without transactions), already with the topic's codec and timestamp type.
- ``marker_batch`` (``streams.log.txn``): a COMMIT or ABORT control batch, written only by
  the transaction coordinator through ``PartitionLog.write_marker``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from streams.errors import InvalidRecord, RecordTooLarge
from streams.log import compression
from streams.log import records as rb
from streams.log.config import TopicConfig
from streams.log.records import ProducerRecord

Batch = tuple[rb.BatchHeader, bytes]


class Appended(NamedTuple):
    """Where a record set landed: the first batch's base offset and timestamp (the append
    time under LogAppendTime, else -1 as in Kafka), the offset to ``sync_to`` before
    acknowledging (None: nothing to wait for) and the partition's log start offset."""

    base_offset: int
    timestamp: int
    sync_to: int | None
    log_start_offset: int = 0


def client_batches(config: TopicConfig, topic: str, data: bytes, now: int) -> list[Batch]:
    """A client's record set, validated (see the module docstring) and re-encoded where the
    topic's config demands it. Raises CorruptRecord, InvalidRecord or RecordTooLarge; nothing
    is written then."""
    batches = split_batches(data)
    for h, batch in batches:  # every one checked before any is re-encoded or written
        check_client_batch(config, topic, batch, h)
    return [_as_configured(config, topic, h, batch, now) for h, batch in batches]


def check_client_batch(config: TopicConfig, topic: str, batch: bytes, h: rb.BatchHeader) -> None:
    """The checks of a client batch whose framing, magic and CRC-32C ``split_batches``
    checked: not a control batch, at least one record, ``max.message.bytes``, and the record
    count against the body."""
    if h.is_control:
        raise InvalidRecord("clients may not write control batches")
    if h.count == 0:
        raise InvalidRecord("a record batch needs at least one record")
    if h.attributes & rb.ATTR_TRANSACTIONAL and h.producer_id < 0:
        raise InvalidRecord("a transactional batch needs a producer id")
    check_size(config, topic, len(batch))
    rb.check_record_count(batch, h)


def _as_configured(config: TopicConfig, topic: str, h: rb.BatchHeader, batch: bytes, now: int):
    """The batch as the topic stores it: re-encoded only when the config demands it (another
    codec, append time); a compacted topic's batch is decoded to check its keys and otherwise
    kept as received."""
    codec = config.codec
    reencode = (codec is not None and codec != h.codec) or config.log_append_time
    if not (config.compact or reencode):
        return h, batch
    recs = rb.decode_records(batch, h)
    if config.compact and any(r.key is None for r in recs):
        raise InvalidRecord(f"topic {topic!r} is compacted: every record needs a key")
    if not reencode:
        return h, batch
    new = rb.build_batch(
        [ProducerRecord(r.value, r.key, r.headers, r.timestamp_ms) for r in recs],
        now_ms=now,
        codec=h.codec if codec is None else codec,
        log_append_time=config.log_append_time,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        attributes_extra=h.attributes & rb.ATTR_TRANSACTIONAL,
    )
    return rb.parse_header(new), new


def store_batch(
    config: TopicConfig, topic: str, records: Sequence[ProducerRecord], now: int
) -> Batch:
    """One batch of records the store encodes (the topic's codec and timestamp type); raises
    InvalidRecord (a compacted topic's record without a key) or RecordTooLarge."""
    if config.compact:
        for r in records:
            if r[1] is None:  # a ProducerRecord or a plain tuple of its fields
                raise InvalidRecord(
                    f"topic {topic!r} is compacted (cleanup.policy=compact): "
                    "every record needs a key"
                )
    batch = rb.build_batch(
        records,
        now_ms=now,
        codec=config.codec or compression.NONE,
        log_append_time=config.log_append_time,
    )
    check_size(config, topic, len(batch))
    return rb.parse_header(batch), batch


def check_size(config: TopicConfig, topic: str, size: int) -> None:
    limit = config.get("max.message.bytes")
    if size > limit:
        raise RecordTooLarge(
            f"record batch of {size} bytes exceeds max.message.bytes={limit} of topic {topic!r}"
        )


def split_batches(data: bytes) -> list[Batch]:
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
