"""The built-in schema registry for the console: what the Schemas pages show, the check run as
an operator types a schema, and the changes (register, compatibility level, deletes).

Every function takes the registry (``brokerui.broker.get_broker().schemas``, a
``streams.schemas.SchemaRegistry``), or the `SchemaHost` holding it where the page also shows
topics or the registry's address. Reads never raise the registry's errors for input a user typed
(a schema that does not parse is a `CheckResult`); an unknown subject or version raises
``SubjectNotFound`` / ``VersionNotFound`` (the views answer 404). Changes raise the registry's
own `RegistryError` (``.status``: 409 incompatible, 422 invalid or refused, 404 not found) and
write nothing then.

Each change writes one audit record through the `AuditSink` given, with the registry REST API's
action, target and payload (``streams.schemas.rest``), so a change made here reads like one made
by a Confluent client (source ``console`` instead of ``registry``):

===============================  ===================================  =========================
action                           target                               before / after
===============================  ===================================  =========================
schema.register                  subject S                            - / id, version,
                                                                      schemaType (only when new)
schema.config                    subject S                            compatibility / the same
schema.config_delete             subject S                            compatibility / -
schema.delete                    subject S version N                  version / -
schema.delete_permanent          subject S version N                  version / -
schema.subject_delete            subject S                            versions / -
schema.subject_delete_permanent  subject S                            versions / -
===============================  ===================================  =========================
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import difflib
import json
import re
import time
from collections.abc import Collection, Sequence
from typing import Protocol

from brokerui.audit.services import Actor, AuditSink
from streams.schemas import errors as E
from streams.schemas.formats import AVRO, JSON, PROTOBUF, SCHEMA_TYPES
from streams.schemas.registry import (
    LEVELS,
    NONE,
    READONLY,
    READONLY_OVERRIDE,
    SchemaReference,
    SchemaRegistry,
    SchemaVersion,
)

UNAVAILABLE = (
    "The Schemas pages manage the schema registry built into Tidelog's broker; the console runs "
    "on an external cluster (TIDELOG_CLUSTER), whose registry is managed by its own tools."
)
SNIPPET = """from confluent_kafka.schema_registry import SchemaRegistryClient

client = SchemaRegistryClient({{
    "url": "{url}",
    "basic.auth.user.info": "{user}:<password>",  # or an API token: bearer.auth.*
}})
print(client.get_subjects())"""


class SchemaHost(Protocol):
    """What the pages need of ``streams.broker.runtime.Broker``."""

    @property
    def schemas(self) -> SchemaRegistry: ...

    @property
    def registry_address(self) -> tuple[str, int] | None: ...

    @property
    def store(self): ...


def schema_host() -> SchemaHost | None:
    """The built-in broker (its registry); None on an external cluster, which has no
    registry of Tidelog's to manage."""
    from brokerui.cluster import is_external

    if is_external():
        return None
    from brokerui.broker import get_broker

    return get_broker()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _subject_target(subject: str) -> str:
    return f"subject {subject}"


def _version_target(subject: str, version: int) -> str:
    return f"subject {subject} version {version}"


def registry_url(host: SchemaHost) -> str | None:
    """Where clients reach the registry (``http://127.0.0.1:8081``); None when it is off."""
    address = host.registry_address
    return None if address is None else f"http://{address[0]}:{address[1]}"


