"""Input of the message pages: the browse query (seek, partition, filters) and the produce form.

Both turn what people type into the engine's requests (`BrowseRequest` fields, `ProduceRequest`s)
and say, next to the field, what is wrong with it: a malformed header line, an offset below zero,
a partition the topic does not have.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from datetime import UTC, datetime

from django import forms

from brokerui.console.messages.display import MODES
from streams.cluster import Filter, ProduceRequest
from streams.cluster.expressions import (
    MAX_SOURCE_CHARS,
    CelLanguage,
    ExpressionError,
    ExpressionLanguage,
    RecordPredicate,
)

# the filter expression language of the message pages (a Protocol: the engine sees predicates)
EXPRESSIONS: ExpressionLanguage = CelLanguage()

SEEK_CHOICES = [
    ("newest", "Newest first"),
    ("oldest", "Oldest first"),
    ("newest-n", "Last N records"),
    ("offset", "From offset"),
    ("timestamp", "From time (UTC)"),
]
PAGE_SIZES = [10, 25, 50, 100, 200]  # offered; any size up to MAX_PAGE_SIZE is accepted
MAX_PAGE_SIZE = 500
FILTER_FIELDS = [
    ("value", "Value"),
    ("key", "Key"),
    ("header_key", "Header name"),
    ("header_value", "Header value"),
]
FILTER_OPS = [("contains", "contains"), ("not_contains", "does not contain"), ("equals", "equals")]
MAX_FILTERS = 10
MAX_PRODUCE = 1000
_MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31 23:59:59.999 UTC
_DATETIME_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f")


def parse_utc(text: str) -> int:
    """Milliseconds since the epoch from a datetime-local value read as UTC, or from digits
    (already epoch milliseconds). Raises ValidationError with the expected format."""
    text = text.strip().replace(" ", "T").removesuffix("Z")
    if text.isdigit():
        return _in_range(int(text))
    for fmt in _DATETIME_FORMATS:
        try:
            when = datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return _in_range(int(when.timestamp() * 1000))
    raise forms.ValidationError(
        "Enter a date and time as YYYY-MM-DD HH:MM[:SS] (UTC), or epoch milliseconds."
    )


def _in_range(ms: int) -> int:
    """Record timestamps are milliseconds since 1970 (Kafka refuses negative ones)."""
    if not 0 <= ms <= _MAX_TIMESTAMP_MS:
        raise forms.ValidationError("Enter a time between 1970-01-01 and 9999-12-31 (UTC).")
    return ms


def _optional_int(text: str, what: str, minimum: int = 0) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        raise forms.ValidationError(f"{what} must be a whole number, not “{text}”.") from None
    if n < minimum:
        raise forms.ValidationError(f"{what} must be {minimum} or more.")
    return n


# ================================================================================ browse


@dataclasses.dataclass
class FilterRow:
    field: str = "value"
    op: str = "contains"
    text: str = ""
    error: str = ""


READ_CHOICES = [
    ("all", "everything"),
    ("committed", "committed only"),
]


class BrowseForm(forms.Form):
    """The browse query of the message page. `partitions`: how many the topic has."""

    partition = forms.CharField(required=False)
    seek = forms.ChoiceField(choices=SEEK_CHOICES, required=False)
    n = forms.CharField(required=False)
    offset = forms.CharField(required=False)
    at = forms.CharField(required=False, max_length=40)
    size = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE)
    view = forms.ChoiceField(choices=[(m, m) for m in MODES], required=False)
    cursor = forms.CharField(required=False, max_length=100_000)
    q = forms.CharField(required=False, strip=False, max_length=MAX_SOURCE_CHARS)
    # everything (read_uncommitted, the default) or committed records only (read_committed)
    read = forms.ChoiceField(choices=READ_CHOICES, required=False)
    # transaction markers (COMMIT/ABORT control batches) between the records: hidden by default
    markers = forms.BooleanField(required=False)

    def __init__(self, data, *, partitions: int):
        super().__init__(data)
        self.partitions = partitions
        self.expression_error: ExpressionError | None = None
        self.expression: RecordPredicate | None = None  # compiled once, by clean_q
        self.filter_rows = self._filter_rows(data)
        # a first visit (no query yet) keeps scanning until the page is full
        self.auto = data.get("auto") == "1" or "seek" not in data

    @staticmethod
    def _filter_rows(data) -> list[FilterRow]:
        fields, ops, texts = data.getlist("field"), data.getlist("op"), data.getlist("text")
        rows = []
        for i, text in enumerate(texts):
            row = FilterRow(
                fields[i] if i < len(fields) else "value",
                ops[i] if i < len(ops) else "contains",
                text,
            )
            if not text:
                continue
            if row.field not in dict(FILTER_FIELDS):
                row.error = f"Unknown field “{row.field}”."
            elif row.op not in dict(FILTER_OPS):
                row.error = f"Unknown operator “{row.op}”."
            elif len(text) > 1000:
                row.error = "A filter text is at most 1,000 characters."
            rows.append(row)
        return rows

    def clean_partition(self) -> int | None:
        p = _optional_int(self.cleaned_data["partition"], "Partition")
        if p is not None and p >= self.partitions:
            last = self.partitions - 1
            raise forms.ValidationError(
                f"This topic has {self.partitions} partition{'s' if last else ''} (0–{last})."
            )
        return p

    def clean_seek(self) -> str:
        return self.cleaned_data["seek"] or "newest"

    def clean_size(self) -> int:
        return self.cleaned_data["size"] or 50

    def clean_view(self) -> str:
        return self.cleaned_data["view"] or "auto"

    def clean_read(self) -> str:
        return self.cleaned_data["read"] or "all"

    def clean_q(self) -> str:
        """The expression as typed; it must compile (the compiled predicate: `expression`)."""
        source = self.cleaned_data["q"]
        if source.strip():
            try:
                self.expression = EXPRESSIONS.compile(source)
            except ExpressionError as e:
                self.expression_error = e
                raise forms.ValidationError(str(e)) from None
        return source

    def clean_n(self) -> int | None:
        return _optional_int(self.cleaned_data["n"], "N", minimum=1)

    def clean_offset(self) -> int | None:
        return _optional_int(self.cleaned_data["offset"], "The offset")

    def clean_at(self) -> int | None:
        text = self.cleaned_data["at"].strip()
        return parse_utc(text) if text else None

    def clean(self):
        data = super().clean()
        seek = data.get("seek")
        needs = {
            "newest-n": ("n", "How many of the newest records?"),
            "offset": ("offset", "Which offset?"),
            "timestamp": ("at", "From which time?"),
        }
        if seek in needs:
            name, message = needs[seek]
            if name not in self.errors and data.get(name) is None:
                self.add_error(name, message)
        if len(self.filter_rows) > MAX_FILTERS:
            raise forms.ValidationError(f"At most {MAX_FILTERS} filters.")
        if any(row.error for row in self.filter_rows):
            raise forms.ValidationError("A filter is not valid; see below.")
        return data

    @property
    def seek_value(self) -> int | None:
        d = self.cleaned_data
        return {"newest-n": d.get("n"), "offset": d.get("offset"), "timestamp": d.get("at")}.get(
            d["seek"]
        )

    @property
    def filters(self) -> tuple[Filter, ...]:
        return tuple(Filter(r.field, r.op, r.text) for r in self.filter_rows)

    @property
    def display_rows(self) -> list[FilterRow]:
        """The filters as typed, plus one empty row to add another."""
        return [*self.filter_rows, FilterRow()]


# ================================================================================ produce

SCHEMA = "schema"  # the value is JSON, written with a registered schema in the wire format
ENCODINGS = [
    ("text", "UTF-8 text"),
    ("base64", "base64"),
    ("hex", "hex"),
    (SCHEMA, "JSON, encoded with a registered schema (Avro, Protobuf, JSON Schema)"),
]


# Header lines: ``name: text`` (UTF-8, trimmed) or ``name:: base64`` (exactly these bytes, as
# LDIF writes binary values); a name that is not plain (a colon, spaces at its ends, a control
# character, a quote first) is written as a JSON string: ``"a:b": text``.
HEADERS_HELP = (
    "One “name: value” per line; “name:: base64” for exact bytes; a name holding a colon "
    "in double quotes."
)
# what ends a line for str.splitlines(), besides CR and LF
_LINE_ENDS = frozenset("\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _split_name(line: str) -> tuple[str, str] | None:
    """(name, what follows its colon), or None when the line has no name and colon."""
    stripped = line.lstrip()
    if stripped.startswith('"'):
        try:
            name, end = json.JSONDecoder().raw_decode(stripped)
        except ValueError:
            return None
        rest = stripped[end:].lstrip()
        if not isinstance(name, str) or not rest.startswith(":"):
            return None
        return name, rest[1:]
    name, sep, rest = line.partition(":")
    name = name.strip()
    return (name, rest) if sep and name else None


def parse_headers(text: str) -> tuple[tuple[str, bytes], ...]:
    """One header per line (see HEADERS_HELP); blank lines are skipped. A value may be empty."""
    out = []
    errors = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parsed = _split_name(line)
        shown = line if len(line) <= 40 else line[:40] + "…"
        if parsed is None:
            errors.append(f"Line {number} (“{shown}”) is not “name: value”.")
            continue
        name, rest = parsed
        if rest.startswith(":"):
            try:
                value = base64.b64decode("".join(rest[1:].split()), validate=True)
            except (ValueError, binascii.Error):
                errors.append(f"Line {number} (“{shown}”): the value after “::” is not base64.")
                continue
        else:
            value = rest.strip().encode()
        out.append((name, value))
    if errors:
        raise forms.ValidationError(errors)
    return tuple(out)


def _plain_text(text: str, *, newlines: bool = False) -> bool:
    """True when `text` comes back unchanged through a form field: no control characters (a
    textarea keeps tabs and line feeds; a browser sends every line break as CRLF, which
    `decode_payload` turns back into LF, so a CR would not survive)."""
    allowed = "\t\n" if newlines else "\t"
    return not any(
        (ord(c) < 32 and c not in allowed) or 127 <= ord(c) < 160 or c in _LINE_ENDS for c in text
    )


def form_text(data: bytes, *, newlines: bool = False) -> str | None:
    """`data` as text a form field gives back byte for byte, or None (then it needs base64)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if _plain_text(text, newlines=newlines) else None


