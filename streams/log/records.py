"""Kafka record batch v2 (magic 2): the format on disk and on the wire.

Batch header, 61 bytes, big-endian::

    0  baseOffset            int64    not covered by the CRC
    8  batchLength           int32    bytes after this field; a batch is 12 + batchLength bytes
    12 partitionLeaderEpoch  int32
    16 magic                 int8     = 2
    17 crc                   uint32   CRC-32C of bytes [21:] (attributes .. end)
    21 attributes            int16    bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                                      5 control, 6 delete horizon set
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records               (compressed as one blob when the codec is not 0)

Each record: varint length, int8 attributes, varlong timestampDelta, varint offsetDelta,
varint keyLength (-1 = null) + key, varint valueLength (-1 = null, a tombstone) + value,
varint headerCount, and per header varint keyLength + UTF-8 key, varint valueLength + value.
All varints are zig-zag encoded, as in protobuf.

Because the CRC does not cover baseOffset, the store assigns offsets to a client's batch by
patching the first 8 bytes; the rest is stored byte for byte.

Reads decode with Tidelog's own compiled decoder (``streams/log/_cdecode.pyx``, Cython, built
by ``make``) when it is built, else with aiokafka's compiled record-batch reader
(``aiokafka.record._crecords``), else with this module's pure-Python decoder; all three return
identical records (tests/log/test_records_native.py, test_records_compiled.py). The pure
decoder is the reference: the compiled ones defer to it on anything unexpected (a corrupt
record, a field wider than it should be, a batch aiokafka would misread), and its records or
CorruptRecord are then the answer. None of them checks the CRC: reads trust a validated log.
New batches' records are encoded by aiokafka's compiled builder (the same bytes as the pure
encoder, kept as its fallback). ``decoder()`` and ``encoder()`` say which code is in use.
The produce check of a client batch's record count (``check_record_count``) walks the records
with the same module's ``count_records`` when built, deferring to the pure ``count_records``
(the reference) on a damaged body.
"""

from __future__ import annotations

import operator
import struct
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import crc32c as _crc32c

from streams.errors import CorruptRecord, InvalidRecord
from streams.log import compression

try:  # aiokafka's compiled DefaultRecordBatch and DefaultRecordBatchBuilder (Cython)
    from aiokafka.record._crecords import DefaultRecordBatch as _compiled_batch
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as _compiled_builder
except ImportError:  # aiokafka missing, or installed without its C extensions
    _compiled_batch = _compiled_builder = None
# (imported with the module, not on first use: importing aiokafka loads its asyncio client too,
# ~0.15 s, which a process's first append or read should not wait for)
try:  # Tidelog's own compiled decoder, built in place by `make` (streams/log/_cdecode.pyx)
    from streams.log._cdecode import count_records as _native_count
    from streams.log._cdecode import decode_body as _native_body
    from streams.log._cdecode import encode_body as _native_encode
