"""`SchemaRegistry`: subjects, versions, ids, compatibility and modes, kept in ``_schemas``.

The registry's state is a fold of the compacted topic ``_schemas`` (one partition), in
Confluent Schema Registry's own layout, so that Confluent's registry or Karapace could read it:

==============  =============================================  ==================================
key type        key (JSON)                                     value (JSON)
==============  =============================================  ==================================
SCHEMA          {"keytype","subject","version","magic":1}      {"subject","version","id",
                                                               "schema", "schemaType" (not for
                                                               AVRO), "references", "deleted"};
                                                               null: deleted for good
CONFIG          {"keytype","subject" (null: global),"magic"}   {"compatibilityLevel"}; null: unset
MODE            {"keytype","subject" (null: global),"magic"}   {"mode"}; null: unset
DELETE_SUBJECT  {"keytype","subject","magic":0}                {"subject","version"}: versions up
                                                               to it are soft-deleted
==============  =============================================  ==================================

One process writes (the broker's; `SchemaRegistry` holds a lock around each change and applies
it to memory only once it is in the log), and every start rebuilds the state from the topic, so
ids and versions are stable across restarts. A schema's id is shared by every subject that
registers the same schema (same type, canonical text and references), as Confluent's are.

Thread-safe. Reads take the lock only to copy what they return.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from streams.log.keyed import COMPACTED, KeyedLog, StoreKeyedLog
from streams.schemas import errors as E
from streams.schemas.errors import SchemaParseError
from streams.schemas.formats import AVRO, FORMATS, SCHEMA_TYPES, ParsedSchema

SCHEMAS_TOPIC = "_schemas"
SCHEMAS_TOPIC_CONFIG = COMPACTED

BACKWARD, FORWARD, FULL, NONE = "BACKWARD", "FORWARD", "FULL", "NONE"
LEVELS = (
    BACKWARD,
    "BACKWARD_TRANSITIVE",
    FORWARD,
    "FORWARD_TRANSITIVE",
    FULL,
    "FULL_TRANSITIVE",
    NONE,
)
READWRITE, READONLY, READONLY_OVERRIDE, IMPORT = (
    "READWRITE",
    "READONLY",
    "READONLY_OVERRIDE",
    "IMPORT",
)
MODES = (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)


@dataclasses.dataclass(frozen=True)
class SchemaReference:
    name: str  # Avro: the full name of a type; Protobuf: the import path; JSON: the $ref URL
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclasses.dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject: what ``GET /subjects/{s}/versions/{v}`` answers."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def to_json(self) -> dict:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        return out


# Where the registry's records go: ``_schemas`` of the broker's log store (`StoreSchemaLog`),
# or any compacted single-partition log
SchemaLog = KeyedLog


class StoreSchemaLog(StoreKeyedLog):
    """`SchemaLog` over ``_schemas`` of a ``streams.log.LogStore`` (created when missing)."""

    def __init__(self, store, topic: str = SCHEMAS_TOPIC):
        super().__init__(store, topic, SCHEMAS_TOPIC_CONFIG)


def _key(keytype: str, subject: str | None, version: int | None = None) -> bytes:
    key: dict[str, Any] = {"keytype": keytype, "subject": subject}
    if version is not None:
        key["version"] = version
    key["magic"] = 1 if keytype == "SCHEMA" else 0
    return json.dumps(key, separators=(",", ":")).encode()


@dataclasses.dataclass
class _State:
    """What the log says: every version of every subject (deleted ones too), the schemas by
    id, and the configs and modes (None: the global one)."""

    versions: dict[str, dict[int, SchemaVersion]] = dataclasses.field(default_factory=dict)
    configs: dict[str | None, str] = dataclasses.field(default_factory=dict)
    modes: dict[str | None, str] = dataclasses.field(default_factory=dict)
    max_id: int = 0

    def apply(self, key: bytes, value: bytes | None) -> None:
        try:
            k = json.loads(key)
            v = json.loads(value) if value is not None else None
        except ValueError:
            return  # not one of ours (e.g. a NOOP of another writer): skipped
        kind, subject = k.get("keytype"), k.get("subject")
        if kind == "SCHEMA":
            self._apply_schema(subject, int(k["version"]), v)
        elif kind == "CONFIG":
            self._set(self.configs, subject, v and v.get("compatibilityLevel"))
        elif kind == "MODE":
            self._set(self.modes, subject, v and v.get("mode"))
        elif kind == "DELETE_SUBJECT" and v is not None:
            for ver in list(self.versions.get(subject, {}).values()):
                if ver.version <= int(v["version"]):
                    self.versions[subject][ver.version] = dataclasses.replace(ver, deleted=True)

    @staticmethod
    def _set(table: dict, subject: str | None, value: str | None) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _apply_schema(self, subject: str, version: int, v: dict | None) -> None:
        if v is None:
            self.versions.get(subject, {}).pop(version, None)
            return
        refs = tuple(
            SchemaReference(r["name"], r["subject"], int(r["version"]))
            for r in v.get("references") or ()
        )
        ver = SchemaVersion(
            subject,
            version,
            int(v["id"]),
            v.get("schemaType") or AVRO,
            v["schema"],
            refs,
            bool(v.get("deleted", False)),
        )
        self.versions.setdefault(subject, {})[version] = ver
        self.max_id = max(self.max_id, ver.id)


def schema_value(ver: SchemaVersion) -> bytes:
    out = ver.to_json()
    out["deleted"] = ver.deleted
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()


@dataclasses.dataclass(frozen=True)
class Registered:
    """The answer to a registration: the schema's id and the subject's version holding it."""

    id: int
    version: int
    new: bool  # False: the subject had this schema already (nothing was written)


class SchemaRegistry:
    """The registry over a `SchemaLog` (see the module's docstring for its layout)."""

    def __init__(self, log: SchemaLog):
        self._log = log
        self._lock = threading.RLock()
        self._state = _State()
        self._parsed: dict[int, ParsedSchema] = {}  # id -> parsed, filled on first use
        self._decoder = None
        for key, value in log.records():
            self._state.apply(key, value)

    @property
    def decoder(self):
        """The `streams.schemas.wire.SchemaDecoder` over this registry (one, so each id's
        reader is built once; ids are never reused, so its cache never goes stale)."""
        with self._lock:
            if self._decoder is None:
                from streams.schemas.wire import SchemaDecoder

                self._decoder = SchemaDecoder(self)
            return self._decoder

    # -- writes -----------------------------------------------------------------------------

    def _write(self, key: bytes, value: bytes | None) -> None:
        try:
            self._log.append(key, value)
        except Exception as exc:  # the log said no: nothing changed
            raise E.StoreError(f"could not write to {SCHEMAS_TOPIC}: {exc}") from exc
        self._state.apply(key, value)

    def register(
        self,
        subject: str,
        schema: str,
        schema_type: str = AVRO,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> Registered:
        """Register `schema` under `subject` (``POST /subjects/{s}/versions``): the existing
        version when the subject has this schema already, else a new version once it is
        compatible with the subject's versions under its level. `schema_id` and `version`
        are taken only in IMPORT mode."""
        _check_subject(subject)
        with self._lock:
            mode = self.mode(subject)
            if mode in (READONLY, READONLY_OVERRIDE):
                raise E.OperationNotPermitted(f"Subject {subject} is in read-only mode")
            parsed = self.parse(schema, schema_type, references, normalize=normalize)
            live = self._live_versions(subject)
            for ver in reversed(live):
                if self._same(ver, parsed, references, normalize):
                    return Registered(ver.id, ver.version, False)
            if mode == IMPORT:
                return self._import(subject, parsed, references, schema_id, version)
            if schema_id is not None or version is not None:
                raise E.OperationNotPermitted(
                    "a schema id or version can be given only in IMPORT mode"
                )
            problems = self._incompatibilities(subject, parsed, live)
            if problems:
                raise E.IncompatibleSchema(
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: [{"; ".join(problems)}]'
                )
            new_id = self._id_of(parsed, references, normalize) or self._state.max_id + 1
            return self._add(subject, new_id, None, parsed, references)

    def _import(self, subject, parsed, references, schema_id, version) -> Registered:
        if schema_id is None:
            raise E.InvalidSchema("IMPORT mode needs the schema's id")
        held = self._state_schema(schema_id)
        if held is not None and held.schema != parsed.text:
            raise E.OperationNotPermitted(
                f"Overwrite new schema with id {schema_id} is not permitted."
            )
        return self._add(subject, schema_id, version, parsed, references)

    def _add(self, subject, schema_id, version, parsed, references) -> Registered:
        existing = self._state.versions.get(subject, {})
        version = version or max(existing, default=0) + 1
        if version in existing:
            raise E.InvalidVersion(f"subject {subject!r} has a version {version} already")
        ver = SchemaVersion(
            subject, version, schema_id, parsed.schema_type, parsed.text, tuple(references)
        )
        self._write(_key("SCHEMA", subject, version), schema_value(ver))
        self._parsed[schema_id] = parsed
        return Registered(schema_id, version, True)

    def register_schema(self, subject: str, schema: str, schema_type: str = AVRO) -> int:
        """The id of `schema` under `subject`, registered if it is not there (a serde's
        ``auto.register.schemas``)."""
        return self.register(subject, schema, schema_type).id

    def latest_id(self, subject: str) -> int:
        """The schema id of the subject's latest version (a serde's ``use.latest.version``)."""
        return self.version(subject, "latest").id

    def version_id(self, subject: str, version: str | int) -> int:
        return self.version(subject, version).id

    def delete_version(self, subject: str, version: str | int, *, permanent: bool) -> int:
        """Soft-delete a version, or (`permanent`, once soft-deleted) remove it for good;
        refused (42206) while another schema references it."""
        with self._lock:
            self._check_writable(subject)
            ver = self.version(subject, version, deleted=permanent)
            if permanent and not ver.deleted:
                raise E.VersionNotSoftDeleted(
                    f"Subject '{subject}' Version {ver.version} was not deleted first before "
                    "being permanently deleted"
                )
            referrers = self.referenced_by(subject, ver.version)
            if referrers:
                raise E.ReferenceExists(
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={ver.version}}} (ids {referrers})"
                )
            key = _key("SCHEMA", subject, ver.version)
            if permanent:
                self._write(key, None)
            else:
                self._write(key, schema_value(dataclasses.replace(ver, deleted=True)))
            return ver.version

    def delete_subject(self, subject: str, *, permanent: bool) -> list[int]:
        """Soft-delete every version of `subject` (its config and mode go with it), or
        (`permanent`, once soft-deleted) remove them for good. Returns the versions."""
        with self._lock:
            self._check_writable(subject)
            every = sorted(self._state.versions.get(subject, {}).values(), key=_by_version)
            live = [v for v in every if not v.deleted]
            if not every:
                raise E.SubjectNotFound(f"Subject '{subject}' not found.")
            if permanent and live:
                raise E.SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            if not permanent and not live:
                raise E.SubjectSoftDeleted(f"Subject '{subject}' was soft deleted.")
            for ver in every:
                referrers = self.referenced_by(subject, ver.version)
                if referrers:
                    raise E.ReferenceExists(
                        f"One or more references exist to the schema {{subject={subject}, "
                        f"version={ver.version}}} (ids {referrers})"
                    )
            if permanent:
                for ver in every:
                    self._write(_key("SCHEMA", subject, ver.version), None)
                self._write(_key("DELETE_SUBJECT", subject), None)
                return [v.version for v in every]
            value = {"subject": subject, "version": live[-1].version}
            for ver in live:
                deleted = dataclasses.replace(ver, deleted=True)
                self._write(_key("SCHEMA", subject, ver.version), schema_value(deleted))
            self._write(_key("DELETE_SUBJECT", subject), json.dumps(value).encode())
            for table, keytype in ((self._state.configs, "CONFIG"), (self._state.modes, "MODE")):
                if subject in table:
                    self._write(_key(keytype, subject), None)
            return [v.version for v in live]

    def set_config(self, subject: str | None, level: str) -> str:
        level = str(level).upper()
        if level not in LEVELS:
            raise E.InvalidCompatibilityLevel(
                f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}"
            )
        with self._lock:
            self._check_writable(subject)
            self._write(_key("CONFIG", subject), json.dumps({"compatibilityLevel": level}).encode())
        return level

    def delete_config(self, subject: str | None) -> str:
        """Unset a subject's level (it then follows the global one) or reset the global one to
        BACKWARD; returns the level it had."""
        with self._lock:
            before = self.config(subject, default_to_global=subject is None)
            self._write(_key("CONFIG", subject), None)
            return before

    def set_mode(self, subject: str | None, mode: str, *, force: bool = False) -> str:
        mode = str(mode).upper()
        if mode not in MODES:
            raise E.InvalidMode(f"Invalid mode. Valid values are {', '.join(MODES)}")
        with self._lock:
            has_schemas = (
                any(self._live_versions(s) for s in self.subjects())
                if (subject is None)
                else bool(self._live_versions(subject))
            )
            if mode == IMPORT and has_schemas and not force:
                raise E.OperationNotPermitted(
                    "Cannot import since found existing subjects (use force=true to override)"
                )
            self._write(_key("MODE", subject), json.dumps({"mode": mode}).encode())
        return mode

    def delete_mode(self, subject: str) -> str:
        with self._lock:
            before = self.mode(subject)
            self._write(_key("MODE", subject), None)
            return before

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) == READONLY:
            raise E.OperationNotPermitted(f"Subject {subject} is in read-only mode")

    # -- reads ------------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(
                s
                for s, vers in self._state.versions.items()
                if s.startswith(prefix) and any(deleted or not v.deleted for v in vers.values())
            )

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        with self._lock:
            vers = self._subject(subject, deleted)
            return sorted(v.version for v in vers if deleted or not v.deleted)

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> SchemaVersion:
        """A subject's version: a number, or ``latest`` / -1 (the newest not deleted)."""
        number = _version_number(version)
        with self._lock:
            vers = self._subject(subject, deleted)
            if number == -1:
                live = [v for v in vers if not v.deleted] or (vers if deleted else [])
                if not live:
                    raise E.VersionNotFound(f"Version latest not found for subject {subject!r}.")
                return max(live, key=_by_version)
            for ver in vers:
                if ver.version == number and (deleted or not ver.deleted):
                    return ver
            raise E.VersionNotFound(f"Version {number} not found.")

    def _subject(self, subject: str, deleted: bool) -> list[SchemaVersion]:
        vers = list(self._state.versions.get(subject, {}).values())
        if not vers or not (deleted or any(not v.deleted for v in vers)):
            raise E.SubjectNotFound(f"Subject '{subject}' not found.")
        return vers

    def _live_versions(self, subject: str) -> list[SchemaVersion]:
        vers = self._state.versions.get(subject, {}).values()
        return sorted((v for v in vers if not v.deleted), key=_by_version)

    def _state_schema(self, schema_id: int) -> SchemaVersion | None:
        for vers in self._state.versions.values():
            for ver in vers.values():
                if ver.id == schema_id:
                    return ver
        return None

    def schema(self, schema_id: int, *, subject: str | None = None) -> SchemaVersion:
        """A version that holds the schema with this id (``GET /schemas/ids/{id}``): of
        `subject` when given and it has one, else of any subject, deleted ones included."""
        with self._lock:
            holders = self.holders(schema_id, deleted=True)
            if not holders:
                raise E.SchemaNotFound(f"Schema {schema_id} not found")
            if subject is not None:
                holders = [h for h in holders if h.subject == subject] or holders
            return holders[0]

    def holders(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        """Every (subject, version) holding the schema with this id."""
        with self._lock:
            return sorted(
                (
                    ver
                    for vers in self._state.versions.values()
                    for ver in vers.values()
                    if ver.id == schema_id and (deleted or not ver.deleted)
                ),
                key=lambda v: (v.subject, v.version),
            )

    def subject_ids(self, subject: str) -> frozenset[int]:
        """The schema ids of the subject's live versions (a produce's schema validation)."""
        with self._lock:
            vers = self._state.versions.get(subject, {}).values()
            return frozenset(v.id for v in vers if not v.deleted)

    def describe(self, schema_id: int) -> tuple[str, int] | None:
        """The first live (subject, version) holding the id (else a deleted one), for
        display; None for an unknown id."""
        holders = self.holders(schema_id) or self.holders(schema_id, deleted=True)
        return (holders[0].subject, holders[0].version) if holders else None

    def all_versions(self, *, deleted: bool = False, latest_only: bool = False, prefix: str = ""):
        """Every version of every subject (``GET /schemas``)."""
        with self._lock:
            out = []
            for subject in self.subjects(deleted=deleted, prefix=prefix):
                vers = sorted(self._state.versions[subject].values(), key=_by_version)
                vers = [v for v in vers if deleted or not v.deleted]
                out.extend(vers[-1:] if latest_only else vers)
            return out

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of the live schemas that reference (subject, version)."""
        with self._lock:
            return sorted(
                {
                    ver.id
                    for vers in self._state.versions.values()
                    for ver in vers.values()
                    if not ver.deleted
                    and any(r.subject == subject and r.version == version for r in ver.references)
                }
            )

    def config(self, subject: str | None = None, *, default_to_global: bool = True) -> str:
        with self._lock:
            level = self._state.configs.get(subject)
            if level is None and subject is not None and not default_to_global:
                raise E.SubjectConfigNotFound(
                    f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            return level or self._state.configs.get(None, BACKWARD)

    def mode(self, subject: str | None = None, *, default_to_global: bool = True) -> str:
        with self._lock:
            mode = self._state.modes.get(subject)
            if mode is None and subject is not None and not default_to_global:
                raise E.SubjectModeNotFound(f"Subject '{subject}' does not have subject-level mode")
            return mode or self._state.modes.get(None, READWRITE)

    def lookup(
        self,
        subject: str,
        schema: str,
        schema_type: str = AVRO,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
        deleted: bool = False,
    ) -> SchemaVersion:
        """The subject's version holding this schema (``POST /subjects/{s}``)."""
        with self._lock:
            vers = self._subject(subject, deleted)
            parsed = self.parse(schema, schema_type, references, normalize=normalize)
            for ver in sorted(vers, key=_by_version, reverse=True):
                if (deleted or not ver.deleted) and self._same(ver, parsed, references, normalize):
                    return ver
            raise E.SchemaNotFound("Schema not found")

    def check_compatibility(
        self,
        subject: str,
        version: str | int | None,
        schema: str,
        schema_type: str = AVRO,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
    ) -> list[str]:
        """Why `schema` could not be registered under `subject` ([] when it could), against
        one version (`version`) or, with None, the versions its level compares with."""
        with self._lock:
            parsed = self.parse(schema, schema_type, references, normalize=normalize)
            if version is None:
                live = self._live_versions(subject)
                return self._incompatibilities(subject, parsed, live)
            against = self.version(subject, version)
            level = self.config(subject).replace("_TRANSITIVE", "")
            return self._against(level, parsed, [against])

    # -- parsing and the rules --------------------------------------------------------------

    def parse(
        self,
        schema: str,
        schema_type: str = AVRO,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
    ) -> ParsedSchema:
        """Parse `schema` with its references; an invalid one raises 42201 saying where."""
        schema_type = (schema_type or AVRO).upper()
        if schema_type not in SCHEMA_TYPES:
            raise E.InvalidSchema(f"Invalid schema type {schema_type!r}: use one of {SCHEMA_TYPES}")
        if not isinstance(schema, str) or not schema.strip():
            raise E.InvalidSchema("Empty schema")
        refs = {r.name: self._resolve(r) for r in references}
        try:
            return FORMATS[schema_type].parse(schema, refs, normalize=normalize)
        except SchemaParseError as exc:
            raise E.InvalidSchema(f"Invalid schema: {exc}") from None

    def parsed(self, schema_id: int) -> ParsedSchema:
        """The parsed schema with this id (cached: a schema never changes under its id)."""
        with self._lock:
            hit = self._parsed.get(schema_id)
            if hit is None:
                ver = self.schema(schema_id)
                hit = self.parse(ver.schema, ver.schema_type, ver.references)
                self._parsed[schema_id] = hit
            return hit

    def _resolve(self, ref: SchemaReference) -> ParsedSchema:
        try:
            ver = self.version(ref.subject, ref.version, deleted=True)
        except (E.SubjectNotFound, E.VersionNotFound):
            raise E.InvalidSchema(
                f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} version "
                f"{ref.version}, which is not registered"
            ) from None
        return self.parsed(ver.id)

    def _same(self, ver: SchemaVersion, parsed: ParsedSchema, refs, normalize: bool) -> bool:
        """Is `ver` the schema `parsed` (same type, references and canonical text)?"""
        if ver.schema_type != parsed.schema_type or ver.references != tuple(refs):
            return False
        if ver.schema == parsed.text:
            return True
        held = self.parsed(ver.id)
        if normalize:
            held = FORMATS[held.schema_type].parse(held.text, held.references, normalize=True)
        return held.canonical == parsed.canonical

    def _id_of(self, parsed: ParsedSchema, references, normalize: bool) -> int | None:
        for vers in self._state.versions.values():
            for ver in vers.values():
                if self._same(ver, parsed, references, normalize):
                    return ver.id
        return None

    def _incompatibilities(
        self, subject: str, parsed: ParsedSchema, live: list[SchemaVersion]
    ) -> list[str]:
        level = self.config(subject)
        if level == NONE or not live:
            return []
        against = live if level.endswith("_TRANSITIVE") else live[-1:]
        return self._against(level.replace("_TRANSITIVE", ""), parsed, against)

    def _against(self, level: str, parsed: ParsedSchema, against: list[SchemaVersion]):
        fmt = FORMATS[parsed.schema_type]
        problems: list[str] = []
        for ver in reversed(against):
            if ver.schema_type != parsed.schema_type:
                problems.append(
                    f"version {ver.version} is {ver.schema_type}, not {parsed.schema_type}"
                )
                continue
            old = self.parsed(ver.id)
            if level in (BACKWARD, FULL):  # the new schema reads what the old one wrote
                problems += [
                    f"{p} (new reads version {ver.version})"
                    for p in fmt.incompatibilities(parsed, old)
                ]
            if level in (FORWARD, FULL):  # the old schema reads what the new one writes
                problems += [
                    f"{p} (version {ver.version} reads new)"
                    for p in fmt.incompatibilities(old, parsed)
                ]
        return problems