def topics_of(subject: str, topic_names: Collection[str]) -> tuple[str, ...]:
    """The topic whose values or keys the subject describes under Confluent's default
    TopicNameStrategy (``<topic>-value``, ``<topic>-key``), when that topic exists."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and subject[: -len(suffix)] in topic_names:
            return (subject[: -len(suffix)],)
    return ()


def _topic_names(host: SchemaHost) -> set[str]:
    return set(host.store.list_topics(True))


# ====================================================================== the subjects


@dataclasses.dataclass(frozen=True)
class SubjectRow:
    subject: str
    schema_type: str
    latest_version: int
    version_count: int
    latest_id: int
    level: str  # the level that applies: the subject's own, else the global one
    own_level: bool
    topics: tuple[str, ...]
    deleted: bool  # every version soft-deleted (listed with "show soft-deleted" only)
    deleted_count: int = 0  # its soft-deleted versions

    @property
    def level_text(self) -> str:
        return self.level if self.own_level else f"{self.level} (global)"


@dataclasses.dataclass(frozen=True)
class SubjectsView:
    rows: list[SubjectRow]
    total: int  # subjects with a live version (before the filter)
    global_level: str
    global_mode: str
    url: str | None  # the registry's REST API, None when it is not served
    snippet: str | None
    q: str
    deleted: bool
    as_of_ms: int


def subjects_read(
    *, host: SchemaHost, q: str = "", deleted: bool = False, user: str = ""
) -> SubjectsView:
    """The subjects (those whose every version is soft-deleted too with `deleted`), filtered
    by `q` (a case-insensitive part of the name), with the registry's global level and mode
    and its address for clients (`user` fills in the snippet's user name)."""
    registry = host.schemas
    names = _topic_names(host)
    needle = q.strip().lower()
    rows = []
    for subject in registry.subjects(deleted=deleted):
        if needle and needle not in subject.lower():
            continue
        rows.append(_subject_row(registry, subject, names))
    url = registry_url(host)
    return SubjectsView(
        rows=rows,
        total=len(registry.subjects()),
        global_level=registry.config(None),
        global_mode=registry.mode(None),
        url=url,
        snippet=SNIPPET.format(url=url, user=user or "<user>") if url else None,
        q=q,
        deleted=deleted,
        as_of_ms=_now_ms(),
    )


def _own_level(registry: SchemaRegistry, subject: str) -> str | None:
    try:
        return registry.config(subject, default_to_global=False)
    except E.SubjectConfigNotFound:
        return None


def _subject_row(registry: SchemaRegistry, subject: str, topic_names) -> SubjectRow:
    every = registry.versions(subject, deleted=True)
    live = registry.versions(subject) if _has_live(registry, subject) else []
    latest = registry.version(subject, "latest", deleted=not live)
    own = _own_level(registry, subject)
    return SubjectRow(
        subject=subject,
        schema_type=latest.schema_type,
        latest_version=latest.version,
        version_count=len(live) if live else len(every),
        latest_id=latest.id,
        level=own or registry.config(None),
        own_level=own is not None,
        topics=topics_of(subject, topic_names),
        deleted=not live,
        deleted_count=len(every) - len(live),
    )


def _every_version(registry: SchemaRegistry, subject: str) -> list[SchemaVersion]:
    """Every version of the subject, soft-deleted ones too, oldest first."""
    return [
        registry.version(subject, v, deleted=True) for v in registry.versions(subject, deleted=True)
    ]


def _has_live(registry: SchemaRegistry, subject: str) -> bool:
    return subject in registry.subjects(prefix=subject)


# ====================================================================== one subject


def pretty_schema(ver: SchemaVersion) -> tuple[str, str]:
    """(the schema as shown, how it is shown): JSON indented for Avro and JSON Schema; a
    Protobuf schema as its .proto text, or a serialized descriptor (what Confluent's clients
    register) in protobuf's text format."""
    if ver.schema_type in (AVRO, JSON):
        try:
            return json.dumps(json.loads(ver.schema), indent=2, ensure_ascii=False), "JSON"
        except ValueError:
            return ver.schema, "as registered"
    descriptor = _descriptor(ver.schema)
    if descriptor is not None:
        from google.protobuf import text_format

        return text_format.MessageToString(descriptor), "serialized descriptor, as text"
    return ver.schema.strip("\n"), ".proto"


def _descriptor(text: str):
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(stripped, validate=True)
        )
    except (binascii.Error, ValueError, DecodeError):
        return None
    return file if file.message_type or file.enum_type or file.name else None


@dataclasses.dataclass(frozen=True)
class ReferenceLink:
    """A reference of the shown version, or a version referencing it: where to link."""

    name: str  # the reference's name ("" for a referrer)
    subject: str
    version: int
    exists: bool  # the subject still has that version (a soft-deleted one counts)
    schema_id: int | None = None