except ImportError:  # not built (no C compiler, or run outside make): aiokafka's, else pure
    _native_body = _native_count = _native_encode = None

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC = 2
_TIMESTAMP = operator.itemgetter(3)  # a record's timestamp, by position
CRC_START = 21
_PREFIX = struct.Struct(">qi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
MAX_TIMESTAMP = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
NO_SEQUENCE = -1

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record as read back from the log."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    def with_parts(self, key: bytes | None, value: bytes | None, headers: tuple) -> Record:
        """This record with other key, value and headers (a masked copy)."""
        return Record(self.offset, self.timestamp_ms, key, value, headers)


class ProducerRecord(NamedTuple):
    """A record to append; the store assigns offset (and timestamp when none is given)."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = ()
    timestamp_ms: int | None = None


# --------------------------------------------------------------------------- varints

_SMALL = 1 << 14


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zz(n: int) -> int:
    return (n << 1) ^ (n >> 63)


# Encodings of every signed value in [-_SMALL, _SMALL): a list lookup instead of a loop per field.
_VARINT_TABLE = [_uvarint(_zz(n)) for n in range(-_SMALL, _SMALL)]


def varint(n: int) -> bytes:
    """Zig-zag varint encoding of a signed integer."""
    if -_SMALL <= n < _SMALL:
        return _VARINT_TABLE[n + _SMALL]
    return _uvarint(_zz(n))


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at `pos`; return (value, next position)."""
    shift = 0
    result = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecord("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecord("varint longer than 10 bytes")


# --------------------------------------------------------------------------- encoding

_NULL = varint(-1)
_ZERO = varint(0)


def _encode_headers(headers: Iterable[Header]) -> bytes:
    parts = []
    n = 0
    for hkey, hval in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        parts.append(varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(_NULL)
        else:
            parts.append(varint(len(hval)))
            parts.append(hval)
        n += 1
    return varint(n) + b"".join(parts)


def encode_records(
    records: Sequence[ProducerRecord],
    base_ts: int,
    default_ts: int,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """The records section of a batch (uncompressed). Timestamps default to `default_ts`;
    offset deltas are 0, 1, 2... unless given (the cleaner keeps original offsets).

    Encoded by aiokafka's compiled batch builder when it is there and can take the records
    (the same bytes: tests/log/test_records_compiled.py), else here."""
    if records and offset_deltas is None and _native_encode is not None:
        body = _native_encode(
            records if type(records) is list else list(records), base_ts, default_ts
        )
        if body is not None:
            return body
    if records and _compiled_builder is not None:
        body = _encode_compiled(records, base_ts, default_ts, offset_deltas)
        if body is not None:
            return body
    return _encode_pure(records, base_ts, default_ts, offset_deltas)


def _encode_pure(
    records: Sequence[ProducerRecord],
    base_ts: int,
    default_ts: int,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    table = _VARINT_TABLE
    small = _SMALL
    default_head = b"\x00" + varint(default_ts - base_ts)  # attributes + timestamp delta
    out = bytearray()
    n = -1
    for value, key, headers, ts in records:
        n += 1
        i = n if offset_deltas is None else offset_deltas[n]
        if ts is None:
            head = default_head
        else:
            tsd = ts - base_ts
            head = b"\x00" + (table[tsd + small] if -small <= tsd < small else varint(tsd))
        od = table[i + small] if i < small else varint(i)
        kp = _NULL if key is None else varint(len(key)) + key
        if value is None:
            vl, value = _NULL, b""
        else:
            vn = len(value)
            vl = table[vn + small] if vn < small else varint(vn)
        hp = _encode_headers(headers) if headers else _ZERO
        size = len(head) + len(od) + len(kp) + len(vl) + len(value) + len(hp)
        out += table[size + small] if size < small else varint(size)
        out += head
        out += od
        out += kp
        out += vl
        out += value
        out += hp
    return bytes(out)


def _encode_compiled(
    records: Sequence[ProducerRecord],
    base_ts: int,
    default_ts: int,
    offset_deltas: Sequence[int] | None,
) -> bytes | None:
    """``encode_records`` through aiokafka's compiled DefaultRecordBatchBuilder: the records
    section of the batch it builds. None when the builder is missing, when the base timestamp is
    not the first record's (the builder takes its deltas from the first record; the cleaner
    stores a delete horizon there) or when it refuses a record (e.g. a header key given as
    bytes): the pure encoder then writes the section."""
    builder = _compiled()[1]
    if builder is None:
        return None
    first = records[0][3]
    if (default_ts if first is None else first) != base_ts or base_ts < 0:
        return None  # (it takes a first timestamp of -1 for "no record yet")
    b = builder(MAGIC, 0, 0, NO_PRODUCER_ID, -1, NO_SEQUENCE, _BUILDER_LIMIT)
    add = b.append
    i = 0
    try:
        for value, key, headers, ts in records:
            if (
                add(
                    i if offset_deltas is None else offset_deltas[i],
                    default_ts if ts is None else ts,
                    key,
                    value,
                    list(headers) if headers else [],
                )
                is None
            ):
                return None  # over the builder's size limit
            i += 1
        return bytes(memoryview(b.build())[HEADER_SIZE:])
    except Exception:  # noqa: BLE001 - anything it cannot take: the pure encoder's answer
        return None


def build_batch(
    records: Sequence[ProducerRecord],
    *,
    base_offset: int = 0,
    now_ms: int,
    codec: int = compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes_extra: int = 0,
    base_ts: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Encode `records` as one v2 batch. Records without a timestamp get `now_ms`.

    `base_ts` overrides the batch's base timestamp (the cleaner stores a delete horizon there);
    `offset_deltas` keeps original offsets with gaps (compaction)."""
    if not records:
        raise InvalidRecord("a record batch needs at least one record")
    min_ts = None
    if log_append_time:
        stamps = [now_ms]
        records = [(r[0], r[1], r[2], now_ms) for r in records]
    else:  # (records by position: ProducerRecords or plain tuples of their fields)
        stamps = list(map(_TIMESTAMP, records))  # C-level passes; the Nones only if any
        try:
            min_ts, max_ts = min(stamps), max(stamps)  # TypeError: a None among others
        except TypeError:
            pass
        if min_ts is None:
            if stamps.count(None) == len(stamps):  # none has one (a changelog's records)
                stamps = [now_ms] * len(stamps)
            else:
                stamps = [now_ms if ts is None else ts for ts in stamps]
    if min_ts is None:
        min_ts, max_ts = min(stamps), max(stamps)
    first_ts = stamps[0]
    if min_ts < 0 or max_ts > MAX_TIMESTAMP:
        raise InvalidRecord(
            f"record timestamps must be between 0 and {MAX_TIMESTAMP} ms since the epoch"
        )
    if base_ts is None:
        base_ts = first_ts
    body = encode_records(records, base_ts, now_ms, offset_deltas)
    if codec != compression.NONE:
        body = compression.compress(codec, body)
    attributes = codec | (ATTR_LOG_APPEND_TIME if log_append_time else 0) | attributes_extra
    count = len(records)
    last_delta = count - 1 if offset_deltas is None else offset_deltas[-1]
    return _assemble(
        base_offset,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
        body,
    )


def _assemble(base_offset, attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count, body):
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(
        HEADER.pack(
            base_offset,
            length,
            -1,
            MAGIC,
            0,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            pid,
            epoch,
            seq,
            count,
        )
    )
    crc = _crc32c.crc32c(body, _crc32c.crc32c(memoryview(header)[CRC_START:]))
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """The same batch with its baseOffset replaced (the CRC stays valid: it does not cover it)."""
    return _INT64.pack(base_offset) + batch[8:]


# --------------------------------------------------------------------------- decoding


class BatchHeader(NamedTuple):
    base_offset: int
    length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def peek_size(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, total batch size) from the first 12 bytes at `pos`."""
    base, length = _PREFIX.unpack_from(buf, pos)
    return base, LOG_OVERHEAD + length


def validate_batch(buf: bytes | memoryview, pos: int = 0, size: int | None = None) -> BatchHeader:
    """Check framing, magic, count and CRC-32C of the batch at `pos`; return its header.

    Raises CorruptRecord with the reason when any check fails.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecord(f"batch header truncated: {len(buf) - pos} of {HEADER_SIZE} bytes")
    h = parse_header(buf, pos)
    if h.length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecord(f"batch length {h.length} is smaller than the header")
    if size is not None and h.size != size:
        raise CorruptRecord(f"batch declares {h.size} bytes but {size} were given")
    if len(buf) - pos < h.size:
        raise CorruptRecord(f"batch truncated: {len(buf) - pos} of {h.size} bytes")
    if h.magic != MAGIC:
        raise CorruptRecord(f"unsupported record batch magic {h.magic} (only v2 is supported)")
    if (
        h.count < 0
        or h.last_offset_delta < 0
        or (h.count > 0 and h.last_offset_delta < h.count - 1)
    ):
        raise CorruptRecord(
            f"record count {h.count} does not match lastOffsetDelta {h.last_offset_delta}"
        )
    actual = _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + h.size])
    if actual != h.crc:
        raise CorruptRecord(f"CRC-32C mismatch: stored {h.crc:#010x}, computed {actual:#010x}")
    return h


def check_record_count(batch: bytes | memoryview, h: BatchHeader) -> None:
    """Check that the body of a validated batch holds exactly ``h.count`` records (decompressing
    when needed): the CRC only proves the bytes arrived as sent, not that the producer counted
    right. Kafka's broker checks the same on produce; reads trust the stored count."""
    body = memoryview(batch)[HEADER_SIZE : h.size]
    if h.codec:
        body = compression.decompress(h.codec, body)
    found = _native_count(body) if _native_count is not None else -1
    if found < 0:  # not built, or the body is damaged: the pure walk counts or says why
        found = count_records(bytes(body))
    if found != h.count:
        raise CorruptRecord(f"batch declares {h.count} records but its body holds {found}")


def count_records(body: bytes) -> int:
    """How many length-prefixed records `body` holds, by skipping over their lengths.

    Raises CorruptRecord when a length is not positive or the last record overruns the body.
    Runs of records of one size (most producers' records differ in size only where the offset
    delta's varint grows) are skipped at C speed by `_same_size_run`; records of varied sizes
    are walked one by one.
    """
    count = pos = 0
    end = len(body)
    while pos < end:
        length, after = read_varint(body, pos)
        if length <= 0:
            raise CorruptRecord(f"record {count} has length {length}")
        stride = after - pos + length
        run = _same_size_run(body, pos, after - pos, stride)
        if run == 0:
            break  # this record overruns the body
        pos += run * stride
        count += run
        if run < 8:  # sizes vary here: walk a while before looking for a run again
            pos, count = _walk_records(body, pos, count, 128)
    if pos != end:
        raise CorruptRecord(f"record {count} overruns the batch ({pos} of {end} bytes)")
    return count


def _same_size_run(
    body: bytes, pos: int, varint_size: int, stride: int, end: int | None = None
) -> int:
    """How many records from `pos` on (at most 256, all before `end`, default the end of
    `body`) have the size of the one at `pos`.

    The walk visits pos, pos + stride, pos + 2·stride, … exactly as long as the length varint
    at each of those offsets has the first one's bytes: each byte column of the varint, taken
    with a strided slice, is compared with ``lstrip`` (C speed, no loop per record)."""
    k = min(256, ((len(body) if end is None else end) - pos) // stride)
    run = k
    for i in range(varint_size):
        column = body[pos + i : pos + i + k * stride : stride]
        run = min(run, len(column) - len(column.lstrip(column[:1])))
    return run


def _walk_records(body: bytes, pos: int, count: int, limit: int) -> tuple[int, int]:
    """Skip up to `limit` records one by one; returns (position, count) after them."""
    end = len(body)
    for _ in range(limit):
        if pos >= end:
            break
        b = body[pos]
        if b < 0x80:  # one- and two-byte length varints inline: the usual sizes, no call
            z, pos = b, pos + 1
        elif pos + 1 < end and body[pos + 1] < 0x80:
            z, pos = (b & 0x7F) | (body[pos + 1] << 7), pos + 2
        else:
            z, pos = None, pos
        if z is None:
            length, pos = read_varint(body, pos)
        else:
            length = (z >> 1) ^ -(z & 1)
        if length <= 0:
            raise CorruptRecord(f"record {count} has length {length}")
        pos += length
        count += 1
    return pos, count


def decode_records(batch: bytes | memoryview, h: BatchHeader | None = None) -> list[Record]:
    """All records of one batch, decompressing when needed. Assumes a validated batch."""
    if h is None:
        h = parse_header(batch)
    body = (
        compression.decompress(h.codec, memoryview(batch)[HEADER_SIZE : h.size])
        if h.codec
        else None
    )
    return _decode_whole(batch, h, body)


# --------------------------------------------------------------- the compiled reader (aiokafka)

_PAD = bytes(16)  # zeros after the batch handed to the compiled reader (see _compiled_input)
_BUILDER_LIMIT = 1 << 40  # the builder's batch size limit: none (max.message.bytes is ours)


def _compiled():
    """(reader, builder): aiokafka's compiled DefaultRecordBatch and DefaultRecordBatchBuilder,
    each None when it could not be imported or was switched off (tests do)."""
    return _compiled_batch, _compiled_builder


def decoder() -> str:
    """Which code decodes batches: ``"tidelog-c"``, ``"aiokafka-c"`` or ``"python"``."""
    if _native_body is not None:
        return "tidelog-c"
    return "python" if _compiled()[0] is None else "aiokafka-c"


def encoder() -> str:
    """Which code encodes the records of new batches: ``"aiokafka-c"`` or ``"python"``."""
    return "python" if _compiled()[1] is None else "aiokafka-c"


def _decode_whole(batch: bytes | memoryview, h: BatchHeader, body: bytes | None) -> list[Record]:
    """Every record of a validated batch; `body` is its decompressed records section (None
    when the batch is not compressed). The native decoder when it is built, else aiokafka's
    compiled reader, else (or when either defers on this batch) the pure-Python decoder."""
    if _native_body is not None:
        got = _decode_native(
            memoryview(batch)[HEADER_SIZE : h.size] if body is None else body,
            h,
            _INT64_MIN,
            _NO_LIMIT,
        )
        if got is not None:
            return got[0]
    if _compiled_batch is not None:
        out = _decode_compiled(batch, h, body)
        if out is not None:
            return out
    return _decode_pure(batch, h, body)


def _walk_records_checked(
    buf, pos: int, end: int, count: int, lengths: list[int] | None
) -> tuple[int, int] | None:
    """Walk up to `count` records of ``buf[pos:end]`` by their lengths; returns (position after
    the last one walked, records walked).

    With `lengths` (a list), also check each record's attributes byte and append each record's
    length (without its length varint: what read budgets count). Kafka's record attributes are
    one byte (unused in v2, written as 0); aiokafka's reader decodes them as a varint, so a byte
    with the high bit set would shift the rest of that record: None then, and None too for a
    length that is not positive or a walk that runs off the buffer (the pure decoder answers).
    Runs of same-size records are stepped over with strided slices (C speed, as
    ``count_records``); records of varied sizes one by one."""
    n = 0
    check = lengths is not None
    try:
        while pos < end and n < count:
            b = buf[pos]
            if b < 0x80:
                length, after = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, after = read_varint(buf, pos)
            if length <= 0:
                return None
            stride = after - pos + length
            run = min(_same_size_run(buf, pos, after - pos, stride, end), count - n)
            if run >= 8:
                if check:
                    if not buf[after : after + (run - 1) * stride + 1 : stride].isascii():
                        return None
                    lengths += [length] * run
                pos += run * stride
                n += run
                continue
            for _ in range(min(128, count - n)):  # sizes vary here: a while one by one
                if pos >= end:
                    break
                b = buf[pos]
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif buf[pos + 1] < 0x80:
                    v = (b & 0x7F) | (buf[pos + 1] << 7)
                    length = (v >> 1) ^ -(v & 1)
                    pos += 2
                else:
                    length, pos = read_varint(buf, pos)
                if length <= 0:
                    return None
                if check:
                    if buf[pos] >= 0x80:
                        return None
                    lengths.append(length)
                pos += length
                n += 1
    except (IndexError, CorruptRecord):
        return None
    return pos, n


def _decode_pure(batch: bytes | memoryview, h: BatchHeader, body: bytes | None) -> list[Record]:
    buf = bytes(memoryview(batch)[HEADER_SIZE : h.size]) if body is None else body
    fixed_ts = h.max_timestamp if h.attributes & ATTR_LOG_APPEND_TIME else None
    return _decode_all(buf, h.base_offset, fixed_ts, h.base_timestamp, h.count)


def _compiled_input(batch: bytes | memoryview, h: BatchHeader, body: bytes | None, join):
    """What the compiled reader reads: the batch (`body` None) or, for a compressed one, its
    header with the codec bits cleared followed by `body`, the records section this module
    decompressed (so every codec and framing decodes as on the pure path); then 16 zero bytes.
    The reader checks bounds before it copies keys, values and header values, but reads a
    varint without looking at the end of its buffer, and so may look a few bytes past a
    corrupt record: the zeros, still inside this copy, stop it there. `join`: ``b"".join`` or
    ``bytearray().join``."""
    if body is None:
        return join((memoryview(batch)[: h.size], _PAD))
    head = memoryview(batch)[:HEADER_SIZE]
    plain = _INT16.pack(h.attributes & ~ATTR_CODEC_MASK)
    return join((head[:CRC_START], plain, head[CRC_START + 2 :], body, _PAD))


def _decode_compiled(
    batch: bytes | memoryview, h: BatchHeader, body: bytes | None
) -> list[Record] | None:
    """Every record of the batch through aiokafka's compiled reader; None when that reader
    is missing or raises, or the batch has records it would misread (see ``_walk_records_checked``):
    the caller then decodes with the pure decoder, so a corrupt batch gets the same records
    or the same CorruptRecord either way. The reader stamps timestamps as the pure decoder
    does (the batch's max timestamp for LogAppendTime) but returns -1 as None, undone here."""
    reader = _compiled()[0]
    if reader is None:
        return None
    buf = _compiled_input(batch, h, body, b"".join)
    end = len(buf) - len(_PAD)
    if _walk_records_checked(buf, HEADER_SIZE, end, h.count, []) is None:
        return None
    out: list[Record] = []
    append = out.append
    new = _new_record
    try:
        for r in reader(memoryview(buf)[:end]):
            ts = r.timestamp
            hs = r.headers
            append(
                new(
                    Record,
                    (r.offset, -1 if ts is None else ts, r.key, r.value, tuple(hs) if hs else ()),
                )
            )
    except Exception:  # noqa: BLE001 - any failure: the pure decoder has the last word
        return None
    return out


def _decode_range_compiled(
    batch: bytes | memoryview,
    h: BatchHeader,
    body: bytes | None,
    skip_below: int,
    limit: int,
    max_bytes: int,
    force_first: bool,
) -> tuple[list[Record], int, bool] | None:
    """``_decode_body`` (the same records, bytes used and end-of-batch flag) through the
    compiled reader, decoding only the records it returns: the records before `skip_below`
    are skipped by their lengths as the pure decoder skips them, and the reader is handed
    the batch from the first record wanted on, under a copy of the header that counts only
    the records from there. None when the compiled reader is missing or fails, or the batch
    needs the pure decoder (see ``_decode_compiled``)."""
    reader = _compiled()[0]
    if reader is None:
        return None
    count = h.count
    base = h.base_offset
    if count == h.last_offset_delta + 1:
        # as _decode_body: without gaps, record i has offset base + i and the first are skipped
        k = min(skip_below - base, count) if skip_below > base else 0
        n_walk = min(count, k + max(limit, 1))
    else:  # gaps (compaction): which records fall below skip_below shows only when decoding
        k = 0
        n_walk = count
    buf = _compiled_input(batch, h, body, bytearray().join)
    end = len(buf) - len(_PAD)
    start = HEADER_SIZE
    if k:
        skipped = _walk_records_checked(buf, start, end, k, None)
        if skipped is None or skipped[1] < k:
            return None
        start = skipped[0]
    lengths: list[int] = []
    walk = _walk_records_checked(buf, start, end, n_walk - k, lengths)
    if walk is None or walk[1] < n_walk - k:
        return None
    walk_end = walk[0]
    head = bytes(buf[: HEADER_SIZE - 4]) + _INT32.pack(count - k)
    buf[start - HEADER_SIZE : start] = head  # over records already skipped (or the header)
    out: list[Record] = []
    append = out.append
    new = _new_record
    used = 0
    i = 0
    try:
        # zip stops at the last record walked: past it, skipped offsets went on (see below)
        records = reader(memoryview(buf)[start - HEADER_SIZE : end])
        for r, length in zip(records, lengths, strict=False):
            i += 1
            offset = r.offset
            if offset < skip_below:
                continue
            if max_bytes >= 0 and used + length > max_bytes and (out or not force_first):
                return out, used, False
            used += length
            ts = r.timestamp
            hs = r.headers
            append(
                new(
                    Record,
                    (offset, -1 if ts is None else ts, r.key, r.value, tuple(hs) if hs else ()),
                )
            )
            if len(out) >= limit:
                return out, used, i == len(lengths) and walk_end >= end
    except Exception:  # noqa: BLE001 - any failure: the pure decoder has the last word
        return None
    if n_walk < count:
        return None  # records below skip_below inside a gapless batch: not walked, so pure
    return out, used, True


_new_record = tuple.__new__
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_NO_LIMIT = sys.maxsize


def _decode_native(
    body, h: BatchHeader, skip_below: int, limit: int, max_bytes: int = -1, force_first=True
) -> tuple[list[Record], int, bool] | None:
    """``_decode_body`` through the native decoder (``streams/log/_cdecode.pyx``); None when it
    is not built or defers to the pure decoder on this batch."""
    if _native_body is None or not _INT64_MIN <= skip_below <= _INT64_MAX:
        return None
    return _native_body(
        body,
        h.base_offset,
        h.base_timestamp,
        bool(h.attributes & ATTR_LOG_APPEND_TIME),
        h.max_timestamp,
        h.count,
        h.count == h.last_offset_delta + 1,
        skip_below,
        max(min(limit, _NO_LIMIT), -_NO_LIMIT),
        max(min(max_bytes, _NO_LIMIT), -1),
        force_first,
        Record,
    )


def _decode_body(
    body, h: BatchHeader, skip_below: int, limit: int, max_bytes: int = -1, force_first=True
):
    """Decode records with offset >= skip_below, at most `limit` of them and, when max_bytes
    >= 0, stopping before the record that would pass max_bytes of encoded record bytes (with
    `force_first`, the first record is returned regardless). Returns (records, encoded bytes of
    those returned, whether the end of the batch was reached).

    Varints of one and two bytes (lengths below 8 KiB) are decoded inline: this loop is the
    hot path of every read.
    """
    base = h.base_offset
    base_ts = h.base_timestamp
    log_append = h.attributes & ATTR_LOG_APPEND_TIME
    max_ts = h.max_timestamp
    buf = bytes(body)
    pos = 0
    end = len(buf)
    used = 0
    out: list[Record] = []
    rv = read_varint
    count = h.count
    try:
        if skip_below > base and count == h.last_offset_delta + 1:
            # no gaps: record i has offset base + i, so skip the first ones by their lengths
            for _ in range(min(skip_below - base, count)):
                b = buf[pos]
                if b < 0x80:
                    pos += 1 + ((b >> 1) ^ -(b & 1))
                elif buf[pos + 1] < 0x80:
                    v = (b & 0x7F) | (buf[pos + 1] << 7)
                    pos += 2 + ((v >> 1) ^ -(v & 1))
                else:
                    length, pos = rv(buf, pos)
                    pos += length
                count -= 1
            if pos > end:
                raise CorruptRecord("record lengths overrun their batch")
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = rv(buf, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise CorruptRecord(f"record length {length} overruns its batch")
            b = buf[pos + 1]  # skip the record attributes byte
            if b < 0x80:
                tsd = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                tsd, pos = rv(buf, pos + 1)
            b = buf[pos]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                od = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                od, pos = rv(buf, pos)
            offset = base + od
            if offset < skip_below:
                pos = rec_end
                continue
            if max_bytes >= 0 and used + length > max_bytes and (out or not force_first):
                return out, used, False
            used += length
            b = buf[pos]
            if b == 1:  # -1: null key, the common case
                key = None
                pos += 1
            else:
                klen, pos = rv(buf, pos)
                if klen < 0:
                    key = None
                else:
                    key = buf[pos : pos + klen]
                    pos += klen
            b = buf[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                vlen = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                vlen, pos = rv(buf, pos)
            if vlen < 0:
                value = None
            else:
                value = buf[pos : pos + vlen]
                pos += vlen
            if buf[pos] == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(buf, pos)
            if pos != rec_end:
                raise CorruptRecord(f"record at offset {offset} has {rec_end - pos} stray bytes")
            out.append(
                _new_record(
                    Record, (offset, max_ts if log_append else base_ts + tsd, key, value, headers)
                )
            )
            if len(out) >= limit:
                return out, used, pos >= end
    except IndexError:
        raise CorruptRecord("record truncated inside its batch") from None
    return out, used, True


def _decode_all(buf: bytes, base: int, fixed_ts: int | None, base_ts: int, count: int):
    """Every record of a batch body: ``_decode_body`` without skipping and budgets (the same
    field layout, kept separate because this loop is most of a sequential read's time)."""
    out: list[Record] = []
    append = out.append
    rv = read_varint
    new = _new_record
    pos = 0
    end = len(buf)
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = rv(buf, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise CorruptRecord(f"record length {length} overruns its batch")
            b = buf[pos + 1]
            if b < 0x80:
                tsd = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                tsd, pos = rv(buf, pos + 1)
            b = buf[pos]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                od = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                od, pos = rv(buf, pos)
            b = buf[pos]
            if b == 1:
                key = None
                pos += 1
            else:
                klen, pos = rv(buf, pos)
                if klen < 0:
                    key = None
                else:
                    key = buf[pos : pos + klen]
                    pos += klen
            b = buf[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                vlen = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                vlen, pos = rv(buf, pos)
            if vlen < 0:
                value = None
            else:
                value = buf[pos : pos + vlen]
                pos += vlen
            if buf[pos] == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(buf, pos)
            if pos != rec_end:
                raise CorruptRecord(f"record at offset {base + od} has {rec_end - pos} stray bytes")
            append(
                new(
                    Record,
                    (
                        base + od,
                        base_ts + tsd if fixed_ts is None else fixed_ts,
                        key,
                        value,
                        headers,
                    ),
                )
            )
    except IndexError:
        raise CorruptRecord("record truncated inside its batch") from None
    return out


def first_at_or_after(
    batch: bytes | memoryview, h: BatchHeader, start_offset: int, timestamp: int
) -> int | None:
    """Offset of the first record of the batch at or after `start_offset` whose timestamp is
    >= `timestamp`; reads only each record's length, timestamp and offset deltas."""
    if h.attributes & ATTR_LOG_APPEND_TIME:  # every record carries the batch's time
        if h.max_timestamp < timestamp or h.next_offset <= start_offset:
            return None
        return max(start_offset, h.base_offset)
    body = memoryview(batch)[HEADER_SIZE : h.size]
    if h.codec:
        body = memoryview(compression.decompress(h.codec, body))
    buf = bytes(body)
    pos = 0
    base, base_ts = h.base_offset, h.base_timestamp
    try:
        for _ in range(h.count):
            length, pos = read_varint(buf, pos)
            rec_end = pos + length
            tsd, p = read_varint(buf, pos + 1)
            od, _ = read_varint(buf, p)
            if base + od >= start_offset and base_ts + tsd >= timestamp:
                return base + od
            pos = rec_end
    except IndexError:
        raise CorruptRecord("record truncated inside its batch") from None
    return None


def _decode_headers(buf: bytes, pos: int) -> tuple[tuple[Header, ...], int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        raise CorruptRecord(f"negative header count {n}")
    headers = []
    for _ in range(n):
        klen, pos = read_varint(buf, pos)
        if klen < 0:
            raise CorruptRecord("header key is null")
        hkey = buf[pos : pos + klen].decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = read_varint(buf, pos)
        if vlen < 0:
            hval = None
        else:
            hval = buf[pos : pos + vlen]
            pos += vlen
        headers.append((hkey, hval))
    return tuple(headers), pos


def decode_from(
    batch: bytes | memoryview,
    h: BatchHeader,
    start_offset: int,
    limit: int,
    max_bytes: int = -1,
    force_first: bool = True,
) -> tuple[list[Record], int, bool]:
    """Records of one batch with offset >= start_offset, at most `limit` of them and at most
    `max_bytes` (see ``_decode_body``); returns (records, bytes used, end of batch reached)."""
    body = memoryview(batch)[HEADER_SIZE : h.size]
    if h.codec:
        body = compression.decompress(h.codec, body)
    end = len(body)
    if start_offset <= h.base_offset and limit >= h.count and (max_bytes < 0 or max_bytes >= end):
        # the common case of sequential reads: every record of the batch, no budget to watch
        return _decode_whole(batch, h, body if h.codec else None), end, True
    got = _decode_native(body, h, start_offset, limit, max_bytes, force_first)
    if got is not None:
        return got
    if _compiled_batch is not None and (limit >= 4 or start_offset - h.base_offset >= 64):
        # (a read of a record or three near the start is quicker without the set-up)
        got = _decode_range_compiled(
            batch, h, body if h.codec else None, start_offset, limit, max_bytes, force_first
        )
        if got is not None:
            return got
    return _decode_body(body, h, start_offset, limit, max_bytes, force_first)


def int32(buf: bytes | memoryview, pos: int) -> int:
    return _INT32.unpack_from(buf, pos)[0]