def _by_version(ver: SchemaVersion) -> int:
    return ver.version


def _version_number(version: str | int) -> int:
    if isinstance(version, int):
        number = version
    elif str(version) == "latest":
        return -1
    else:
        try:
            number = int(str(version))
        except ValueError:
            number = 0
    if number == -1:
        return -1
    if number < 1 or number > 2**31 - 1:
        raise E.InvalidVersion(
            f"The specified version '{version}' is not a valid version id. Allowed values are "
            'between [1, 2^31-1] and the string "latest"'
        )
    return number


def _check_subject(subject: str) -> None:
    if not subject or not subject.strip() or any(ord(c) < 32 for c in subject):
        raise E.InvalidSchema(f"Invalid subject {subject!r}")


def parse_references(raw: Any) -> tuple[SchemaReference, ...]:
    """A request's ``references`` (a list of {name, subject, version})."""
    if raw in (None, []):
        return ()
    if not isinstance(raw, list):
        raise E.InvalidSchema("references must be a list of {name, subject, version}")
    out = []
    for r in raw:
        if not isinstance(r, Mapping) or not all(k in r for k in ("name", "subject", "version")):
            raise E.InvalidSchema("a reference has a name, a subject and a version")
        try:
            out.append(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])))
        except (TypeError, ValueError):
            raise E.InvalidSchema(f"a reference's version must be a number: {r!r}") from None
    return tuple(out)