@dataclasses.dataclass(frozen=True)
class DiffRow:
    kind: str  # same, changed, removed, added
    left_no: int | None
    left: str
    right_no: int | None
    right: str


@dataclasses.dataclass(frozen=True)
class SchemaDiff:
    left: SchemaVersion
    right: SchemaVersion
    rows: list[DiffRow]
    added: int  # lines only on the right, or changed
    removed: int  # lines only on the left, or changed

    @property
    def identical(self) -> bool:
        return not self.added and not self.removed


def diff_lines(left: list[str], right: list[str]) -> list[DiffRow]:
    """A line diff (difflib) as the rows of a two-column table: a replaced block pairs its
    lines as ``changed``, the rest of the longer side as ``removed`` / ``added``."""
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                rows.append(DiffRow("same", i + 1, left[i], j + 1, right[j]))
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for k in range(pairs):
            rows.append(DiffRow("changed", i1 + k + 1, left[i1 + k], j1 + k + 1, right[j1 + k]))
        for i in range(i1 + pairs, i2):
            rows.append(DiffRow("removed", i + 1, left[i], None, ""))
        for j in range(j1 + pairs, j2):
            rows.append(DiffRow("added", None, "", j + 1, right[j]))
    return rows


def _diff(left: SchemaVersion, right: SchemaVersion) -> SchemaDiff:
    rows = diff_lines(pretty_schema(left)[0].splitlines(), pretty_schema(right)[0].splitlines())
    return SchemaDiff(
        left=left,
        right=right,
        rows=rows,
        added=sum(r.kind in ("added", "changed") for r in rows),
        removed=sum(r.kind in ("removed", "changed") for r in rows),
    )


@dataclasses.dataclass(frozen=True)
class VersionRow:
    version: SchemaVersion
    size_bytes: int
    referenced: bool  # a live schema references it (it cannot be deleted)


@dataclasses.dataclass(frozen=True)
class SubjectView:
    subject: str
    versions: list[VersionRow]  # oldest first; soft-deleted ones with `deleted`
    selected: SchemaVersion
    pretty: str
    shown_as: str
    references: list[ReferenceLink]
    referenced_by: list[ReferenceLink]
    level: str
    own_level: bool
    global_level: str
    mode: str
    topics: tuple[str, ...]
    live_count: int
    deleted_count: int
    show_deleted: bool
    diff: SchemaDiff | None  # None: fewer than two versions to compare
    as_of_ms: int
    levels: tuple[str, ...] = LEVELS

    @property
    def all_deleted(self) -> bool:
        return self.live_count == 0

    @property
    def level_text(self) -> str:
        return self.level if self.own_level else f"{self.level} (global)"

    @property
    def level_parts(self) -> list[str]:
        """The level split at its underscores (where a narrow box may wrap it)."""
        return self.level.split("_")

    @property
    def mode_parts(self) -> list[str]:
        return self.mode.split("_")

    @property
    def writable(self) -> bool:
        return self.mode not in (READONLY, READONLY_OVERRIDE)

    @property
    def latest(self) -> SchemaVersion:
        return self.versions[-1].version


def _number(raw, default: int | None) -> int | None:
    if raw in (None, ""):
        return default
    try:
        return int(str(raw))
    except ValueError:
        raise E.VersionNotFound(f"Version {raw!r} not found.") from None


