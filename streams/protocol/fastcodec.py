"""The hot path's wire codec written out by hand: the Produce request (v3-13) and its response.

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
  current leader, no node endpoints, throttle 0: all Tidelog answers).

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
            n, pos = _uvarint(frame, pos)
            n -= 1
        else:
            (n,) = _I16.unpack_from(frame, pos)
            pos += 2
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
                if flexible:
                    n, pos = _uvarint(frame, pos)
                    n -= 1
                else:
                    (n,) = _I16.unpack_from(frame, pos)
                    pos += 2
                if n < 0 or len(frame) < pos + n:
                    return None
                name = frame[pos : pos + n].decode()
                pos += n
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
