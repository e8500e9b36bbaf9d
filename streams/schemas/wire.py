"""Confluent's wire format, and reading values written in it.

A value (or key) written by a Confluent serializer is::

    byte 0      magic byte 0
    bytes 1-4   the schema id, a big-endian int32
    (Protobuf)  the message indexes: a zigzag varint count, then each index as a zigzag varint,
                the path from the file's top-level messages to the nested one; a single 0 byte
                stands for [0], the first message
    ...         the payload: Avro binary (schemaless), Protobuf, or JSON text

`SchemaDecoder` reads such bytes into plain Python values (dicts, lists, str, numbers), the
shapes the message browser, CEL filters, exports, panels and jobs use: each schema id's reader
is built once and cached (a schema never changes under its id). Anything it cannot read
raises `Undecodable`, which says why (not the wire format, unknown id, truncated payload, a
message index out of range...), so a caller can fall back to hex with the reason.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import io
import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from streams.schemas.formats import AVRO, JSON, PROTOBUF, ParsedSchema

MAGIC = 0
HEADER = struct.Struct(">bI")


class Undecodable(ValueError):
    """Bytes that could not be read as a schema's data; the message says why."""


class SchemaSource(Protocol):
    """Where a decoder finds schemas by id: the built-in `SchemaRegistry`, or a client of an
    external one (`streams.schemas.remote.RemoteRegistry`)."""

    def parsed(self, schema_id: int) -> ParsedSchema: ...

    def describe(self, schema_id: int) -> tuple[str, int] | None:
        """A (subject, version) holding the id, for display; None when none is known."""
        ...


@dataclasses.dataclass(frozen=True)
class Decoded:
    value: Any  # plain JSON-able Python: dicts, lists, str, int, float, bool, None
    schema_id: int | None  # None: read with a mapped schema that is not a registered one
    schema_type: str
    subject: str | None = None
    version: int | None = None
    message: str | None = None  # Protobuf: the full name of the message type
    mapping: str | None = None  # read without the wire format, with this mapped schema


def is_wire_format(data: bytes | None) -> bool:
    return data is not None and len(data) >= 5 and data[0] == MAGIC


def header(data: bytes) -> int:
    """The schema id of wire-format bytes (`Undecodable` when they are not in it)."""
    if data is None or len(data) < 5:
        raise Undecodable(
            "not in the schema registry's wire format: "
            f"{len(data or b'')} bytes, under the 5 of its header"
        )
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise Undecodable(
            f"not in the schema registry's wire format: its first byte is {data[0]:#04x}, not 0"
        )
    return schema_id


