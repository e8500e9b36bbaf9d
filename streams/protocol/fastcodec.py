"""The listener's hot requests written out by hand: Produce (v3-13), the requests of each
transaction, AddPartitionsToTxn (v0-3) and EndTxn (v0-5), and a transaction's offsets,
AddOffsetsToTxn (v0-4) and TxnOffsetCommit (v0-4); their requests and their responses.

kafka-python's generic codec (``codec``) builds a ``DataContainer`` per struct and walks the
schema for every field: for a Produce, the request every record arrives in, decoding it and
encoding its answer took ~90 us of CPU, against ~10 here; AddOffsetsToTxn and TxnOffsetCommit
(once per consume-transform-produce transaction) ~50-70 us each way against a few. This
module reads and writes the same bytes with ``struct`` directly, every request through one
set of primitives (the request header, strings, compact strings, arrays, tagged fields, the
response's framing):

- ``decode_<request>(frame)``: the request in `frame` (header included) as its version,
  correlation id, client id and a body holding the generic decoder's attributes the listener
  reads, named as kafka-python names them (Produce: ``transactional_id``, ``acks``,
  ``timeout_ms``, ``topic_data[].name``/``topic_id``/``partition_data[].index``/``records``;
  AddPartitionsToTxn: ``v3_and_below_transactional_id`` etc.; EndTxn, AddOffsetsToTxn and
  TxnOffsetCommit: all their fields). Each returns None for anything it does not expect —
  tagged fields, a null string or array where none is allowed, bytes left over, a truncated
  frame — and the caller (``codec.decode_request``) decodes with the generic codec, which
  stays the reference (its answer, or its ProtocolError, is then the answer);
- ``encode_<request>_response(correlation_id, version, ...)``: the framed response, byte for
  byte what the generic encoder writes for the same fields (throttle 0; for Produce empty
  record errors, no current leader, no node endpoints: all Tidelog answers).

tests/protocol/test_fastcodec.py holds them all to the generic codec over every version.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

PRODUCE_KEY = 0
MIN_VERSION, MAX_VERSION = 3, 13
FLEXIBLE = 9  # compact strings and arrays, tagged fields (KIP-482)
BY_ID = 13  # topics named by id (KIP-516)

ADD_PARTITIONS_KEY = 24
ADD_PARTITIONS_MAX_VERSION = 3  # v4+ is the brokers' batched form (not advertised)
ADD_PARTITIONS_FLEXIBLE = 3

ADD_OFFSETS_TO_TXN_KEY = 25
ADD_OFFSETS_MAX_VERSION = 4
ADD_OFFSETS_FLEXIBLE = 3

END_TXN_KEY = 26
END_TXN_MAX_VERSION = 5
END_TXN_FLEXIBLE = 3

TXN_OFFSET_COMMIT_KEY = 28
TXN_OFFSET_COMMIT_MAX_VERSION = 4
TXN_OFFSET_COMMIT_FLEXIBLE = 3

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V2 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")  # + log start offset (v5+)
_NO_ERRORS_V8 = b"\x00\x00\x00\x00"  # record_errors: an empty array (v8)
_NULL_STRING = b"\xff\xff"
_NO_ERRORS_V8_NULL = _NO_ERRORS_V8 + _NULL_STRING  # + error_message null
_PID_EPOCH = struct.Struct(">qh")
_PID_EPOCH_BOOL = struct.Struct(">qhB")
_PARTITION_ERROR = struct.Struct(">ih")
_THROTTLE_ERROR = struct.Struct(">ih")
_OFFSET = struct.Struct(">iq")  # partition index, committed offset
_OFFSET_EPOCH = struct.Struct(">iqi")  # + committed leader epoch (v2+)


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


class AddOffsetsToTxnBody(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


class TxnOffsetCommitPartition(NamedTuple):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


class TxnOffsetCommitTopic(NamedTuple):
    name: str
    partitions: list[TxnOffsetCommitPartition]


class TxnOffsetCommitBody(NamedTuple):
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: list[TxnOffsetCommitTopic]


class _Short(Exception):
    """The frame ends early or holds what this decoder leaves to the generic one."""


# what a decoder catches to answer None (the generic decoder then answers)
_GIVE_UP = (_Short, IndexError, struct.error, UnicodeDecodeError)


# ---------------------------------------------------------------------- reading primitives


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


def _header(
    frame: bytes, api_key: int, min_version: int, max_version: int, flexible_from: int
) -> tuple[int, int, str | None, bool, int]:
    """The request header of `frame`, for `api_key` in versions `min_version`-`max_version`
    (else _Short): (version, correlation id, client id, flexible, the position after it).
    Request header v1, or v2 (from `flexible_from`) with its tagged fields, which must be
    none."""
    key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
    if key != api_key or not min_version <= version <= max_version:
        raise _Short
    flexible = version >= flexible_from
    pos = _HEADER.size
    client_id = None
    if n >= 0:
        client_id = frame[pos : pos + n].decode()
        pos += n
    if flexible:
        if frame[pos] != 0:
            raise _Short
        pos += 1
    return version, correlation_id, client_id, flexible, pos


def _nullable_string(frame: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A string (compact when `flexible`) or None; _Short for a bad length or a truncation."""
    if flexible:
        n, pos = _uvarint(frame, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2
    if n < 0:
        if n < -1:
            raise _Short
        return None, pos
    if len(frame) < pos + n:
        raise _Short
    return frame[pos : pos + n].decode(), pos + n


def _string(frame: bytes, pos: int, flexible: bool) -> tuple[str, int]:
    """A non-null string; _Short for a null one (the generic decoder says what is wrong)."""
    value, pos = _nullable_string(frame, pos, flexible)
    if value is None:
        raise _Short
    return value, pos


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


def _tags(frame: bytes, pos: int) -> int:
    """Past a struct's tagged fields, which must be none (else _Short)."""
    if frame[pos] != 0:
        raise _Short
    return pos + 1


def _end(frame: bytes, pos: int, flexible: bool) -> None:
    """The body's tagged fields (none) when `flexible`, then the end of the frame (else
    _Short: bytes left over)."""
    if flexible:
        if frame[pos] != 0:
            raise _Short
        pos += 1
    if pos != len(frame):
        raise _Short


# ---------------------------------------------------------------------- writing primitives


def _write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_count(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _write_string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _NULL_STRING
        return
    raw = value.encode()
    if flexible:
        _write_uvarint(out, len(raw) + 1)
    else:
        out += _I16.pack(len(raw))
    out += raw


def _response(correlation_id: int, flexible: bool) -> bytearray:
    """A response's start: the frame size (set by `_framed`) and the response header (v1,
    no tagged fields, when `flexible`)."""
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    return out


def _framed(out: bytearray, flexible: bool) -> bytearray:
    """The response `out` ended: the body's tagged fields (none) and the frame size."""
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return out


def _write_partition_errors(out: bytearray, topics, flexible: bool) -> None:
    """`topics`, a list of (name, [(partition, error code)]), as an array of topics each
    with its array of partition results (AddPartitionsToTxn's and TxnOffsetCommit's)."""
    _write_count(out, len(topics), flexible)
    for name, parts in topics:
        _write_string(out, name, flexible)
        _write_count(out, len(parts), flexible)
        for partition, code in parts:
            out += _PARTITION_ERROR.pack(partition, code)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)


# ---------------------------------------------------------------------- Produce


def decode_produce(frame: bytes) -> tuple[int, int, str | None, ProduceBody] | None:
    """The Produce request in `frame` (api key 0, version 3-13) as (version, correlation id,
    client id, body), or None: leave it to the generic decoder."""
    try:
        version, correlation_id, client_id, flexible, pos = _header(
            frame, PRODUCE_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE
        )
        transactional_id, pos = _nullable_string(frame, pos, flexible)
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
                    pos = _tags(frame, pos)
                partition_data.append(PartitionData(index, records))
            if flexible:
                pos = _tags(frame, pos)
            topic_data.append(TopicData(name, topic_id, partition_data))
        _end(frame, pos, flexible)
    except _GIVE_UP:
        return None
    return (
        version,
        correlation_id,
        client_id,
        ProduceBody(transactional_id, acks, timeout_ms, topic_data),
    )


def encode_produce_response(correlation_id: int, version: int, results) -> bytearray:
    """The framed Produce response of `version` for `results`, a list of (topic name, topic
    id, [PartitionResult]) (``handlers.produce``): what the generic encoder writes for them,
    with empty record errors, throttle 0 and no tagged fields."""
    flexible = version >= FLEXIBLE
    out = _response(correlation_id, flexible)
    _write_count(out, len(results), flexible)
    for name, topic_id, parts in results:
        if version >= BY_ID:
            out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            _write_string(out, name, flexible)
        _write_count(out, len(parts), flexible)
        for r in parts:
            if version >= 5:
                out += _PART_V5.pack(r.index, r.error, r.base_offset, r.timestamp, r.log_start)
            else:
                out += _PART_V2.pack(r.index, r.error, r.base_offset, r.timestamp)
            if version >= 8:  # record_errors empty, then error_message (None: no call)
                message = r.message
                if flexible:
                    if message is None:
                        out += b"\x01\x00\x00"  # + the partition's tagged fields
                    else:
                        out.append(1)
                        _write_string(out, message, flexible)
                        out.append(0)  # the partition's tagged fields
                elif message is None:
                    out += _NO_ERRORS_V8_NULL
                else:
                    out += _NO_ERRORS_V8
                    _write_string(out, message, flexible)
        if flexible:
            out.append(0)  # the topic's tagged fields
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    return _framed(out, flexible)


# ---------------------------------------------------------------------- AddPartitionsToTxn


def decode_add_partitions(frame: bytes) -> tuple[int, int, str | None, AddPartitionsBody] | None:
    """An AddPartitionsToTxn request (api key 24, version 0-3, the clients' form) as
    (version, correlation id, client id, body), or None: leave it to the generic decoder."""
    try:
        version, correlation_id, client_id, flexible, pos = _header(
            frame, ADD_PARTITIONS_KEY, 0, ADD_PARTITIONS_MAX_VERSION, ADD_PARTITIONS_FLEXIBLE
        )
        transactional_id, pos = _string(frame, pos, flexible)
        producer_id, epoch = _PID_EPOCH.unpack_from(frame, pos)
        pos += _PID_EPOCH.size
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
        _end(frame, pos, flexible)
    except _GIVE_UP:
        return None
    body = AddPartitionsBody(transactional_id, producer_id, epoch, topics)
    return version, correlation_id, client_id, body


def encode_add_partitions_response(correlation_id: int, version: int, results) -> bytearray:
    """The framed AddPartitionsToTxn response (v0-3) for `results`, a list of (topic,
    [(partition, error code)]): what the generic encoder writes (throttle 0)."""
    flexible = version >= ADD_PARTITIONS_FLEXIBLE
    out = _response(correlation_id, flexible)
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    _write_partition_errors(out, results, flexible)
    return _framed(out, flexible)


# ---------------------------------------------------------------------- EndTxn


def decode_end_txn(frame: bytes) -> tuple[int, int, str | None, EndTxnBody] | None:
    """An EndTxn request (api key 26, version 0-5) as (version, correlation id, client id,
    body), or None: leave it to the generic decoder."""
    try:
        version, correlation_id, client_id, flexible, pos = _header(
            frame, END_TXN_KEY, 0, END_TXN_MAX_VERSION, END_TXN_FLEXIBLE
        )
        transactional_id, pos = _string(frame, pos, flexible)
        producer_id, epoch, committed = _PID_EPOCH_BOOL.unpack_from(frame, pos)
        _end(frame, pos + _PID_EPOCH_BOOL.size, flexible)
    except _GIVE_UP:
        return None
    body = EndTxnBody(transactional_id, producer_id, epoch, committed != 0)
    return version, correlation_id, client_id, body


def encode_end_txn_response(
    correlation_id: int, version: int, code: int, producer_id: int, epoch: int
) -> bytearray:
    """The framed EndTxn response (v0-5): what the generic encoder writes (throttle 0)."""
    flexible = version >= END_TXN_FLEXIBLE
    out = _response(correlation_id, flexible)
    out += _THROTTLE_ERROR.pack(0, code)
    if version >= 5:
        out += _PID_EPOCH.pack(producer_id, epoch)
    return _framed(out, flexible)


# ---------------------------------------------------------------------- AddOffsetsToTxn


def decode_add_offsets(frame: bytes) -> tuple[int, int, str | None, AddOffsetsToTxnBody] | None:
    """An AddOffsetsToTxn request (api key 25, version 0-4) as (version, correlation id,
    client id, body), or None: leave it to the generic decoder."""
    try:
        version, correlation_id, client_id, flexible, pos = _header(
            frame, ADD_OFFSETS_TO_TXN_KEY, 0, ADD_OFFSETS_MAX_VERSION, ADD_OFFSETS_FLEXIBLE
        )
        transactional_id, pos = _string(frame, pos, flexible)
        producer_id, producer_epoch = _PID_EPOCH.unpack_from(frame, pos)
        group_id, pos = _string(frame, pos + _PID_EPOCH.size, flexible)
        _end(frame, pos, flexible)
    except _GIVE_UP:
        return None
    body = AddOffsetsToTxnBody(transactional_id, producer_id, producer_epoch, group_id)
    return version, correlation_id, client_id, body


def encode_add_offsets_response(correlation_id: int, version: int, code: int) -> bytearray:
    """The framed AddOffsetsToTxn response (v0-4): what the generic encoder writes
    (throttle 0)."""
    flexible = version >= ADD_OFFSETS_FLEXIBLE
    out = _response(correlation_id, flexible)
    out += _THROTTLE_ERROR.pack(0, code)
    return _framed(out, flexible)


# ---------------------------------------------------------------------- TxnOffsetCommit


def decode_txn_offset_commit(
    frame: bytes,
) -> tuple[int, int, str | None, TxnOffsetCommitBody] | None:
    """A TxnOffsetCommit request (api key 28, version 0-4) as (version, correlation id,
    client id, body), or None: leave it to the generic decoder."""
    try:
        version, correlation_id, client_id, flexible, pos = _header(
            frame,
            TXN_OFFSET_COMMIT_KEY,
            0,
            TXN_OFFSET_COMMIT_MAX_VERSION,
            TXN_OFFSET_COMMIT_FLEXIBLE,
        )
        transactional_id, pos = _string(frame, pos, flexible)
        group_id, pos = _string(frame, pos, flexible)
        producer_id, producer_epoch = _PID_EPOCH.unpack_from(frame, pos)
        pos += _PID_EPOCH.size
        generation_id, member_id, instance_id = -1, "", None
        if version >= 3:
            (generation_id,) = _I32.unpack_from(frame, pos)
            member_id, pos = _string(frame, pos + 4, flexible)
            instance_id, pos = _nullable_string(frame, pos, flexible)
        topics = []
        count, pos = _count(frame, pos, flexible)
        for _ in range(count):
            name, pos = _string(frame, pos, flexible)
            partitions = []
            n, pos = _count(frame, pos, flexible)
            for _ in range(n):
                if version >= 2:
                    index, offset, epoch = _OFFSET_EPOCH.unpack_from(frame, pos)
                    pos += _OFFSET_EPOCH.size
                else:
                    (index, offset), epoch = _OFFSET.unpack_from(frame, pos), -1
                    pos += _OFFSET.size
                metadata, pos = _nullable_string(frame, pos, flexible)
                if flexible:
                    pos = _tags(frame, pos)
                partitions.append(TxnOffsetCommitPartition(index, offset, epoch, metadata))
            if flexible:
                pos = _tags(frame, pos)
            topics.append(TxnOffsetCommitTopic(name, partitions))
        _end(frame, pos, flexible)
    except _GIVE_UP:
        return None
    body = TxnOffsetCommitBody(
        transactional_id,
        group_id,
        producer_id,
        producer_epoch,
        generation_id,
        member_id,
        instance_id,
        topics,
    )
    return version, correlation_id, client_id, body


def encode_txn_offset_commit_response(
    correlation_id: int, version: int, topics: list[tuple[str, list[tuple[int, int]]]]
) -> bytearray:
    """The framed TxnOffsetCommit response (v0-4) for `topics`, a list of (name,
    [(partition, error code)]): what the generic encoder writes (throttle 0)."""
    flexible = version >= TXN_OFFSET_COMMIT_FLEXIBLE
    out = _response(correlation_id, flexible)
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    _write_partition_errors(out, topics, flexible)
    return _framed(out, flexible)


# the decoders by api key (``codec.decode_request`` tries them before the generic one)
DECODERS = {
    PRODUCE_KEY: decode_produce,
    ADD_PARTITIONS_KEY: decode_add_partitions,
    ADD_OFFSETS_TO_TXN_KEY: decode_add_offsets,
    END_TXN_KEY: decode_end_txn,
    TXN_OFFSET_COMMIT_KEY: decode_txn_offset_commit,
}
