"""Which schema registry the console reads registry-encoded values with.

The built-in one (the broker's ``_schemas``) by default; an external registry when
``TIDELOG_SCHEMA_REGISTRY`` names one (with ``TIDELOG_SCHEMA_REGISTRY_AUTH=user:password`` for
HTTP Basic, Confluent's ``basic.auth.user.info``), which is how the console reads an external
cluster's Avro and Protobuf; on an external cluster without one, values are shown as bytes.
One decoder per process and registry, so schemas are fetched and parsed once per id.

A topic's key or value may also be mapped to a schema without the wire format
(``streams.schemas.mapping``): `console_reading` reads each topic with its mapping or the wire
format; on the built-in broker the broker's own book (which its panels read too), on an
external cluster a book in ``TIDELOG_DATA_DIR`` of the console's own.
"""

from __future__ import annotations

import threading

from django.conf import settings

from streams.schemas.mapping import MappingBook, TopicReading
from streams.schemas.wire import SchemaDecoder

_lock = threading.Lock()
_decoders: dict[object, SchemaDecoder] = {}
_readings: dict[object, TopicReading] = {}


def console_reading() -> TopicReading:
    """How the console reads each topic's keys and values (its mapping, else the wire
    format through the registry)."""
    from brokerui.cluster import is_external

    if not is_external() and not getattr(settings, "TIDELOG_SCHEMA_REGISTRY", None):
        from brokerui.broker import get_broker

        return get_broker().reading
    from brokerui.cluster import current

    decoder = console_decoder()
    entry = current()
    key = (
        getattr(settings, "TIDELOG_SCHEMA_REGISTRY", None),
        entry.name,
        entry.url,
        str(settings.TIDELOG_DATA_DIR),
    )
    with _lock:
        reading = _readings.get(key)
        if reading is None:
            reading = _readings[key] = TopicReading(decoder, _console_book())
        return reading


def _console_book() -> MappingBook:
    from pathlib import Path

    from brokerui.cluster import current, is_default
    from streams.broker.runtime import MAPPINGS_FILE

    entry = current()
    if entry.builtin:  # the built-in broker's, shared
        from brokerui.broker import get_broker

        return get_broker().reading.book
    # each external cluster its own file (the default one's keeps the one-cluster name)
    name = MAPPINGS_FILE if is_default(entry) else f"schema-mappings.{entry.name}.json"
    return MappingBook(Path(settings.TIDELOG_DATA_DIR) / name)


def mapping_book() -> MappingBook:
    """Where the console's topic mappings are kept (see the module's docstring)."""
    return console_reading().book  # type: ignore[return-value]


def console_decoder() -> SchemaDecoder | None:
    """The decoder for the console's values; None when there is no registry to ask."""
    url = getattr(settings, "TIDELOG_SCHEMA_REGISTRY", None)
    if url:
        return _cached(("remote", url), lambda: _remote(url))
    from brokerui.cluster import is_external

    if is_external():
        return None
    from brokerui.broker import get_broker

    return get_broker().schemas.decoder


def console_registry():
    """The registry the console reads and writes schemas with (see the module's docstring);
    None when there is none."""
    url = getattr(settings, "TIDELOG_SCHEMA_REGISTRY", None)
    if url:
        decoder = console_decoder()
        return decoder.source if decoder is not None else None
    from brokerui.cluster import is_external

    if is_external():
        return None
    from brokerui.broker import get_broker

    return get_broker().schemas


def value_encoder(subject: str, version: str):
    """A function writing a JSON value with `subject`'s `version` in the wire format (raises
    ``SchemaSerdeError`` saying why there is none); for the produce form."""
    from streams.schemas.serdes import SchemaSerdeError, version_serde

    registry = console_registry()
    if registry is None:
        raise SchemaSerdeError(
            "no schema registry: the console runs on an external cluster without "
            "TIDELOG_SCHEMA_REGISTRY"
        )
    return version_serde(registry, subject, version).serialize


def _remote(url: str) -> SchemaDecoder:
    from streams.schemas.remote import RemoteRegistry

    auth = getattr(settings, "TIDELOG_SCHEMA_REGISTRY_AUTH", None)
    return SchemaDecoder(RemoteRegistry(url, {"basic.auth.user.info": auth} if auth else {}))


def _cached(key, make) -> SchemaDecoder:
    with _lock:
        decoder = _decoders.get(key)
        if decoder is None:
            decoder = _decoders[key] = make()
        return decoder


def subject_names() -> list[str]:
    """The registry's subjects, for a form's suggestions ([] without a registry, or when it
    cannot be reached: suggestions are no reason to fail a page)."""
    registry = console_registry()
    if registry is None:
        return []
    try:
        return registry.subjects()
    except Exception:  # noqa: BLE001
        return []
