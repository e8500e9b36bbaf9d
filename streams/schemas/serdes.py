"""Stream-job serialisers for data under a schema registry, in Confluent's wire format:
``Avro(subject=...)``, ``Protobuf(subject=...)`` and ``JsonSchema(subject=...)`` (re-exported by
``streams.jobs.serde``), each a ``streams.jobs.serde.Serde``.

Reading takes the writer's schema from the record's schema id (cached per id, as
`streams.schemas.wire.SchemaDecoder` does); an Avro serde given a `schema` also resolves each
record to it (Avro's schema resolution: the job sees its own reader schema whatever version
wrote the record). Values come as JSON's types, as a job's state keeps them: Avro's bytes as
base64 text, decimals as text, dates and timestamps as ISO-8601 text (writing takes either
form: fastavro writes a timestamp from a datetime or from its epoch number). Writing uses the
serde's `schema`, registered under `subject` on first use (Confluent's
``auto.register.schemas``), or without one the subject's latest version
(``use.latest.version``).

The registry: the `registry` argument (a `SchemaClient`: the broker's ``SchemaRegistry`` for a
job in the broker's process, or `RemoteRegistry` for any registry over HTTP), else the process
default (`use_registry`; ``EmbeddedJobs`` sets it to the broker's), else
``TIDELOG_SCHEMA_REGISTRY`` (a URL, ``TIDELOG_SCHEMA_REGISTRY_AUTH=user:password``), as a job
worker (``python -m streams.jobs run --schema-registry URL``) finds it.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from streams.errors import TidelogError
from streams.schemas.formats import AVRO, JSON, PROTOBUF, ParsedSchema
from streams.schemas.wire import (
    SchemaDecoder,
    Undecodable,
    encode_header,
    has_non_json_types,
    header,
    jsonable,
    message_descriptor,
    protobuf_pool,
)


class SchemaSerdeError(TidelogError):
    code = "serde_error"


class SchemaClient(Protocol):
    """What the serdes need of a registry (``SchemaRegistry`` and `RemoteRegistry` have it)."""

    def parsed(self, schema_id: int) -> ParsedSchema: ...

    def describe(self, schema_id: int) -> tuple[str, int] | None: ...

    def register_schema(self, subject: str, schema: str, schema_type: str) -> int:
        """The id of `schema` under `subject`, registered when it is not there yet."""
        ...

    def latest_id(self, subject: str) -> int:
        """The schema id of the subject's latest version."""
        ...

    def version_id(self, subject: str, version: str | int) -> int:
        """The schema id of a version of the subject (a number or "latest")."""
        ...

    def subjects(self) -> list[str]: ...


_default: SchemaClient | None = None
_default_lock = threading.Lock()


def use_registry(registry: SchemaClient | None) -> None:
    """The registry serdes without one of their own use (None: back to the environment)."""
    global _default
    with _default_lock:
        _default = registry


def release_registry(registry: SchemaClient) -> None:
    """Stop using `registry` as the default, if it is (its broker closed)."""
    global _default
    with _default_lock:
        if _default is registry:
            _default = None


def default_registry() -> SchemaClient:
    global _default
    with _default_lock:
        if _default is not None:
            return _default
        url = os.environ.get("TIDELOG_SCHEMA_REGISTRY")
        if not url:
            raise SchemaSerdeError(
                "no schema registry: give the serde one (registry=...), run the job in the "
                "broker, or set TIDELOG_SCHEMA_REGISTRY (python -m streams.jobs run "
                "--schema-registry URL)"
            )
        from streams.schemas.remote import RemoteRegistry

        auth = os.environ.get("TIDELOG_SCHEMA_REGISTRY_AUTH")
        _default = RemoteRegistry(url, {"basic.auth.user.info": auth} if auth else {})
        return _default


