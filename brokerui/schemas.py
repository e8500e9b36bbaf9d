"""Which schema registry the console reads registry-encoded values with.

The built-in one (the broker's ``_schemas``) by default; an external registry when
``TIDELOG_SCHEMA_REGISTRY`` names one (with ``TIDELOG_SCHEMA_REGISTRY_AUTH=user:password`` for
HTTP Basic, Confluent's ``basic.auth.user.info``), which is how the console reads an external
cluster's Avro and Protobuf; on an external cluster without one, values are shown as bytes.
One decoder per process and registry, so schemas are fetched and parsed once per id.
"""

from __future__ import annotations

import threading

from django.conf import settings

from streams.schemas.wire import SchemaDecoder

_lock = threading.Lock()
_decoders: dict[object, SchemaDecoder] = {}


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