def format_header(name: str, value: bytes) -> str:
    """The line that `parse_headers` reads back as exactly (`name`, `value`)."""
    plain = name == name.strip() and not name.startswith('"') and ":" not in name
    shown_name = name if plain and name and _plain_text(name) else json.dumps(name)
    text = form_text(value)
    if text is not None and text == text.strip() and not text.startswith(":"):
        return f"{shown_name}: {text}"
    return f"{shown_name}:: {base64.b64encode(value).decode('ascii')}"


def decode_payload(text: str, encoding: str, what: str) -> bytes:
    if encoding == "text":
        # browsers send a textarea's line breaks as CRLF: a line break here is LF
        return text.replace("\r\n", "\n").encode()
    try:
        if encoding == "hex":
            return bytes.fromhex("".join(text.split()))
        return base64.b64decode("".join(text.split()), validate=True)
    except (ValueError, binascii.Error):
        raise forms.ValidationError(f"The {what} is not valid {encoding}.") from None


def resend_initial(record) -> tuple[dict, list[str]]:
    """The produce form's initial data for a copy of `record` that sends its bytes exactly:
    key and value as text when both survive a form as text, else both as base64; headers as
    lines of `format_header`. Also notes on what the form cannot copy."""
    key, value = record.key, record.value
    texts = (
        None if key is None else form_text(key),
        None if value is None else form_text(value, newlines=True),
    )
    binary = any(t is None and b is not None for t, b in zip(texts, (key, value), strict=True))
    notes = []
    if binary:
        notes.append("The key or value is binary, so both are shown as base64.")
    if key == b"":
        notes.append("The key is empty (not null); the form sends an empty key as no key.")

    def encode(data: bytes | None, text: str | None) -> str:
        if data is None:
            return ""
        return base64.b64encode(data).decode("ascii") if binary else text or ""

    lines = []
    for name, v in record.headers:
        if v is None:
            notes.append(
                f"Header “{name}” has a null value, which the form cannot write: it is "
                "copied with an empty value."
            )
        lines.append(format_header(name, v or b""))
    initial = {
        "key": encode(key, texts[0]),
        "value": encode(value, texts[1]),
        "encoding": "base64" if binary else "text",
        "headers": "\n".join(lines),
        "tombstone": value is None,
    }
    return initial, notes