def subject_read(
    *,
    host: SchemaHost,
    subject: str,
    version=None,
    left=None,
    right=None,
    deleted: bool = False,
) -> SubjectView:
    """A subject's versions, one of them (`version`, default the latest) shown with its
    references and referrers, and two of them (`left`, `right`: default the one before the
    latest and the latest) compared. Soft-deleted versions are listed with `deleted`, and
    always when the subject has no other. Raises SubjectNotFound, VersionNotFound."""
    registry = host.schemas
    every = _every_version(registry, subject)
    live = [v for v in every if not v.deleted]
    shown = every if (deleted or not live) else live
    by_number = {v.version: v for v in shown}
    number = _number(version, shown[-1].version if not live else live[-1].version)
    if number not in by_number:
        raise E.VersionNotFound(f"Version {number} not found.")
    selected = by_number[number]
    pretty, shown_as = pretty_schema(selected)
    own = _own_level(registry, subject)
    diff = None
    if len(shown) >= 2:
        r = _number(right, shown[-1].version)
        lv = _number(left, shown[-2].version if r == shown[-1].version else None)
        if lv is None:  # the right side picked: the version before it
            before = [v.version for v in shown if v.version < r]
            lv = before[-1] if before else shown[0].version
        if lv not in by_number or r not in by_number:
            raise E.VersionNotFound(f"Version {lv if lv not in by_number else r} not found.")
        diff = _diff(by_number[lv], by_number[r])
    return SubjectView(
        subject=subject,
        versions=[
            VersionRow(v, len(v.schema.encode()), bool(registry.referenced_by(subject, v.version)))
            for v in shown
        ],
        selected=selected,
        pretty=pretty,
        shown_as=shown_as,
        references=[_reference(registry, r) for r in selected.references],
        referenced_by=_referrers(registry, subject, selected.version),
        level=own or registry.config(None),
        own_level=own is not None,
        global_level=registry.config(None),
        mode=registry.mode(subject),
        topics=topics_of(subject, _topic_names(host)),
        live_count=len(live),
        deleted_count=len(every) - len(live),
        show_deleted=deleted,
        diff=diff,
        as_of_ms=_now_ms(),
    )


def schema_diff(*, host: SchemaHost, subject: str, left, right, deleted: bool = False):
    """Two versions of a subject compared (the detail page's diff, for its htmx refresh);
    None when the subject has one version. Raises SubjectNotFound, VersionNotFound."""
    return subject_read(host=host, subject=subject, left=left, right=right, deleted=deleted).diff


def _reference(registry: SchemaRegistry, ref: SchemaReference) -> ReferenceLink:
    try:
        ver = registry.version(ref.subject, ref.version, deleted=True)
    except (E.SubjectNotFound, E.VersionNotFound):
        return ReferenceLink(ref.name, ref.subject, ref.version, False)
    return ReferenceLink(ref.name, ref.subject, ref.version, True, ver.id)


def _referrers(registry: SchemaRegistry, subject: str, version: int) -> list[ReferenceLink]:
    return [
        ReferenceLink("", h.subject, h.version, True, h.id)
        for schema_id in registry.referenced_by(subject, version)
        for h in registry.holders(schema_id)
    ]


# ====================================================================== registering


def parse_reference_lines(registry: SchemaRegistry, text: str) -> tuple[SchemaReference, ...]:
    """References typed one per line as ``name subject version`` (version: a number or
    ``latest``, taken as the subject's latest version now); blank lines and ``#`` comments
    are skipped. Raises InvalidSchema naming the line."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3:
            raise E.InvalidSchema(
                f"reference line {n}: expected 'name subject version', got {raw.strip()!r}"
            )
        name, subject, version = parts
        if version == "latest":
            try:
                number = registry.version(subject, "latest").version
            except E.RegistryError:
                raise E.InvalidSchema(
                    f"reference line {n}: subject {subject!r} has no version"
                ) from None
        else:
            try:
                number = int(version)
            except ValueError:
                raise E.InvalidSchema(
                    f"reference line {n}: the version must be a number or 'latest', not {version!r}"
                ) from None
        out.append(SchemaReference(name, subject, number))
    return tuple(out)


def _references(registry, references) -> tuple[SchemaReference, ...]:
    if isinstance(references, str):
        return parse_reference_lines(registry, references)
    return tuple(references)


WHERE = re.compile(r"\(line (\d+), column (\d+)\)")


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What registering the typed schema would do, as the form shows it while one types."""

    state: str  # empty, ok, same, incompatible, invalid, refused
    message: str
    problems: tuple[str, ...] = ()
    level: str = ""
    against: tuple[int, ...] = ()  # the versions it was checked against
    line: int | None = None  # where a parse error is (1-based), when the parser says
    column: int | None = None
    excerpt: str = ""  # that line of the schema
    next_version: int | None = None

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "same")

    @property
    def caret(self) -> str:
        """Spaces up to the column, under `excerpt`."""
        return " " * max(0, (self.column or 1) - 1) + "^"