def encode_header(schema_id: int, indexes: tuple[int, ...] | None = None) -> bytes:
    """The wire format's header for `schema_id` (with Protobuf message `indexes`)."""
    out = HEADER.pack(MAGIC, schema_id)
    if indexes is None:
        return out
    if tuple(indexes) == (0,):
        return out + b"\x00"
    return out + b"".join(_zigzag(n) for n in (len(indexes), *indexes))


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_indexes(data: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """Protobuf's message indexes at `pos`, and where the payload starts."""
    count, pos = _read_zigzag(data, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 100:
        raise Undecodable(f"a Protobuf message index count of {count} is not valid")
    indexes = []
    for _ in range(count):
        n, pos = _read_zigzag(data, pos)
        indexes.append(n)
    return tuple(indexes), pos


def _read_zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise Undecodable("truncated: the Protobuf message indexes run past the end")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise Undecodable("a Protobuf message index varint is too long")


Reader = Callable[[bytes, int], tuple[Any, str | None]]  # (data, payload start) -> value, type


class SchemaDecoder:
    """Wire-format bytes to values, through a `SchemaSource`; readers cached per schema id.
    Thread-safe (the cache is filled under a lock; readers are stateless)."""

    def __init__(self, source: SchemaSource):
        self._source = source
        self.source = source
        self._lock = threading.Lock()
        self._readers: dict[int, tuple[str, Reader]] = {}

    def handles(self, data: bytes | None) -> bool:
        """Whether `data` is for this decoder: bytes in the wire format."""
        return is_wire_format(data)

    def decode(self, data: bytes) -> Decoded:
        schema_id = header(data)
        schema_type, reader = self._reader(schema_id)
        value, message = reader(data, 5)
        where = self._source.describe(schema_id)
        subject, version = where if where else (None, None)
        return Decoded(value, schema_id, schema_type, subject, version, message)

    def value(self, data: bytes) -> Any:
        """Only the decoded value (the hot path of a scan)."""
        schema_type, reader = self._reader(header(data))
        return reader(data, 5)[0]

    def _reader(self, schema_id: int) -> tuple[str, Reader]:
        hit = self._readers.get(schema_id)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._readers.get(schema_id)
            if hit is None:
                try:
                    parsed = self._source.parsed(schema_id)
                except Exception as exc:  # unknown id, registry unreachable...
                    reason = getattr(exc, "message", None) or str(exc)
                    raise Undecodable(f"schema id {schema_id}: {reason}") from None
                hit = (parsed.schema_type, build_reader(parsed))
                self._readers[schema_id] = hit
            return hit


def build_reader(parsed: ParsedSchema) -> Reader:
    if parsed.schema_type == AVRO:
        return _avro_reader(parsed)
    if parsed.schema_type == PROTOBUF:
        return _protobuf_reader(parsed)
    if parsed.schema_type == JSON:
        return _json_reader
    raise Undecodable(f"no reader for {parsed.schema_type}")


def _avro_reader(parsed: ParsedSchema) -> Reader:
    from fastavro import schemaless_reader

    from streams.schemas import avro_program
    from streams.schemas.formats import AvroFormat

    schema = AvroFormat.fastavro(parsed.obj, parsed.references)
    convert = jsonable if has_non_json_types(parsed) else _same
    compiled = avro_program.reader(parsed.obj, [d.obj for d in parsed.dependencies()])
    if compiled is not None:  # streams/schemas/_cavro.pyx: fastavro's values, faster

        def read_compiled(data: bytes, pos: int):
            try:
                value, end = compiled(data, pos)
            except EOFError:
                raise Undecodable("truncated: the Avro payload ends before its record") from None
            except ValueError as exc:  # UnicodeDecodeError too
                raise Undecodable(f"not Avro of this schema: {exc}") from None
            if end != len(data):
                raise Undecodable(
                    f"not Avro of this schema: {len(data) - end} bytes are left after the record"
                )
            return convert(value), None

        return read_compiled

    def read(data: bytes, pos: int):
        buf = io.BytesIO(data)
        buf.seek(pos)
        try:
            value = schemaless_reader(buf, schema, None)
        except (EOFError, StopIteration):
            raise Undecodable("truncated: the Avro payload ends before its record") from None
        except (ValueError, IndexError, TypeError, UnicodeDecodeError) as exc:
            raise Undecodable(f"not Avro of this schema: {exc}") from None
        if buf.tell() != len(data):
            raise Undecodable(
                f"not Avro of this schema: {len(data) - buf.tell()} bytes are left after the record"
            )
        return convert(value), None

    return read


def _same(value: Any) -> Any:
    return value


_NON_JSON = ("bytes", "fixed", "logicalType")


def has_non_json_types(parsed: ParsedSchema) -> bool:
    """Whether an Avro schema (or one it references) may give values JSON has no type for:
    only then is each decoded value walked by `jsonable`."""
    import json

    texts = [json.dumps(d.obj) for d in [*parsed.dependencies(), parsed]]
    return any(f'"{word}"' in text for text in texts for word in _NON_JSON)


def _json_reader(data: bytes, pos: int):
    import orjson

    try:
        return orjson.loads(data[pos:]), None
    except orjson.JSONDecodeError as exc:
        raise Undecodable(f"not JSON: {exc}") from None


def protobuf_pool(parsed: ParsedSchema):
    """A descriptor pool holding the schema's file, its references and the well-known types it
    imports, and the file's descriptor in it."""
    from google.protobuf import descriptor_pool

    by_name = {d.obj.name: d.obj for d in parsed.dependencies()}
    names = {name: ref.obj for name, ref in _flat_refs(parsed).items()}
    pool = descriptor_pool.DescriptorPool()
    root = parsed.obj.name or "schema.proto"
    _add_file(pool, set(), parsed.obj, root, lambda dep: names.get(dep) or by_name.get(dep))
    return pool, pool.FindFileByName(root)


def descriptor_set_pool(data: bytes):
    """A descriptor pool of a serialized ``FileDescriptorSet`` (as ``protoc --include_imports
    --descriptor_set_out`` writes it; well-known types it imports but leaves out are added),
    and its files' descriptors; `Undecodable` when it is not one."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError

    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except DecodeError as exc:
        raise Undecodable(f"not a Protobuf FileDescriptorSet: {exc}") from None
    if not files.file:
        raise Undecodable("not a Protobuf FileDescriptorSet: it holds no files")
    by_name = {f.name: f for f in files.file}
    pool, added = descriptor_pool.DescriptorPool(), set()
    for file in files.file:
        try:
            _add_file(pool, added, file, file.name, by_name.get)
        except TypeError as exc:  # the pool refuses a file (a duplicate symbol...)
            raise Undecodable(f"the descriptor set's {file.name!r}: {exc}") from None
    return pool, [pool.FindFileByName(f.name) for f in files.file]


def _add_file(pool, added: set[str], file, name: str, find) -> None:
    """Add `file` to `pool` as `name`, after its imports (`find` gives an import's file)."""
    from google.protobuf import descriptor_pb2

    if name in added:
        return
    for dep in file.dependency:
        found = find(dep) or _well_known(dep)
        if found is None:
            raise Undecodable(f"the Protobuf schema imports {dep!r}, which is not known")
        _add_file(pool, added, found, dep, find)
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    copy.name = name
    pool.Add(copy)
    added.add(name)


def _flat_refs(parsed: ParsedSchema) -> dict[str, ParsedSchema]:
    out: dict[str, ParsedSchema] = {}
    for name, ref in parsed.references.items():
        out.update(_flat_refs(ref))
        out[name] = ref
    return out


def _well_known(name: str):
    """google/protobuf/*.proto from the protobuf package's own descriptors."""
    if not name.startswith("google/protobuf/"):
        return None
    import importlib

    from google.protobuf import descriptor_pb2

    module = "google.protobuf." + name.rsplit("/", 1)[1].removesuffix(".proto") + "_pb2"
    try:
        descriptor = importlib.import_module(module).DESCRIPTOR
    except ImportError:
        return None
    out = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyToProto(out)
    return out


def message_descriptor(file, indexes: tuple[int, ...]):
    """The message type at `indexes` (top-level index, then nested ones) of a file."""
    types, path, found = list(file.message_types_by_name.values()), [], None
    for i in indexes:
        if not 0 <= i < len(types):
            where = found.full_name if found is not None else f"file {file.name!r}"
            raise Undecodable(
                f"Protobuf message index {list(indexes)} is out of range: {where} has "
                f"{len(types)} message types, no index {i}"
            )
        found = types[i]
        path.append(i)
        types = list(found.nested_types)
    return found


def _protobuf_reader(parsed: ParsedSchema) -> Reader:
    pool, file = protobuf_pool(parsed)
    readers: dict[tuple[int, ...], Reader] = {}

    def read(data: bytes, pos: int):
        indexes, start = read_indexes(data, pos)
        reader = readers.get(indexes)
        if reader is None:
            reader = readers[indexes] = protobuf_message_reader(message_descriptor(file, indexes))
        return reader(data, start)

    return read


def protobuf_message_reader(descriptor) -> Reader:
    """A reader of one message type's bytes from a position, as JSON's values."""
    from google.protobuf import json_format, message_factory
    from google.protobuf.message import DecodeError

    cls = message_factory.GetMessageClass(descriptor)
    full_name = descriptor.full_name

    def read(data: bytes, pos: int):
        message = cls()
        try:
            message.ParseFromString(data[pos:] if pos else data)
        except DecodeError as exc:
            raise Undecodable(f"not Protobuf of {full_name}: {exc}") from None
        value = json_format.MessageToDict(message, preserving_proto_field_name=True)
        return value, full_name

    return read


def jsonable(value: Any) -> Any:
    """Avro's Python values as JSON's: bytes as base64 text, decimals and UUIDs as text,
    dates and times as ISO-8601 text."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    return value
