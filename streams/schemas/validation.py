"""Schema validation on the produce path, as Confluent Server does it per topic.

With ``confluent.value.schema.validation=true`` (``confluent.key.schema.validation`` for
keys) on a topic, every record a producer sends must carry a value in the schema registry's
wire format (magic byte 0, then a 4-byte schema id) whose id is one of the live versions of
the topic's ``<topic>-value`` subject (``<topic>-key``; Confluent's TopicNameStrategy). A
record set with one record that does not is refused as a whole with Kafka's INVALID_RECORD
and a message naming the record and the reason; nothing of it is written. Null values
(tombstones) and null keys pass. Only the envelope is checked, as Confluent Server does: the
payload itself is the serializer's business.

The check runs on the listener's thread before the record set is appended; topics without
the settings cost one config look-up per partition of a request.
"""

from __future__ import annotations

from typing import Protocol

from streams.log import compression
from streams.log import records as rb
from streams.log.store import LogStore
from streams.schemas.wire import MAGIC

_ENVELOPE = 5  # the magic byte and the schema id

try:  # compiled (streams/log/_cdecode.pyx): the envelopes without building records
    from streams.log._cdecode import envelopes as _native
except ImportError:  # pragma: no cover - not built: the pure reference below
    _native = None


class SubjectIds(Protocol):
    def subject_ids(self, subject: str) -> frozenset[int]: ...


class SchemaValidation:
    """A ``RecordCheck`` (``streams.protocol.handlers.common``) over a store's topic configs
    and a registry's subjects."""

    def __init__(self, store: LogStore, registry: SubjectIds):
        self._store = store
        self._registry = registry

    def __call__(self, topic: str, partition: int, data: bytes) -> str | None:
        try:
            keys, values = self._store.partition_log(topic, partition).config.schema_validation
        except Exception:  # noqa: BLE001 - an unknown topic or partition: the append says so
            return None
        if not keys and not values:
            return None
        for part, on in (("key", keys), ("value", values)):
            if not on:
                continue
            try:
                found = _envelopes(data, part == "key")
            except Exception:  # noqa: BLE001 - a malformed record set: the append refuses it
                return None
            if found is None:
                return None
            subject = f"{topic}-{part}"
            first_bad, ids = found
            problem = None
            if first_bad >= 0:
                problem = (first_bad, _NOT_WIRE)
            known = self._registry.subject_ids(subject) if ids else frozenset()
            for schema_id, index in ids.items():
                if schema_id not in known and (problem is None or index < problem[0]):
                    if known:
                        why = f"names schema id {schema_id}, which is not a version of {subject}"
                    else:
                        why = f"names schema id {schema_id}, and subject {subject} has no schema"
                    problem = (index, why)
            if problem is not None:
                return (
                    f"record {problem[0]} of the record set: its {part} {problem[1]} "
                    f"(topic {topic} has confluent.{part}.schema.validation=true)"
                )
        return None


_NOT_WIRE = "is not in the schema registry's wire format (magic byte 0 and a schema id)"


def _envelopes(data: bytes, keys: bool) -> tuple[int, dict[int, int]] | None:
    """Over every batch of a record set: (index of the first record whose key or value is
    not in the wire format, or -1; {schema id: index of the first record naming it}); None
    when the set does not parse."""
    view = memoryview(data)
    pos = index = 0
    first_bad = -1
    ids: dict[int, int] = {}
    while pos < len(data):
        _, size = rb.peek_size(view, pos)
        batch = view[pos : pos + size]
        h = rb.parse_header(batch)
        body = batch[rb.HEADER_SIZE : h.size]
        if h.codec:
            body = memoryview(compression.decompress(h.codec, body))
        found = _native(body, keys) if _native is not None else _pure(batch, keys)
        if found is None:
            return None
        bad, batch_ids = found
        if bad >= 0 and first_bad < 0:
            first_bad = index + bad
        for schema_id, i in batch_ids.items():
            ids.setdefault(schema_id, index + i)
        index += h.count
        pos += size
    return first_bad, ids


def _pure(batch, keys: bool) -> tuple[int, dict[int, int]]:
    """`_cdecode.envelopes` in Python, over one batch (the reference)."""
    first_bad = -1
    ids: dict[int, int] = {}
    for i, record in enumerate(rb.decode_records(batch)):
        data = record.key if keys else record.value
        if data is None:
            continue
        if len(data) < _ENVELOPE or data[0] != MAGIC:
            if first_bad < 0:
                first_bad = i
        else:
            ids.setdefault(int.from_bytes(data[1:_ENVELOPE], "big"), i)
    return first_bad, ids
