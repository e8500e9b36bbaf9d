"""Topics mapped to a schema without the wire format, and reading a topic's keys and values.

Not every producer writes Confluent's wire format: some write plain Avro (schemaless, no
header), or Protobuf whose message type is known only to its readers. As AKHQ and Redpanda
Console allow, a topic's key or value can be *mapped* to a schema here, and is then read with
it whatever its first byte:

- ``registry``: a registered version (subject and version; the schema id is fixed when the
  mapping is made, as ids never change), Avro, or Protobuf with the message type named;
- ``avro``: an Avro schema given as text;
- ``descriptor-set``: a Protobuf ``FileDescriptorSet`` (``protoc --include_imports
  --descriptor_set_out``) and the full name of the message type.

`MappingBook` keeps the mappings in a JSON file (written whole, atomically), `TopicReading`
gives the decoder for a topic's key or value: its mapping when it has one, else the registry's
wire-format decoder. Its decoders consult the book on every call, so a mapping made or removed
is seen by the running readers (panels, saved searches) at their next record.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from streams.errors import TidelogError
from streams.schemas.formats import AVRO, PROTOBUF, AvroFormat, ParsedSchema
from streams.schemas.wire import (
    Decoded,
    Reader,
    SchemaDecoder,
    SchemaSource,
    Undecodable,
    build_reader,
    descriptor_set_pool,
    protobuf_message_reader,
    protobuf_pool,
)

PARTS = ("key", "value")
SOURCES = ("registry", "avro", "descriptor-set")
MAX_DESCRIPTOR_SET_BYTES = 4 * 1024 * 1024


class MappingError(TidelogError):
    """A mapping that cannot be made; the message says why."""

    code = "invalid_schema_mapping"


@dataclasses.dataclass(frozen=True)
class TopicMapping:
    """One topic's key or value read with a schema, without the wire format."""

    topic: str
    part: str  # "key" or "value"
    source: str  # one of SOURCES
    schema_type: str  # AVRO or PROTOBUF
    subject: str | None = None  # registry: the version mapped
    version: int | None = None
    schema_id: int | None = None
    schema: str | None = None  # avro: the schema's text; descriptor-set: its base64
    message: str | None = None  # Protobuf: the message type's full name
    file_name: str | None = None  # descriptor-set: the uploaded file's name
    created_by: str = ""
    created_ms: int = 0

    @property
    def label(self) -> str:
        """Where the schema comes from, for a page: "payments-value v2 (schema id 7)"."""
        if self.source == "registry":
            return f"{self.subject} v{self.version} (schema id {self.schema_id})"
        if self.source == "descriptor-set":
            return f"descriptor set {self.file_name or ''}".strip()
        return "an Avro schema given as text"

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, obj: dict) -> TopicMapping:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in fields})


def registry_mapping(
    source: SchemaSource | Any,
    *,
    topic: str,
    part: str,
    subject: str,
    version: str | int,
    message: str | None = None,
    created_by: str = "",
) -> TopicMapping:
    """A mapping to `subject`'s `version` ("latest" is resolved now: the mapping keeps the
    number and the id), checked by building its reader."""
    try:
        schema_id = source.version_id(subject, version)
        parsed = source.parsed(schema_id)
    except Exception as exc:  # noqa: BLE001 - unknown subject or version, registry down
        reason = getattr(exc, "message", None) or str(exc)
        raise MappingError(f"subject {subject!r} version {version}: {reason}") from None
    number = int(version) if str(version) != "latest" else _latest_number(source, subject)
    mapping = TopicMapping(
        topic,
        part,
        "registry",
        parsed.schema_type,
        subject=subject,
        version=number,
        schema_id=schema_id,
        message=message or None,
        created_by=created_by,
        created_ms=_now_ms(),
    )
    _check_part(mapping)
    RawDecoder(mapping, parsed=parsed)  # raises MappingError when it cannot be read with
    return mapping


def _latest_number(source, subject: str) -> int:
    try:
        return max(source.versions(subject))
    except Exception as exc:  # noqa: BLE001 - deleted since, registry down
        reason = getattr(exc, "message", None) or str(exc)
        raise MappingError(f"subject {subject!r}: {reason}") from None


def avro_mapping(*, topic: str, part: str, schema: str, created_by: str = "") -> TopicMapping:
    """A mapping to an Avro schema given as text (raises MappingError for one that does not
    parse, with its position)."""
    mapping = TopicMapping(
        topic, part, "avro", AVRO, schema=schema, created_by=created_by, created_ms=_now_ms()
    )
    _check_part(mapping)
    RawDecoder(mapping)
    return mapping


def descriptor_set_mapping(
    *,
    topic: str,
    part: str,
    data: bytes,
    message: str,
    file_name: str = "",
    created_by: str = "",
) -> TopicMapping:
    """A mapping to message type `message` of a serialized ``FileDescriptorSet``."""
    if len(data) > MAX_DESCRIPTOR_SET_BYTES:
        raise MappingError(
            f"the descriptor set is {len(data):,} bytes; at most "
            f"{MAX_DESCRIPTOR_SET_BYTES:,} are taken"
        )
    mapping = TopicMapping(
        topic,
        part,
        "descriptor-set",
        PROTOBUF,
        schema=base64.b64encode(data).decode("ascii"),
        message=message.strip().lstrip("."),
        file_name=file_name,
        created_by=created_by,
        created_ms=_now_ms(),
    )
    _check_part(mapping)
    RawDecoder(mapping)
    return mapping