def _versions_text(numbers: Sequence[int]) -> str:
    if len(numbers) == 1:
        return f"version {numbers[0]}"
    if list(numbers) == list(range(numbers[0], numbers[-1] + 1)):
        return f"versions {numbers[0]}–{numbers[-1]}"
    return "versions " + ", ".join(str(n) for n in numbers)


def _invalid(exc: E.RegistryError, schema: str) -> CheckResult:
    m = WHERE.search(exc.message)
    if m is None:
        return CheckResult("invalid", exc.message)
    line, column = int(m.group(1)), int(m.group(2))
    lines = schema.splitlines()
    excerpt = lines[line - 1] if 0 < line <= len(lines) else ""
    message = WHERE.sub("", exc.message).rstrip()
    return CheckResult("invalid", message, line=line, column=column, excerpt=excerpt)


def _missing_module(exc: ImportError, schema_type: str) -> str:
    return (
        f"{schema_type} schemas cannot be checked by this server: the registry's module "
        f"{exc.name or exc} is not installed"
    )


def schema_check(
    *,
    registry: SchemaRegistry,
    subject: str,
    schema: str,
    schema_type: str = AVRO,
    references: str | Sequence[SchemaReference] = (),
) -> CheckResult:
    """Would `schema` register under `subject`, and as what? Never raises for what was typed:
    a parse error (with its line and column), the incompatibilities under the subject's level,
    a refusal (read-only mode) are all results."""
    subject = subject.strip()
    schema_type = (schema_type or AVRO).upper()
    if not schema.strip():
        return CheckResult("empty", "Type or paste a schema: it is checked as you type.")
    if schema_type not in SCHEMA_TYPES:
        return CheckResult("invalid", f"Unknown schema type {schema_type!r}")
    try:
        refs = _references(registry, references)
        registry.parse(schema, schema_type, refs)
        if not subject:
            return CheckResult("empty", "The schema parses; name the subject to check it.")
        return _check_subject(registry, subject, schema, schema_type, refs)
    except E.InvalidSchema as exc:
        return _invalid(exc, schema)
    except E.RegistryError as exc:
        return CheckResult("refused", exc.message)
    except ImportError as exc:
        return CheckResult("refused", _missing_module(exc, schema_type))


def _check_subject(registry, subject, schema, schema_type, refs) -> CheckResult:
    mode = registry.mode(subject)
    if mode in (READONLY, READONLY_OVERRIDE):
        return CheckResult("refused", f"Subject {subject} is in {mode} mode: nothing registers")
    try:
        same = registry.lookup(subject, schema, schema_type, refs)
    except (E.SubjectNotFound, E.SchemaNotFound):
        same = None
    if same is not None:
        return CheckResult(
            "same",
            f"Already registered as version {same.version} (id {same.id}): registering it "
            "again writes nothing",
            next_version=same.version,
        )
    try:
        every = registry.versions(subject, deleted=True)
    except E.SubjectNotFound:
        every = []
    next_version = max(every, default=0) + 1
    live = registry.versions(subject) if subject in registry.subjects(prefix=subject) else []
    level = registry.config(subject)
    if not live:
        return CheckResult(
            "ok",
            f"New subject: it would be version {next_version}, with nothing to be compatible "
            "with yet",
            level=level,
            next_version=next_version,
        )
    if level == NONE:
        return CheckResult(
            "ok",
            f"Compatibility NONE: not checked; it would be version {next_version}",
            level=level,
            next_version=next_version,
        )
    against = tuple(live if level.endswith("_TRANSITIVE") else live[-1:])
    problems = registry.check_compatibility(subject, None, schema, schema_type, refs)
    if problems:
        return CheckResult(
            "incompatible",
            f"Not compatible with {_versions_text(against)} under {level}",
            problems=tuple(problems),
            level=level,
            against=against,
        )
    return CheckResult(
        "ok",
        f"Compatible with {_versions_text(against)} under {level}; it would be version "
        f"{next_version}",
        level=level,
        against=against,
        next_version=next_version,
    )