class _RegistrySerde:
    """What the three share: the registry, the decoder, the writer's id and schema."""

    schema_type = AVRO
    name = "schema"

    def __init__(
        self,
        subject: str,
        schema: str | Mapping | None = None,
        *,
        registry: SchemaClient | None = None,
    ):
        self.subject = subject
        self.schema = json.dumps(schema) if isinstance(schema, Mapping) else schema
        self._registry = registry
        self._decoder: SchemaDecoder | None = None
        self._writer: tuple[int, ParsedSchema] | None = None
        self._lock = threading.Lock()

    @property
    def registry(self) -> SchemaClient:
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    def _read(self, data: bytes) -> Any:
        if self._decoder is None:
            self._decoder = SchemaDecoder(self.registry)
        try:
            return self._decoder.value(bytes(data))
        except Undecodable as exc:
            raise SchemaSerdeError(f"{self.subject}: {exc}") from None

    def writer(self) -> tuple[int, ParsedSchema]:
        """(schema id, parsed schema) records are written with, found once."""
        with self._lock:
            if self._writer is None:
                registry = self.registry
                try:
                    if self.schema is not None:
                        schema_id = registry.register_schema(
                            self.subject, self.schema, self.schema_type
                        )
                    else:
                        schema_id = registry.latest_id(self.subject)
                except Exception as exc:  # unknown subject, incompatible, unreachable...
                    reason = getattr(exc, "message", None) or str(exc)
                    raise SchemaSerdeError(
                        f"no schema to write {self.subject} with: {reason}"
                    ) from None
                self._writer = (schema_id, registry.parsed(schema_id))
            return self._writer


_SAME_SCHEMA = ()  # a record written with the serde's own schema: read as is


class Avro(_RegistrySerde):
    """Avro under `subject` (see the module's docstring)."""

    schema_type = AVRO
    name = "avro"

    def __init__(self, subject, schema=None, *, registry=None):
        super().__init__(subject, schema, registry=registry)
        self._resolved: dict[int, Any] = {}
        self._write_schema: Any = None

    def deserialize(self, data: bytes | None) -> object:
        if data is None:
            return None
        if self.schema is None:
            return self._read(data)
        return self._resolve(bytes(data))

    def _resolve(self, data: bytes) -> object:
        """The record read with its writer's schema and resolved to this serde's."""
        from fastavro import schemaless_reader

        from streams.schemas.formats import AvroFormat

        try:
            schema_id = header(data)
            pair = self._resolved.get(schema_id)
            if pair is None:
                writer = self.registry.parsed(schema_id)
                reader = self.writer()[1]
                if writer.canonical == reader.canonical:
                    pair = self._resolved[schema_id] = _SAME_SCHEMA
                else:
                    convert = jsonable if has_non_json_types(reader) else None
                    pair = self._resolved[schema_id] = (
                        AvroFormat.fastavro(writer.obj, writer.references),
                        AvroFormat.fastavro(reader.obj, reader.references),
                        convert,
                    )
            if pair is _SAME_SCHEMA:  # nothing to resolve: the registry's (compiled) reader
                return self._read(data)
            buf = io.BytesIO(data)
            buf.seek(5)
            value = schemaless_reader(buf, pair[0], pair[1])
            return value if pair[2] is None else pair[2](value)
        except SchemaSerdeError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro's errors vary by cause
            raise SchemaSerdeError(f"{self.subject}: cannot read the record: {exc}") from None

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        from fastavro import schemaless_writer

        from streams.schemas.formats import AvroFormat

        schema_id, parsed = self.writer()
        if self._write_schema is None:
            self._write_schema = AvroFormat.fastavro(parsed.obj, parsed.references)
        buf = io.BytesIO()
        buf.write(encode_header(schema_id))
        try:
            schemaless_writer(buf, self._write_schema, obj)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise SchemaSerdeError(f"{self.subject}: not a record of its schema: {exc}") from None
        return buf.getvalue()


