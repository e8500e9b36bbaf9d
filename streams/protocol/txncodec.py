"""A transaction's offsets requests written out by hand: AddOffsetsToTxn (v0-4) and
TxnOffsetCommit (v0-4), their requests and responses, as ``fastcodec`` does for Produce,
AddPartitionsToTxn and EndTxn.

A consume-transform-produce transaction makes both once per transaction, and kafka-python's
generic codec (a ``DataContainer`` per struct, the schema walked per field) spent ~50-70 us
of CPU decoding each and as much or more encoding its answer of a few bytes, on the
listener's loop, against a few microseconds here:

- ``decode(frame)``: the request in `frame` (header included) as its version, correlation id,
  client id and a body with the attributes the listener reads (AddOffsetsToTxn's
  ``transactional_id``, ``producer_id``, ``producer_epoch``, ``group_id``; TxnOffsetCommit's
  all of its fields); None for anything it does not expect (tagged fields, a null string or
  array where none is allowed, bytes left over, a truncated frame): the generic decoder,
  which stays the reference, answers then;
- ``encode_add_offsets_response(version, correlation_id, error_code)``: the framed
  response, byte for byte what the generic encoder writes for the same fields (throttle 0).

- ``encode_txn_offset_commit_response(version, correlation_id, topics)``: TxnOffsetCommit's
  framed response (topics: (name, [(partition, error code)])), the generic encoder's bytes.

tests/protocol/test_txncodec.py holds them to the generic codec over every version.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

ADD_OFFSETS_TO_TXN_KEY = 25
TXN_OFFSET_COMMIT_KEY = 28
MAX_VERSIONS = {ADD_OFFSETS_TO_TXN_KEY: 4, TXN_OFFSET_COMMIT_KEY: 4}
FLEXIBLE = 3  # both: compact strings and tagged fields from v3 (KIP-482)

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PID_EPOCH = struct.Struct(">qh")
_THROTTLE_ERROR = struct.Struct(">ih")


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


_OFFSET = struct.Struct(">iq")  # partition index, committed offset
_OFFSET_EPOCH = struct.Struct(">iqi")  # + committed leader epoch (v2+)


class _Short(Exception):
    """The frame ends early or holds what this decoder leaves to the generic one."""


def _uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        b = frame[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise _Short


def _nullable_string(frame: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
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
    value, pos = _nullable_string(frame, pos, flexible)
    if value is None:  # not a nullable field: the generic decoder says what is wrong
        raise _Short
    return value, pos


def _count(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = _uvarint(frame, pos)
        n -= 1
    else:
        (n,) = _I32.unpack_from(frame, pos)
        pos += 4
    if n < 0:  # a null array: left to the generic decoder
        raise _Short
    return n, pos


def _no_tags(frame: bytes, pos: int) -> int:
    if frame[pos] != 0:
        raise _Short
    return pos + 1


def decode(frame: bytes) -> tuple[int, int, str | None, tuple] | None:
    """The AddOffsetsToTxn or TxnOffsetCommit request in `frame` as (version, correlation id,
    client id, body), or None: leave it to the generic decoder."""
    try:
        api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        if not 0 <= version <= MAX_VERSIONS.get(api_key, -1):
            return None
        pos = _HEADER.size
        client_id = None
        if n >= 0:
            client_id = frame[pos : pos + n].decode()
            pos += n
        flexible = version >= FLEXIBLE
        if flexible:  # request header v2: its tagged fields
            if frame[pos] != 0:
                return None
            pos += 1
        transactional_id, pos = _string(frame, pos, flexible)
        body: tuple
        if api_key == TXN_OFFSET_COMMIT_KEY:  # its group id comes before the producer's
            body, pos = _txn_offset_commit(frame, pos, version, transactional_id)
        else:
            producer_id, producer_epoch = _PID_EPOCH.unpack_from(frame, pos)
            pos += _PID_EPOCH.size
            group_id, pos = _string(frame, pos, flexible)
            body = AddOffsetsToTxnBody(transactional_id, producer_id, producer_epoch, group_id)
        if flexible:
            if frame[pos] != 0:
                return None
            pos += 1
        if pos != len(frame):
            return None
        return version, correlation_id, client_id, body
    except (_Short, IndexError, struct.error, UnicodeDecodeError):
        return None


def _txn_offset_commit(
    frame: bytes, pos: int, version: int, transactional_id: str
) -> tuple[TxnOffsetCommitBody, int]:
    """The rest of a TxnOffsetCommit request after its transactional id (tagged fields of
    the body excepted)."""
    flexible = version >= FLEXIBLE
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
                pos = _no_tags(frame, pos)
            partitions.append(TxnOffsetCommitPartition(index, offset, epoch, metadata))
        if flexible:
            pos = _no_tags(frame, pos)
        topics.append(TxnOffsetCommitTopic(name, partitions))
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
    return body, pos


def encode_add_offsets_response(version: int, correlation_id: int, error_code: int) -> bytes:
    """The framed AddOffsetsToTxn response (throttle 0)."""
    body = _THROTTLE_ERROR.pack(0, error_code)
    if version >= FLEXIBLE:  # the body's tagged fields, and the response header v1's before it
        body = b"\x00" + body + b"\x00"
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def _write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


_PART_ERROR = struct.Struct(">ih")


def encode_txn_offset_commit_response(
    version: int, correlation_id: int, topics: list[tuple[str, list[tuple[int, int]]]]
) -> bytes:
    """The framed TxnOffsetCommit response (throttle 0): per topic its name and per partition
    its index and error code."""
    flexible = version >= FLEXIBLE
    out = bytearray(8)  # the frame size and the correlation id, packed last
    if flexible:
        out.append(0)  # response header v1: its tagged fields
    out += _I32.pack(0)  # throttle_time_ms
    if flexible:
        _write_uvarint(out, len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    for name, partitions in topics:
        raw = name.encode()
        if flexible:
            _write_uvarint(out, len(raw) + 1)
        else:
            out += _I16.pack(len(raw))
        out += raw
        if flexible:
            _write_uvarint(out, len(partitions) + 1)
        else:
            out += _I32.pack(len(partitions))
        for partition, code in partitions:
            out += _PART_ERROR.pack(partition, code)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    struct.pack_into(">ii", out, 0, len(out) - 4, correlation_id)
    return bytes(out)