def descriptor_set_messages(data: bytes) -> list[str]:
    """The full names of every message type in a serialized ``FileDescriptorSet`` (nested
    ones too), for a form's choices; raises MappingError when it is not one."""
    pool, files = _descriptor_set(data)
    names: list[str] = []

    def walk(message) -> None:
        names.append(message.full_name)
        for nested in message.nested_types:
            if not nested.GetOptions().map_entry:
                walk(nested)

    for file in files:
        for message in file.message_types_by_name.values():
            walk(message)
    return names


def _descriptor_set(data: bytes):
    try:
        return descriptor_set_pool(data)
    except Undecodable as exc:
        raise MappingError(str(exc)) from None


def _check_part(mapping: TopicMapping) -> None:
    if mapping.part not in PARTS:
        raise MappingError(f"a mapping is for a topic's key or value, not {mapping.part!r}")
    if not mapping.topic:
        raise MappingError("a mapping needs a topic")


def _now_ms() -> int:
    return int(time.time() * 1000)


class RawDecoder:
    """Reads every key or value of a mapped topic with its schema (no header is expected:
    the bytes are the payload). `decode` and `value` raise `Undecodable` saying why."""

    def __init__(
        self,
        mapping: TopicMapping,
        source: SchemaSource | None = None,
        *,
        parsed: ParsedSchema | None = None,
    ):
        self.mapping = mapping
        self._reader, self._message = self._build(mapping, source, parsed)

    @staticmethod
    def _build(mapping, source, parsed) -> tuple[Reader, str | None]:
        if mapping.source == "descriptor-set":
            try:
                data = base64.b64decode(mapping.schema or "", validate=True)
            except (binascii.Error, ValueError):
                raise MappingError("the descriptor set is not base64") from None
            pool, _ = _descriptor_set(data)
            return _message_reader(pool, mapping.message)
        if mapping.source == "avro":
            from streams.schemas.errors import SchemaParseError

            try:
                parsed = AvroFormat().parse(mapping.schema or "", {})
            except SchemaParseError as exc:
                raise MappingError(f"the Avro schema does not parse: {exc}") from None
        elif parsed is None:
            if source is None:
                raise MappingError("no schema registry to read the mapped schema from")
            try:
                parsed = source.parsed(int(mapping.schema_id or 0))
            except Exception as exc:  # noqa: BLE001 - deleted for good, registry down
                reason = getattr(exc, "message", None) or str(exc)
                raise MappingError(f"schema id {mapping.schema_id}: {reason}") from None
        if parsed.schema_type == PROTOBUF:
            pool, _ = protobuf_pool(parsed)
            return _message_reader(pool, mapping.message)
        if parsed.schema_type != AVRO:
            raise MappingError(
                f"a {parsed.schema_type} schema needs no mapping: its values are JSON, which "
                "the console reads as they are"
            )
        return build_reader(parsed), None

    def handles(self, data: bytes | None) -> bool:
        return data is not None

    def decode(self, data: bytes) -> Decoded:
        value, message = self._reader(data, 0)
        m = self.mapping
        return Decoded(
            value, m.schema_id, m.schema_type, m.subject, m.version, message, mapping=m.label
        )

    def value(self, data: bytes) -> Any:
        return self._reader(data, 0)[0]


def _message_reader(pool, name: str | None) -> tuple[Reader, str]:
    if not name:
        raise MappingError("a Protobuf mapping names its message type (e.g. acme.orders.Order)")
    try:
        descriptor = pool.FindMessageTypeByName(name)
    except KeyError:
        raise MappingError(f"no message type {name!r} in the Protobuf schema") from None
    return protobuf_message_reader(descriptor), descriptor.full_name


class _Broken:
    """A mapping that cannot be read with any more (its schema deleted for good, the registry
    unreachable): every value is undecodable, for that reason, and shown as bytes."""

    def __init__(self, reason: str):
        self.reason = reason

    def handles(self, data: bytes | None) -> bool:
        return data is not None

    def decode(self, data: bytes) -> Decoded:
        raise Undecodable(self.reason)

    def value(self, data: bytes) -> Any:
        raise Undecodable(self.reason)


