"""The hot path's wire codec written out by hand: the Produce request (v3-13) and its response,
and the two other requests of each transaction, AddPartitionsToTxn (v0-3) and EndTxn (v0-5).

kafka-python's generic codec (``codec``) builds a ``DataContainer`` per struct and walks the
schema for every field: for a Produce, the request every record arrives in, decoding it and
encoding its answer took ~90 us of CPU, against ~10 here. This module reads and writes the
same bytes with ``struct`` directly:

- ``decode_produce(frame)``: a Produce request frame (header included) as its version,
  correlation id, client id and a body with the attributes of the generic decoder's that the
  listener reads (``transactional_id``, ``acks``, ``timeout_ms``, ``topic_data[].name``/
  ``topic_id``/``partition_data[].index``/``records``). It returns None for anything it does
  not expect — tagged fields, a null array, bytes left over, a truncated frame — and the
  caller decodes with the generic codec, which stays the reference (its answer, or its
  ProtocolError, is then the answer);
- ``encode_produce_response(correlation_id, version, results)``: the framed response, byte
  for byte what the generic encoder writes for the same fields (record errors empty, no
  current leader, no node endpoints, throttle 0: all Tidelog answers);
- ``decode_add_partitions`` and ``encode_add_partitions_response``, ``decode_end_txn`` and
  ``encode_end_txn_response``: the same for AddPartitionsToTxn (body attributes
  ``v3_and_below_transactional_id`` etc.) and EndTxn.

tests/protocol/test_fastcodec.py holds both to the generic codec over every version.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

PRODUCE_KEY = 0
MIN_VERSION, MAX_VERSION = 3, 13
FLEXIBLE = 9  # compact strings and arrays, tagged fields (KIP-482)
BY_ID = 13  # topics named by id (KIP-516)

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V2 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")  # + log start offset (v5+)
_NO_ERRORS_V8 = b"\x00\x00\x00\x00"  # record_errors: an empty array (v8)
_NULL_STRING = b"\xff\xff"
_PID_EPOCH = struct.Struct(">qh")
_PARTITION_ERROR = struct.Struct(">ih")

ADD_PARTITIONS_KEY = 24
ADD_PARTITIONS_MAX_VERSION = 3  # v4+ is the brokers' batched form (not advertised)
ADD_PARTITIONS_FLEXIBLE = 3

END_TXN_KEY = 26
END_TXN_MAX_VERSION = 5
END_TXN_FLEXIBLE = 3
_PID_EPOCH_BOOL = struct.Struct(">qhB")
_THROTTLE_ERROR = struct.Struct(">ih")


class PartitionData(NamedTuple):
    index: int
    records: bytes | None


class TopicData(NamedTuple):
    name: str
    topic_id: uuid.UUID | None
    partition_data: list[PartitionData]


class ProduceBody(NamedTuple):
    """The fields of a decoded Produce request the listener reads (as kafka-python names
    them)."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicData]


class TxnTopic(NamedTuple):
    name: str
    partitions: list[int]


class AddPartitionsBody(NamedTuple):
    """AddPartitionsToTxn v0-3's fields, as kafka-python names them."""

    v3_and_below_transactional_id: str
    v3_and_below_producer_id: int
    v3_and_below_producer_epoch: int
    v3_and_below_topics: list[TxnTopic]


