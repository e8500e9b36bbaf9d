"""A topic's key or value mapped to a schema without the wire format (``streams.schemas.
mapping``): what the topic's schema page shows, and mapping or unmapping (operators; audited).

===============================  ===================  ========================================
action                           target               before / after
===============================  ===================  ========================================
topic.schema_mapping             topic T              the mapping replaced (or -) / the new
topic.schema_mapping_delete      topic T              the mapping / -
===============================  ===================  ========================================

A mapping in the audit log is its description: part, source, subject, version, schema id,
message type, and for an uploaded descriptor set its file name, size and SHA-256 (not its
bytes); for an Avro schema given as text, its SHA-256 too.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib

from brokerui.audit.services import Actor, AuditSink
from streams.schemas.mapping import (
    PARTS,
    SOURCES,
    MappingBook,
    MappingError,
    TopicMapping,
    avro_mapping,
    descriptor_set_mapping,
    descriptor_set_messages,
    registry_mapping,
)


@dataclasses.dataclass(frozen=True)
class MappingRequest:
    """What the mapping form sent."""

    part: str
    source: str
    subject: str = ""
    version: str = "latest"
    message: str = ""
    schema: str = ""  # an Avro schema's text
    descriptor_set: bytes | None = None  # an uploaded FileDescriptorSet
    file_name: str = ""


@dataclasses.dataclass(frozen=True)
class MappingsView:
    topic: str
    mappings: list[TopicMapping]
    registry: bool  # a registry to map to a registered version of


def mappings_read(*, cluster, book: MappingBook, topic: str, registry) -> MappingsView:
    """The topic's mappings (UnknownTopic for a topic the cluster does not have)."""
    cluster.describe_topic(topic)
    return MappingsView(topic, book.for_topic(topic), registry is not None)


def mapping_get(*, book: MappingBook, topic: str, part: str) -> TopicMapping | None:
    return book.get(topic, part)


def mapped_parts(*, book: MappingBook, topic: str) -> list[str]:
    """Which of the topic's parts are mapped, for its page ("key", "value")."""
    return [m.part for m in book.for_topic(topic)]


def audit_form(mapping: TopicMapping) -> dict:
    """A mapping as the audit log records it (see the module's docstring)."""
    out = {
        k: v
        for k, v in mapping.to_json().items()
        if k not in ("schema", "topic", "created_by", "created_ms")
    }
    if mapping.schema is not None:
        raw = (
            base64.b64decode(mapping.schema)
            if mapping.source == "descriptor-set"
            else mapping.schema.encode()
        )
        out["bytes"] = len(raw)
        out["sha256"] = hashlib.sha256(raw).hexdigest()
    return out


def mapping_set(
    *,
    book: MappingBook,
    registry,
    sink: AuditSink,
    actor: Actor,
    topic: str,
    request: MappingRequest,
) -> TopicMapping:
    """Map the topic's key or value (replacing a mapping it had); the mapping is checked
    before anything is kept: MappingError says what is wrong (a schema that does not parse, an
    unknown subject or version, a message type the schema lacks: with the ones it has)."""
    if request.part not in PARTS:
        raise MappingError(f"map the topic's key or value, not {request.part!r}")
    if request.source not in SOURCES:
        raise MappingError(f"the schema comes from {', '.join(SOURCES)}, not {request.source!r}")
    who = getattr(actor.user, "username", "") or ""
    if request.source == "registry":
        if registry is None:
            raise MappingError("there is no schema registry to map a registered version of")
        if not request.subject:
            raise MappingError("name the subject whose version the topic is read with")
        mapping = registry_mapping(
            registry,
            topic=topic,
            part=request.part,
            subject=request.subject,
            version=request.version or "latest",
            message=request.message or None,
            created_by=who,
        )
    elif request.source == "avro":
        if not request.schema.strip():
            raise MappingError("paste the Avro schema the topic's bytes are written with")
        mapping = avro_mapping(
            topic=topic, part=request.part, schema=request.schema, created_by=who
        )
    else:
        if not request.descriptor_set:
            raise MappingError(
                "upload the descriptor set (protoc --include_imports --descriptor_set_out=F)"
            )
        try:
            mapping = descriptor_set_mapping(
                topic=topic,
                part=request.part,
                data=request.descriptor_set,
                message=request.message,
                file_name=request.file_name,
                created_by=who,
            )
        except MappingError as exc:
            if "no message type" not in str(exc) and "names its message" not in str(exc):
                raise
            names = descriptor_set_messages(request.descriptor_set)
            raise MappingError(f"{exc}; the set has: {', '.join(names) or 'none'}") from None
    old = book.put(mapping)
    actor.record(
        sink,
        "topic.schema_mapping",
        f"topic {topic}",
        before=audit_form(old) if old is not None else None,
        after=audit_form(mapping),
    )
    return mapping


def mapping_remove(
    *, book: MappingBook, sink: AuditSink, actor: Actor, topic: str, part: str
) -> TopicMapping | None:
    """Unmap the topic's key or value (its bytes are read as before: the wire format, JSON,
    text or hex); None when it was not mapped (nothing is audited then)."""
    old = book.remove(topic, part)
    if old is not None:
        actor.record(sink, "topic.schema_mapping_delete", f"topic {topic}", before=audit_form(old))
    return old