class MappingBook:
    """The mappings, kept in a JSON file (`path`; None: in memory only). Thread-safe; a change
    is written whole to a temporary file, flushed to disk and renamed over the old one."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._mappings: dict[tuple[str, str], TopicMapping] = {}
        if self.path is not None and self.path.exists():
            self._mappings = self._load(self.path)

    @staticmethod
    def _load(path: Path) -> dict[tuple[str, str], TopicMapping]:
        try:
            entries = json.loads(path.read_text(encoding="utf-8")).get("mappings", [])
            found = (TopicMapping.from_json(e) for e in entries)
            return {(m.topic, m.part): m for m in found}
        except (ValueError, TypeError, AttributeError) as exc:
            raise MappingError(f"{path} is not a file of schema mappings: {exc}") from None

    def get(self, topic: str, part: str) -> TopicMapping | None:
        return self._mappings.get((topic, part))

    def for_topic(self, topic: str) -> list[TopicMapping]:
        return [m for part in PARTS if (m := self._mappings.get((topic, part))) is not None]

    def all(self) -> list[TopicMapping]:
        with self._lock:
            return sorted(self._mappings.values(), key=lambda m: (m.topic, PARTS.index(m.part)))

    def put(self, mapping: TopicMapping) -> TopicMapping | None:
        """Map (or re-map) a topic's key or value; returns the mapping it replaced."""
        with self._lock:
            key = (mapping.topic, mapping.part)
            old = self._mappings.get(key)
            changed = dict(self._mappings)
            changed[key] = mapping
            self._save(changed)
            self._mappings = changed
            return old

    def remove(self, topic: str, part: str) -> TopicMapping | None:
        with self._lock:
            changed = dict(self._mappings)
            old = changed.pop((topic, part), None)
            if old is not None:
                self._save(changed)
                self._mappings = changed
            return old

    def _save(self, mappings: dict[tuple[str, str], TopicMapping]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"mappings": [m.to_json() for m in mappings.values()]}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(body, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class PartDecoder:
    """A topic's key or value decoder: the mapping's when the topic has one (asked of the book
    at every call), else the wire format's."""

    def __init__(self, reading: TopicReading, topic: str, part: str):
        self._reading, self.topic, self.part = reading, topic, part

    def _current(self):
        return self._reading.current(self.topic, self.part)

    def handles(self, data: bytes | None) -> bool:
        current = self._current()
        return current is not None and current.handles(data)

    def decode(self, data: bytes) -> Decoded:
        current = self._current()
        if current is None:
            raise Undecodable("no schema registry to read it with")
        return current.decode(data)

    def value(self, data: bytes) -> Any:
        current = self._current()
        if current is None:
            raise Undecodable("no schema registry to read it with")
        return current.value(data)


class TopicDecoders(Protocol):
    """Where readers of many topics find each one's key and value decoders (`TopicReading`):
    None when nothing can be decoded."""

    def key(self, topic: str) -> PartDecoder | None: ...

    def value(self, topic: str) -> PartDecoder | None: ...


class TopicReading:
    """How each topic's keys and values are read: mapped (`book`) or through the registry's
    wire format (`decoder`, None: there is no registry). The raw decoders are built once per
    mapping."""

    def __init__(self, decoder: SchemaDecoder | None, book: MappingBook | None = None):
        self.decoder = decoder
        self.book = book
        self._lock = threading.Lock()
        self._raw: dict[TopicMapping, RawDecoder | _Broken] = {}

    def key(self, topic: str) -> PartDecoder | None:
        return self._part(topic, "key")

    def value(self, topic: str) -> PartDecoder | None:
        return self._part(topic, "value")

    def _part(self, topic: str, part: str) -> PartDecoder | None:
        if self.decoder is None and self.book is None:
            return None
        return PartDecoder(self, topic, part)

    def current(self, topic: str, part: str):
        mapping = self.book.get(topic, part) if self.book is not None else None
        if mapping is None:
            return self.decoder
        raw = self._raw.get(mapping)
        if raw is None:
            with self._lock:
                raw = self._raw.get(mapping)
                if raw is None:
                    raw = self._raw[mapping] = self._build(mapping)
        return raw

    def _build(self, mapping: TopicMapping) -> RawDecoder | _Broken:
        source = self.decoder.source if self.decoder is not None else None
        try:
            return RawDecoder(mapping, source)
        except MappingError as exc:
            return _Broken(f"mapped to {mapping.label}, which cannot be read: {exc}")


_process_book: MappingBook | None = None


def use_mappings(book: MappingBook | None) -> None:
    """The book this process's jobs (saved searches) read mapped topics with."""
    global _process_book
    _process_book = book


def process_mappings() -> MappingBook | None:
    return _process_book


class MappedValues:
    """A job serde for a topic whose values are mapped (`process_mappings`): they are read
    with the mapping (seen anew at every record, as `PartDecoder` does), values in the wire
    format with the registry, the rest as JSON. Writes JSON."""

    name = "mapped"

    def __init__(self, book: MappingBook, topic: str, registry: SchemaSource | None = None):
        from streams.jobs.serde import JSON

        self._json = JSON
        decoder = SchemaDecoder(registry) if registry is not None else None
        self._part = PartDecoder(TopicReading(decoder, book), topic, "value")

    def serialize(self, obj: object) -> bytes | None:
        return self._json.serialize(obj)

    def deserialize(self, data: bytes | None) -> object:
        if data is None:
            return None
        data = bytes(data)
        if not self._part.handles(data):
            return self._json.deserialize(data)
        from streams.schemas.serdes import SchemaSerdeError

        try:
            return self._part.value(data)
        except Undecodable as exc:
            raise SchemaSerdeError(str(exc)) from None