class EndTxnBody(NamedTuple):
    """EndTxn's fields, as kafka-python names them."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


class _Short(Exception):
    """The frame ends early or holds what this decoder leaves to the generic one."""


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise _Short


def _write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def decode_produce(frame: bytes) -> tuple[int, int, str | None, ProduceBody] | None:
    """The Produce request in `frame` (api key 0, version 3-13) as (version, correlation id,
    client id, body), or None: leave it to the generic decoder."""
    try:
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if api_key != PRODUCE_KEY or not MIN_VERSION <= version <= MAX_VERSION:
            return None
        flexible = version >= FLEXIBLE
        client_id, pos = _header_rest(frame, n, flexible)
        n, pos = _string_size(frame, pos, flexible)
        transactional_id = None
        if n >= 0:
            transactional_id = frame[pos : pos + n].decode()
            pos += n
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
        pos += 6
        topics, pos = _count(frame, pos, flexible)
        topic_data = []
        for _ in range(topics):
            name, topic_id = "", None
            if version >= BY_ID:
                if len(frame) < pos + 16:
                    return None
                topic_id = uuid.UUID(bytes=bytes(frame[pos : pos + 16]))
                pos += 16
            else:
                name, pos = _string(frame, pos, flexible)
            parts, pos = _count(frame, pos, flexible)
            partition_data = []
            for _ in range(parts):
                (index,) = _I32.unpack_from(frame, pos)
                pos += 4
                if flexible:
                    n, pos = _uvarint(frame, pos)
                    n -= 1
                else:
                    (n,) = _I32.unpack_from(frame, pos)
                    pos += 4
                records = None
                if n >= 0:
                    if len(frame) < pos + n:
                        return None
                    records = frame[pos : pos + n]
                    pos += n
                if flexible:
                    if frame[pos] != 0:
                        return None
                    pos += 1
                partition_data.append(PartitionData(index, records))
            if flexible:
                if frame[pos] != 0:
                    return None
                pos += 1
            topic_data.append(TopicData(name, topic_id, partition_data))
        if flexible:
            if frame[pos] != 0:
                return None
            pos += 1
        if pos != len(frame):
            return None
    except (_Short, IndexError, struct.error, UnicodeDecodeError):
        return None
    return (
        version,
        correlation_id,
        client_id,
        ProduceBody(transactional_id, acks, timeout_ms, topic_data),
    )


def decode_add_partitions(frame: bytes) -> tuple[int, int, str | None, AddPartitionsBody] | None:
    """An AddPartitionsToTxn request (api key 24, version 0-3, the clients' form) as
    (version, correlation id, client id, body), or None: leave it to the generic decoder."""
    try:
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if api_key != ADD_PARTITIONS_KEY or not 0 <= version <= ADD_PARTITIONS_MAX_VERSION:
            return None
        flexible = version >= ADD_PARTITIONS_FLEXIBLE
        client_id, pos = _header_rest(frame, n, flexible)
        transactional_id, pos = _string(frame, pos, flexible)
        producer_id, epoch = _PID_EPOCH.unpack_from(frame, pos)
        pos += 10
        count, pos = _count(frame, pos, flexible)
        topics = []
        for _ in range(count):
            name, pos = _string(frame, pos, flexible)
            parts, pos = _count(frame, pos, flexible)
            end = pos + 4 * parts
            if len(frame) < end:
                return None
            partitions = list(struct.unpack_from(f">{parts}i", frame, pos))
            pos = end
            if flexible:
                pos = _tags(frame, pos)
            topics.append(TxnTopic(name, partitions))
        if flexible:
            pos = _tags(frame, pos)
        if pos != len(frame):
            return None
    except (_Short, IndexError, struct.error, UnicodeDecodeError):
        return None
    body = AddPartitionsBody(transactional_id, producer_id, epoch, topics)
    return version, correlation_id, client_id, body


def encode_add_partitions_response(correlation_id: int, version: int, results) -> bytearray:
    """The framed AddPartitionsToTxn response (v0-3) for `results`, a list of (topic,
    [(partition, error code)]): what the generic encoder writes (throttle 0)."""
    flexible = version >= ADD_PARTITIONS_FLEXIBLE
    out = bytearray(b"\x00\x00\x00\x00")  # the frame size, set at the end
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    _write_count(out, len(results), flexible)
    for name, parts in results:
        raw = name.encode()
        if flexible:
            _write_uvarint(out, len(raw) + 1)
        else:
            out += _I16.pack(len(raw))
        out += raw
        _write_count(out, len(parts), flexible)
        for partition, code in parts:
            out += _PARTITION_ERROR.pack(partition, code)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return out


def decode_end_txn(frame: bytes) -> tuple[int, int, str | None, EndTxnBody] | None:
    """An EndTxn request (api key 26, version 0-5) as (version, correlation id, client id,
    body), or None: leave it to the generic decoder."""
    try:
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if api_key != END_TXN_KEY or not 0 <= version <= END_TXN_MAX_VERSION:
            return None
        flexible = version >= END_TXN_FLEXIBLE
        client_id, pos = _header_rest(frame, n, flexible)
        transactional_id, pos = _string(frame, pos, flexible)
        producer_id, epoch, committed = _PID_EPOCH_BOOL.unpack_from(frame, pos)
        pos += _PID_EPOCH_BOOL.size
        if flexible:
            pos = _tags(frame, pos)
        if pos != len(frame):
            return None
    except (_Short, IndexError, struct.error, UnicodeDecodeError):
        return None
    body = EndTxnBody(transactional_id, producer_id, epoch, committed != 0)
    return version, correlation_id, client_id, body


def encode_end_txn_response(
    correlation_id: int, version: int, code: int, producer_id: int, epoch: int
) -> bytearray:
    """The framed EndTxn response (v0-5): what the generic encoder writes (throttle 0)."""
    flexible = version >= END_TXN_FLEXIBLE
    out = bytearray(b"\x00\x00\x00\x00")  # the frame size, set at the end
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    out += _THROTTLE_ERROR.pack(0, code)
    if version >= 5:
        out += _PID_EPOCH.pack(producer_id, epoch)
    if flexible:
        out.append(0)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return out


def _write_count(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _header_rest(frame: bytes, n: int, flexible: bool) -> tuple[str | None, int]:
    """The client id (of length `n`, read with the header's first fields) and the position
    after the header: request header v1, or v2 (`flexible`) with its tagged fields, which
    must be none (else _Short)."""
    pos = _HEADER.size
    client_id = None
    if n >= 0:
        client_id = frame[pos : pos + n].decode()
        pos += n
    if flexible:
        if frame[pos] != 0:
            raise _Short
        pos += 1
    return client_id, pos


def _string_size(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """A string's length (-1: null) and where its bytes start."""
    if flexible:
        n, pos = _uvarint(frame, pos)
        return n - 1, pos
    (n,) = _I16.unpack_from(frame, pos)
    return n, pos + 2


def _string(frame: bytes, pos: int, flexible: bool) -> tuple[str, int]:
    """A non-null string; _Short for a null or truncated one."""
    n, pos = _string_size(frame, pos, flexible)
    if n < 0 or len(frame) < pos + n:
        raise _Short
    return frame[pos : pos + n].decode(), pos + n


def _tags(frame: bytes, pos: int) -> int:
    """Past a struct's tagged fields, which must be none (else _Short)."""
    if frame[pos] != 0:
        raise _Short
    return pos + 1


def _count(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length; _Short for a null array (left to the generic decoder)."""
    if flexible:
        n, pos = _uvarint(frame, pos)
        n -= 1
    else:
        (n,) = _I32.unpack_from(frame, pos)
        pos += 4
    if n < 0:
        raise _Short
    return n, pos


def encode_produce_response(correlation_id: int, version: int, results) -> bytearray:
    """The framed Produce response of `version` for `results`, a list of (topic name, topic
    id, [PartitionResult]) (``handlers.produce``): what the generic encoder writes for them,
    with empty record errors, throttle 0 and no tagged fields."""
    flexible = version >= FLEXIBLE
    out = bytearray(b"\x00\x00\x00\x00")  # the frame size, set at the end
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header v1: no tagged fields
        _write_uvarint(out, len(results) + 1)
    else:
        out += _I32.pack(len(results))
    for name, topic_id, parts in results:
        if version >= BY_ID:
            out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            raw = name.encode()
            if flexible:
                _write_uvarint(out, len(raw) + 1)
            else:
                out += _I16.pack(len(raw))
            out += raw
        if flexible:
            _write_uvarint(out, len(parts) + 1)
        else:
            out += _I32.pack(len(parts))
        for r in parts:
            if version >= 5:
                out += _PART_V5.pack(r.index, r.error, r.base_offset, r.timestamp, r.log_start)
            else:
                out += _PART_V2.pack(r.index, r.error, r.base_offset, r.timestamp)
            if version >= 8:
                message = r.message
                if flexible:
                    out.append(1)  # record_errors: empty compact array
                    if message is None:
                        out.append(0)
                    else:
                        raw = message.encode()
                        _write_uvarint(out, len(raw) + 1)
                        out += raw
                    out.append(0)  # the partition's tagged fields
                else:
                    out += _NO_ERRORS_V8
                    if message is None:
                        out += _NULL_STRING
                    else:
                        raw = message.encode()
                        out += _I16.pack(len(raw))
                        out += raw
        if flexible:
            out.append(0)  # the topic's tagged fields
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    if flexible:
        out.append(0)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return out
