"""The three schema formats the registry keeps: Avro, Protobuf and JSON Schema.

Each `SchemaFormat` parses a schema's text (with its references already parsed), says when two
texts are the same schema (`ParsedSchema.canonical`: registering the same schema twice returns
the same id) and lists why a reader schema cannot read what a writer schema wrote
(`incompatibilities`, the rules of Confluent Schema Registry):

- Avro: parsed by fastavro (named types across references); compatibility by Apache avro's
  ``ReaderWriterCompatibilityChecker``, the port of the Java library's rules that Confluent uses;
- Protobuf: a ``FileDescriptorProto``, from ``.proto`` text (grpcio-tools' protoc,
  `streams.schemas.protoc`) or from the base64 of a serialized descriptor (what Confluent's
  clients register); rules in `streams.schemas.compat_protobuf`;
- JSON Schema: checked against its draft's metaschema by jsonschema; rules in
  `streams.schemas.compat_jsonschema`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from streams.schemas.errors import SchemaParseError

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)


@dataclasses.dataclass(frozen=True, eq=False)
class ParsedSchema:
    """A parsed schema. `canonical` is equal for two texts of the same schema; `obj` is the
    format's own object (Avro: the schema's JSON; Protobuf: a ``FileDescriptorProto``; JSON
    Schema: its JSON); `references` are the parsed schemas it names, by reference name."""

    schema_type: str
    text: str
    canonical: str
    obj: Any
    references: Mapping[str, ParsedSchema] = dataclasses.field(default_factory=dict)

    def dependencies(self) -> list[ParsedSchema]:
        """Every schema this one references, directly or not, each once, dependencies first."""
        seen: dict[int, ParsedSchema] = {}

        def visit(schema: ParsedSchema) -> None:
            for ref in schema.references.values():
                if id(ref) not in seen:
                    visit(ref)
                    seen[id(ref)] = ref

        visit(self)
        return list(seen.values())


class SchemaFormat(Protocol):
    schema_type: str

    def parse(
        self, text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
    ) -> ParsedSchema:
        """Raises `SchemaParseError` (with line and column where the parser gives them)."""
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with `reader`; [] when it can."""
        ...


def _json_text(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaParseError(f"{what} is not JSON: {exc.msg}", exc.lineno, exc.colno) from None


def _compact(obj: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)


class AvroFormat:
    schema_type = AVRO

    def parse(
        self, text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
    ) -> ParsedSchema:
        obj = _json_text(text, "the Avro schema")
        self.fastavro(obj, references)  # raises on an invalid schema
        return ParsedSchema(AVRO, text, _compact(obj, sort_keys=normalize), obj, references)

    @staticmethod
    def fastavro(obj: Any, references: Mapping[str, ParsedSchema] | Sequence[ParsedSchema]):
        """fastavro's parsed schema of `obj`, with the named types of `references`."""
        from fastavro.schema import SchemaParseException, UnknownType, parse_schema

        refs = references.values() if isinstance(references, Mapping) else references
        named: dict = {}
        try:
            for dep in _ordered(refs):
                parse_schema(copy.deepcopy(dep.obj), named_schemas=named)
            return parse_schema(copy.deepcopy(obj), named_schemas=named)
        except UnknownType as exc:
            raise SchemaParseError(
                f"unknown type {exc.name!r} (not a primitive, not defined before its use, "
                "and not in the schema's references)"
            ) from None
        except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SchemaParseError(f"invalid Avro schema: {exc}") from None

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

        result = ReaderWriterCompatibilityChecker().get_compatibility(
            _apache_avro(reader), _apache_avro(writer)
        )
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = ", ".join(sorted({k.name.upper() for k in result.incompatibilities}))
        messages = ", ".join(sorted(str(m) for m in result.messages))
        places = ", ".join(sorted(result.locations)) or "/"
        return [f"{kinds}: {messages} (at {places})"]


def _ordered(refs) -> list[ParsedSchema]:
    out: list[ParsedSchema] = []
    for ref in refs:
        for dep in [*ref.dependencies(), ref]:
            if all(dep is not o for o in out):
                out.append(dep)
    return out


def _apache_avro(schema: ParsedSchema):
    import avro.schema

    names = avro.schema.Names()
    for dep in schema.dependencies():
        avro.schema.make_avsc_object(dep.obj, names)
    return avro.schema.make_avsc_object(schema.obj, names)


class ProtobufFormat:
    schema_type = PROTOBUF

    def parse(
        self, text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
    ) -> ParsedSchema:
        file = _descriptor_from_base64(text)
        if file is None:
            from streams.schemas.protoc import ProtoSyntaxError, file_descriptor_from_proto_text

            deps = {name: ref.obj for name, ref in _all_files(references).items()}
            try:
                file = file_descriptor_from_proto_text(text, deps)
            except ProtoSyntaxError as exc:
                raise SchemaParseError(str(exc.args[0]), exc.line, exc.column) from None
        identity = type(file)()
        identity.CopyFrom(file)
        identity.ClearField("name")  # the file's own name: the registry's, not the schema's
        canonical = base64.b64encode(identity.SerializeToString(deterministic=True)).decode()
        return ParsedSchema(PROTOBUF, text, canonical, file, references)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        from streams.schemas.compat_protobuf import protobuf_incompatibilities

        return protobuf_incompatibilities(
            reader.obj,
            writer.obj,
            [d.obj for d in reader.dependencies()],
            [d.obj for d in writer.dependencies()],
        )


def _all_files(references: Mapping[str, ParsedSchema]) -> dict[str, ParsedSchema]:
    """Every file a Protobuf schema's imports may reach, by import path."""
    files: dict[str, ParsedSchema] = {}
    for name, ref in references.items():
        files.update(_all_files(ref.references))
        files[name] = ref
    return files


def _descriptor_from_base64(text: str):
    """The ``FileDescriptorProto`` of `text` when it is the base64 of one (the serialized
    form Confluent's clients register), else None (then it is ``.proto`` text)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    file = descriptor_pb2.FileDescriptorProto()
    try:
        file.ParseFromString(raw)
    except DecodeError:
        return None
    return file if file.message_type or file.enum_type or file.name else None


def serialized_protobuf(schema: ParsedSchema) -> str:
    """``format=serialized``: the base64 of the schema's ``FileDescriptorProto``."""
    return base64.b64encode(schema.obj.SerializeToString(deterministic=True)).decode()


class JsonSchemaFormat:
    schema_type = JSON

    def parse(
        self, text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
    ) -> ParsedSchema:
        import jsonschema

        obj = _json_text(text, "the JSON schema")
        if not isinstance(obj, dict | bool):
            raise SchemaParseError("a JSON schema is an object or a boolean")
        try:
            jsonschema.validators.validator_for(obj).check_schema(obj)
        except jsonschema.SchemaError as exc:
            path = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise SchemaParseError(f"invalid JSON schema at {path}: {exc.message}") from None
        return ParsedSchema(JSON, text, _compact(obj, sort_keys=normalize), obj, references)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        from streams.schemas.compat_jsonschema import jsonschema_incompatibilities

        return jsonschema_incompatibilities(
            reader.obj,
            writer.obj,
            {name: ref.obj for name, ref in _all_files(reader.references).items()},
            {name: ref.obj for name, ref in _all_files(writer.references).items()},
        )


FORMATS: dict[str, SchemaFormat] = {
    AVRO: AvroFormat(),
    PROTOBUF: ProtobufFormat(),
    JSON: JsonSchemaFormat(),
}