@dataclasses.dataclass(frozen=True)
class RegisterResult:
    subject: str
    id: int
    version: int
    new: bool  # False: the subject had this schema already (nothing written, nothing audited)


def schema_register(
    *,
    registry: SchemaRegistry,
    sink: AuditSink,
    actor: Actor,
    subject: str,
    schema: str,
    schema_type: str = AVRO,
    references: str | Sequence[SchemaReference] = (),
) -> RegisterResult:
    """Register `schema` under `subject` (a new version once it is compatible, or the version
    holding it already). Raises IncompatibleSchema (409), InvalidSchema (422, a parse error or
    a reference line), OperationNotPermitted (422, read-only mode), StoreError; ImportError is
    turned into InvalidSchema naming the module this server lacks."""
    subject = subject.strip()
    schema_type = (schema_type or AVRO).upper()
    refs = _references(registry, references)
    try:
        result = registry.register(subject, schema, schema_type, refs)
    except ImportError as exc:
        raise E.InvalidSchema(_missing_module(exc, schema_type)) from None
    if result.new:
        after = {"id": result.id, "version": result.version, "schemaType": schema_type}
        actor.record(sink, "schema.register", _subject_target(subject), after=after)
    return RegisterResult(subject, result.id, result.version, result.new)


@dataclasses.dataclass(frozen=True)
class RegisterForm:
    """What the register form starts with: the subject's latest version (to evolve), or an
    empty form for a new subject."""

    subject: str
    schema: str
    schema_type: str
    references: str
    exists: bool
    level: str
    latest: SchemaVersion | None


def register_form_read(*, registry: SchemaRegistry, subject: str = "") -> RegisterForm:
    subject = subject.strip()
    latest = None
    if subject:
        try:
            latest = registry.version(subject, "latest")
        except E.RegistryError:
            latest = None
    if latest is None:
        return RegisterForm(subject, "", AVRO, "", False, registry.config(subject or None), None)
    refs = "\n".join(f"{r.name} {r.subject} {r.version}" for r in latest.references)
    return RegisterForm(
        subject,
        pretty_schema(latest)[0] if latest.schema_type != PROTOBUF else latest.schema,
        latest.schema_type,
        refs,
        True,
        registry.config(subject),
        latest,
    )


# ====================================================================== compatibility level


@dataclasses.dataclass(frozen=True)
class ConfigChange:
    before: str  # the level that applied before (the global one when the subject had none)
    after: str
    own: bool  # the subject has a level of its own now
    changed: bool


def schema_config_set(
    *, registry: SchemaRegistry, sink: AuditSink, actor: Actor, subject: str, level: str | None
) -> ConfigChange:
    """Set the subject's compatibility level, or with None (or "") unset it so that the
    global one applies. Nothing is written (nor audited) when it would not change. Raises
    InvalidCompatibilityLevel, SubjectNotFound, OperationNotPermitted (read-only)."""
    registry.versions(subject, deleted=True)  # SubjectNotFound for a subject never registered
    own = _own_level(registry, subject)
    before = registry.config(subject)
    target = _subject_target(subject)
    if not level:
        if own is None:
            return ConfigChange(before, before, False, False)
        registry.delete_config(subject)
        after = registry.config(subject)
        actor.record(sink, "schema.config_delete", target, before={"compatibility": own})
        return ConfigChange(before, after, False, True)
    level = level.upper()
    if level not in LEVELS:
        raise E.InvalidCompatibilityLevel(
            f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}"
        )
    if own == level:
        return ConfigChange(before, level, True, False)
    registry.set_config(subject, level)
    actor.record(
        sink,
        "schema.config",
        target,
        before={"compatibility": before},
        after={"compatibility": level},
    )
    return ConfigChange(before, level, True, True)


# ====================================================================== deletes