class ProduceForm(forms.Form):
    """Messages to produce. `topics`: name → partition count of the topics one may write to."""

    topic = forms.ChoiceField(label="Topic")
    key = forms.CharField(
        required=False,
        strip=False,
        label="Key",
        widget=forms.TextInput(attrs={"class": "mono", "autocomplete": "off"}),
        help_text="Empty: no key (the partitioner spreads records).",
    )
    value = forms.CharField(
        required=False,
        strip=False,
        label="Value",
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono", "spellcheck": "false"}),
    )
    encoding = forms.ChoiceField(
        choices=ENCODINGS,
        initial="text",
        label="Key and value are",
        help_text="base64 or hex for binary payloads.",
    )
    headers = forms.CharField(
        required=False,
        label="Headers",
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "class": "mono",
                "spellcheck": "false",
                "placeholder": "trace-id: 4bf92f35\nsource: console",
            }
        ),
        help_text=HEADERS_HELP,
    )
    partition = forms.CharField(
        required=False,
        label="Partition",
        widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": "auto"}),
        help_text="Empty: by key (murmur2), or spread when there is no key.",
    )
    timestamp = forms.CharField(
        required=False,
        label="Timestamp (UTC)",
        max_length=40,
        widget=forms.TextInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text="Empty: the time of writing.",
    )
    tombstone = forms.BooleanField(
        required=False,
        label="Tombstone (null value)",
        widget=forms.CheckboxInput(attrs={"role": "switch"}),
        help_text="Deletes the key on a compacted topic.",
    )
    per_line = forms.BooleanField(
        required=False,
        label="One message per line",
        widget=forms.CheckboxInput(attrs={"role": "switch"}),
    )
    key_separator = forms.CharField(
        required=False,
        strip=False,
        max_length=10,
        label="Key separator",
        widget=forms.TextInput(attrs={"class": "mono", "size": 4}),
        help_text="Per line: key<sep>value; \\t is a tab.",
    )
    count = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_PRODUCE,
        initial=1,
        label="Copies",
        help_text="Each message is sent this many times.",
    )

    value_subject = forms.CharField(
        label="Schema subject",
        required=False,
        max_length=255,
        help_text="With “encoded with a registered schema”: the subject (default "
        "<topic>-value) and its version; the value is checked against it before anything "
        "is written.",
        widget=forms.TextInput(
            attrs={"class": "mono", "autocomplete": "off", "list": "schema-subjects"}
        ),
    )
    value_version = forms.CharField(
        label="Version",
        required=False,
        max_length=12,
        widget=forms.TextInput(attrs={"class": "mono", "size": 6, "placeholder": "latest"}),
    )

    def __init__(self, *args, topics: dict[str, int], value_encoder=None, **kwargs):
        """`value_encoder(subject, version)` gives the function a schema-encoded value is
        written with (``brokerui.schemas.value_encoder``)."""
        super().__init__(*args, **kwargs)
        self.topics = topics
        self.fields["topic"].choices = [(t, t) for t in topics]
        self.records: list[ProduceRequest] = []
        self.value_encoder = value_encoder
        self.schema_note: str | None = None  # "payments-value version 2 (schema id 7)"

    def clean_headers(self):
        return parse_headers(self.cleaned_data["headers"])

    def clean_timestamp(self) -> int | None:
        text = self.cleaned_data["timestamp"].strip()
        return parse_utc(text) if text else None

    def clean_count(self) -> int:
        return self.cleaned_data["count"] or 1

    def clean_key_separator(self) -> str:
        return self.cleaned_data["key_separator"].replace("\\t", "\t")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        self._clean_partition(data)
        if self.errors:
            return data
        try:
            pairs = self._key_values(data)
        except forms.ValidationError as e:
            self.add_error("value" if not data["tombstone"] else "tombstone", e)
            return data
        total = len(pairs) * data["count"]
        if total > MAX_PRODUCE:
            self.add_error("count", f"That is {total:,} messages; at most {MAX_PRODUCE:,} at once.")
            return data
        self.records = [
            ProduceRequest(
                value=value,
                key=key,
                headers=data["headers"],
                partition=data["partition"],
                timestamp_ms=data["timestamp"],
            )
            for key, value in pairs
            for _ in range(data["count"])
        ]
        return data

    def _clean_partition(self, data) -> None:
        try:
            p = _optional_int(data["partition"], "Partition")
        except forms.ValidationError as e:
            self.add_error("partition", e)
            return
        n = self.topics[data["topic"]]
        if p is not None and p >= n:
            self.add_error("partition", f"Topic “{data['topic']}” has {n} partition(s): 0–{n - 1}.")
        data["partition"] = p

    def _schema_encoder(self, data):
        """(the function encoding a value, the key's encoding) for `data`'s encoding."""
        if data["encoding"] != SCHEMA:
            return None, data["encoding"]
        if self.value_encoder is None:
            raise forms.ValidationError("Writing with a schema is not available here.")
        subject = data.get("value_subject", "").strip() or f"{data['topic']}-value"
        version = data.get("value_version", "").strip() or "latest"
        from streams.schemas.serdes import SchemaSerdeError

        try:
            write = self.value_encoder(subject, version)
        except SchemaSerdeError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.schema_note = f"{subject} version {version}"
        return _checked(write), "text"  # the key: UTF-8 text

    def _key_values(self, data) -> list[tuple[bytes | None, bytes | None]]:
        encoder, encoding = self._schema_encoder(data)
        key_text, value_text = data["key"], data["value"]
        key = decode_payload(key_text, encoding, "key") if key_text else None
        if data["tombstone"]:
            if data["per_line"]:
                raise forms.ValidationError(
                    "A tombstone has no value: untick “one message per line”."
                )
            if value_text:
                raise forms.ValidationError("A tombstone has no value: clear the value field.")
            return [(key, None)]
        if not data["per_line"]:
            if encoder is not None:
                return [(key, encoder(value_text, "the value"))]
            return [(key, decode_payload(value_text, encoding, "value"))]
        sep = data["key_separator"]
        lines = [line for line in value_text.splitlines() if line.strip()]
        if not lines:
            raise forms.ValidationError("Every line is empty: nothing to send.")
        out = []
        for number, line in enumerate(lines, 1):
            line_key = key
            if sep:
                if sep not in line:
                    raise forms.ValidationError(f"Line {number} has no key separator “{sep}”.")
                k, _, line = line.partition(sep)
                line_key = decode_payload(k, encoding, f"key on line {number}") if k else None
            if encoder is not None:
                out.append((line_key, encoder(line, f"the value on line {number}")))
            else:
                out.append((line_key, decode_payload(line, encoding, f"value on line {number}")))
        return out


def _checked(write):
    """`write` (a serde's serialize) over JSON text, its errors as the form's."""
    from streams.schemas.serdes import SchemaSerdeError

    def encode(text: str, what: str) -> bytes:
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"{what.capitalize()} is not JSON: {exc}") from None
        try:
            return write(obj)
        except SchemaSerdeError as exc:
            raise forms.ValidationError(
                f"{what.capitalize()} does not fit the schema: {exc}"
            ) from None

    return encode
