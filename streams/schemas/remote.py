"""`RemoteRegistry`: an external schema registry (Confluent's, Karapace, or another Tidelog's)
as a `SchemaSource`, through confluent-kafka's own ``SchemaRegistryClient`` (which caches each
schema it fetches by id; the parsed schemas are cached here too)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from streams.schemas.errors import SchemaParseError
from streams.schemas.formats import FORMATS, ParsedSchema


class RemoteRegistry:
    """`SchemaSource` over a registry's REST API at `url`. `config` takes the client's
    settings (``basic.auth.user.info``, ``ssl.ca.location``, ``bearer.auth.*``...)."""

    def __init__(self, url: str, config: Mapping[str, str] | None = None):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        self.client = SchemaRegistryClient({"url": url, **dict(config or {})})
        self._lock = threading.Lock()
        self._parsed: dict[int, ParsedSchema] = {}
        self._versions: dict[tuple[str, int], ParsedSchema] = {}
        self._described: dict[int, tuple[str, int] | None] = {}

    def parsed(self, schema_id: int) -> ParsedSchema:
        with self._lock:
            hit = self._parsed.get(schema_id)
        if hit is None:
            hit = self._parse(self.client.get_schema(schema_id))
            with self._lock:
                self._parsed[schema_id] = hit
        return hit

    def describe(self, schema_id: int) -> tuple[str, int] | None:
        with self._lock:
            if schema_id in self._described:
                return self._described[schema_id]
        try:
            holders = self.client.get_schema_versions(schema_id)
        except Exception:  # noqa: BLE001 - only for display: the value is still shown
            holders = []
        found = (holders[0].subject, holders[0].version) if holders else None
        with self._lock:
            self._described[schema_id] = found
        return found

    def register_schema(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        from confluent_kafka.schema_registry import Schema

        return self.client.register_schema(subject, Schema(schema, schema_type))

    def latest_id(self, subject: str) -> int:
        return self.client.get_latest_version(subject).schema_id

    def subjects(self) -> list[str]:
        return sorted(self.client.get_subjects())

    def versions(self, subject: str) -> list[int]:
        return sorted(self.client.get_versions(subject))

    def version_id(self, subject: str, version: str | int) -> int:
        if str(version) == "latest":
            return self.latest_id(subject)
        return self.client.get_version(subject, int(version)).schema_id

    def _parse(self, schema) -> ParsedSchema:
        refs = {r.name: self._version(r.subject, r.version) for r in schema.references or ()}
        try:
            return FORMATS[schema.schema_type or "AVRO"].parse(schema.schema_str, refs)
        except SchemaParseError as exc:
            raise ValueError(f"the registry's schema does not parse: {exc}") from None

    def _version(self, subject: str, version: int) -> ParsedSchema:
        key = (subject, version)
        with self._lock:
            hit = self._versions.get(key)
        if hit is None:
            registered = self.client.get_version(subject, version)
            hit = self._parse(registered.schema)
            with self._lock:
                self._versions[key] = hit
        return hit