@dataclasses.dataclass(frozen=True)
class DeletePlan:
    """What a delete would remove, and whether it may: the confirmation page's contents."""

    subject: str
    version: int | None  # None: the whole subject
    permanent: bool
    versions: list[SchemaVersion]  # what goes
    allowed: bool
    reason: str  # why not, when not allowed
    topics: tuple[str, ...]
    referrers: list[ReferenceLink]
    remaining: int  # versions of the subject (soft-deleted ones too) left after it

    @property
    def expected(self) -> str:
        """What the operator types to confirm."""
        if self.version is None:
            return self.subject
        return f"{self.subject} version {self.version}"

    @property
    def target(self) -> str:
        if self.version is None:
            return _subject_target(self.subject)
        return _version_target(self.subject, self.version)


def delete_plan(
    *, host: SchemaHost, subject: str, version: int | None = None, permanent: bool = False
) -> DeletePlan:
    """A soft delete needs live versions; a permanent one, versions soft-deleted first; none
    while another schema references a version. Raises SubjectNotFound, VersionNotFound."""
    registry = host.schemas
    every = _every_version(registry, subject)
    count = len(every)
    if version is not None:
        every = [v for v in every if v.version == version]
        if not every:
            raise E.VersionNotFound(f"Version {version} not found.")
    live = [v for v in every if not v.deleted]
    goes = [v for v in every if v.deleted] if permanent else live
    what = f"version {version}" if version is not None else "the subject"
    reason = ""
    if permanent and live:
        reason = (
            f"{what.capitalize()} is not soft-deleted: delete it first (a soft delete keeps "
            "the schema readable by id), then delete it permanently."
        )
    elif not permanent and not live:
        reason = f"{what.capitalize()} is soft-deleted already."
    referrers = [r for v in goes for r in _referrers(registry, subject, v.version)]
    if referrers and not reason:
        reason = "Other schemas reference it: delete them (or their references) first."
    return DeletePlan(
        subject=subject,
        version=version,
        permanent=permanent,
        versions=goes,
        allowed=not reason,
        reason=reason,
        topics=topics_of(subject, _topic_names(host)),
        referrers=referrers,
        remaining=count - len(goes) if permanent else count,
    )


def schema_version_delete(
    *,
    registry: SchemaRegistry,
    sink: AuditSink,
    actor: Actor,
    subject: str,
    version: int,
    permanent: bool = False,
) -> int:
    """Soft-delete a version (its schema stays readable by id) or, `permanent`, remove a
    soft-deleted one for good. Raises VersionNotFound, VersionNotSoftDeleted, ReferenceExists,
    OperationNotPermitted."""
    deleted = registry.delete_version(subject, version, permanent=permanent)
    action = "schema.delete_permanent" if permanent else "schema.delete"
    actor.record(sink, action, _version_target(subject, deleted), before={"version": deleted})
    return deleted


def schema_subject_delete(
    *,
    registry: SchemaRegistry,
    sink: AuditSink,
    actor: Actor,
    subject: str,
    permanent: bool = False,
) -> list[int]:
    """Soft-delete every version of a subject (its own level and mode go too) or,
    `permanent`, remove a soft-deleted subject for good; the versions. Raises
    SubjectNotFound, SubjectSoftDeleted, SubjectNotSoftDeleted, ReferenceExists."""
    versions = registry.delete_subject(subject, permanent=permanent)
    action = "schema.subject_delete_permanent" if permanent else "schema.subject_delete"
    actor.record(sink, action, _subject_target(subject), before={"versions": versions})
    return versions


def schema_delete(
    *,
    registry: SchemaRegistry,
    sink: AuditSink,
    actor: Actor,
    subject: str,
    version: int | None = None,
    permanent: bool = False,
) -> list[int]:
    """The confirmation page's delete: of `version`, or with None of the whole subject; the
    versions deleted."""
    if version is None:
        return schema_subject_delete(
            registry=registry, sink=sink, actor=actor, subject=subject, permanent=permanent
        )
    return [
        schema_version_delete(
            registry=registry,
            sink=sink,
            actor=actor,
            subject=subject,
            version=version,
            permanent=permanent,
        )
    ]