class Protobuf(_RegistrySerde):
    """Protobuf under `subject`: values are dicts (field names as in the .proto); `message`
    names the message type written (its full name; default: the file's first)."""

    schema_type = PROTOBUF
    name = "protobuf"

    def __init__(self, subject, schema=None, *, message: str | None = None, registry=None):
        super().__init__(subject, schema, registry=registry)
        self.message = message
        self._out: tuple[Any, bytes] | None = None

    def deserialize(self, data: bytes | None) -> object:
        return None if data is None else self._read(data)

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        from google.protobuf import json_format, message_factory

        if self._out is None:
            schema_id, parsed = self.writer()
            _, file = protobuf_pool(parsed)
            indexes = _indexes_of(file, self.message)
            cls = message_factory.GetMessageClass(message_descriptor(file, indexes))
            self._out = (cls, encode_header(schema_id, indexes))
        cls, head = self._out
        try:
            message = json_format.ParseDict(obj, cls())
        except (json_format.ParseError, TypeError) as exc:
            name = cls.DESCRIPTOR.full_name
            raise SchemaSerdeError(f"{self.subject}: not a {name}: {exc}") from None
        return head + message.SerializeToString()


def _indexes_of(file, message: str | None) -> tuple[int, ...]:
    """The message indexes of the message type named `message` (None: the first)."""
    if message is None:
        return (0,)

    def walk(types, path):
        for i, t in enumerate(types):
            if t.full_name == message or t.name == message:
                return (*path, i)
            found = walk(list(t.nested_types), (*path, i))
            if found:
                return found
        return None

    found = walk(list(file.message_types_by_name.values()), ())
    if found is None:
        raise SchemaSerdeError(f"the schema has no message type {message!r}")
    return found


class JsonSchema(_RegistrySerde):
    """JSON under a JSON Schema in `subject`: every value written is validated first."""

    schema_type = JSON
    name = "jsonschema"

    def __init__(self, subject, schema=None, *, registry=None):
        super().__init__(subject, schema, registry=registry)
        self._validator: Any = None
        self._head = b""

    def deserialize(self, data: bytes | None) -> object:
        return None if data is None else self._read(data)

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        import jsonschema
        import orjson

        if self._validator is None:
            schema_id, parsed = self.writer()
            cls = jsonschema.validators.validator_for(parsed.obj)
            self._validator, self._head = cls(parsed.obj), encode_header(schema_id)
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(obj))
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise SchemaSerdeError(f"{self.subject}: invalid at {path}: {error.message}")
        return self._head + orjson.dumps(obj)


def version_serde(registry: SchemaClient, subject: str, version: str | int = "latest"):
    """A serde writing with one version of `subject` (an `Avro`, `Protobuf` or `JsonSchema`
    by the version's type): what the console's produce form encodes a value with."""
    try:
        schema_id = registry.version_id(subject, version)
        parsed = registry.parsed(schema_id)
    except Exception as exc:  # unknown subject or version, registry unreachable...
        reason = getattr(exc, "message", None) or str(exc)
        raise SchemaSerdeError(f"{subject} version {version}: {reason}") from None
    cls = {AVRO: Avro, PROTOBUF: Protobuf, JSON: JsonSchema}[parsed.schema_type]
    serde = cls(subject, registry=registry)
    serde._writer = (schema_id, parsed)
    return serde


def process_registry() -> SchemaClient | None:
    """The process default registry (`default_registry`), or None when there is none."""
    try:
        return default_registry()
    except SchemaSerdeError:
        return None


class RegistryOrJson:
    """Values that are JSON or in the registry's wire format (a topic holding either): the
    latter decoded with the registry (the process default unless given), the rest as JSON.
    Writes JSON."""

    name = "json-or-registry"

    def __init__(self, registry: SchemaClient | None = None):
        from streams.jobs.serde import JSON

        self._json = JSON
        self._registry = registry
        self._decoder: SchemaDecoder | None = None

    def serialize(self, obj: object) -> bytes | None:
        return self._json.serialize(obj)

    def deserialize(self, data: bytes | None) -> object:
        if data is None or len(data) < 5 or data[0] != 0:
            return self._json.deserialize(data)
        if self._decoder is None:
            registry = self._registry or process_registry()
            if registry is None:
                raise SchemaSerdeError("a value in the schema registry's format, and no registry")
            self._decoder = SchemaDecoder(registry)
        try:
            return self._decoder.value(bytes(data))
        except Undecodable as exc:
            raise SchemaSerdeError(str(exc)) from None
