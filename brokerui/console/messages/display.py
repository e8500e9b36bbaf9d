"""How record bytes are shown: JSON pretty-printed, UTF-8 text, or a hex dump.

Everything here returns plain ``str``; the templates escape it (autoescape), so a key, value or
header holding markup is shown as text, never interpreted. Nothing in this module may return a
``SafeString``.

Every page that shows record bytes (the message browser, the record page, its "show all") goes
through `show_value`, `show_short` and `show_headers`, and every text they return has passed
`printable`: any bytes render, and the result always encodes as UTF-8 (a JSON value holding a
lone surrogate escape such as ``"\\ud800"`` is shown with that escape, not as a character the
response cannot encode).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Protocol

from streams.schemas.wire import Decoded, Undecodable

MODES = ("auto", "text", "hex")
TRUNCATE_CHARS = 2048  # rendered characters shown per value before "show all"
SHORT_CHARS = 200  # keys and header values
JSON_MAX_BYTES = 512 * 1024  # larger values are not parsed for pretty-printing
_SNIFF_BYTES = 4096
_CONTROL = {c for c in range(32) if c not in (9, 10, 13)} | {127}
# C0 controls (but tab, line feed, carriage return) and DEL as their Unicode control pictures
_PICTURES = {c: 0x2400 + c for c in _CONTROL if c < 32} | {127: 0x2421}


_FORMAT_NAMES = {"AVRO": "Avro", "PROTOBUF": "Protobuf", "JSON": "JSON Schema"}


@dataclasses.dataclass(frozen=True)
class SchemaNote:
    """Which registered schema a value was read with (the wire format's schema id)."""

    schema_id: int | None
    schema_type: str
    subject: str | None
    version: int | None
    message: str | None = None  # Protobuf: the message type
    mapping: str | None = None  # read without the wire format, with the topic's mapped schema

    @property
    def text(self) -> str:
        what = _FORMAT_NAMES.get(self.schema_type, self.schema_type)
        if self.message:
            what += f" {self.message}"
        if self.mapping:
            return f"{what} (mapped, no wire format: {self.mapping})"
        where = f"{self.subject} v{self.version}, " if self.subject else ""
        return f"{what} ({where}schema id {self.schema_id})"


@dataclasses.dataclass(frozen=True)
class Shown:
    """A value ready for a template: `kind` is json, text, hex, schema (decoded with a
    registered schema: `schema` says which) or null; `text` may be cut. `reason` says why
    wire-format bytes are shown in hex (they could not be decoded)."""

    kind: str
    text: str
    size: int
    truncated: bool = False
    schema: SchemaNote | None = None
    reason: str | None = None

    @property
    def label(self) -> str:
        if self.schema is not None:
            return self.schema.text
        return {"json": "JSON", "text": "text", "hex": "binary (hex)", "null": "null"}[self.kind]


class ValueDecoder(Protocol):
    """What reads a topic's keys or values with a schema (``streams.schemas.mapping.
    PartDecoder``: the topic's mapped schema, or the registry's wire format)."""

    def handles(self, data: bytes | None) -> bool:
        """Whether `data` is to be read by this decoder (else it is shown as bytes)."""
        ...

    def decode(self, data: bytes) -> Decoded: ...


def printable(text: str) -> str:
    """`text` made safe to put in a page: control characters as their pictures (NUL as ␀), and
    lone surrogates (which no UTF-8 response can carry) as ``\\udXXX`` escapes."""
    text = text.translate(_PICTURES)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def is_binary(data: bytes) -> bool:
    """True unless the first bytes decode as UTF-8 without control characters."""
    head = data[:_SNIFF_BYTES]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # a multi-byte character cut by the sniff window is still text
        if len(data) <= _SNIFF_BYTES or e.start < len(head) - 3:
            return True
        text = head[: e.start].decode("utf-8")
    return any(ord(c) in _CONTROL for c in text)


def hex_dump(data: bytes, limit: int | None = None) -> str:
    """Offset, 16 bytes in hex, and the printable ASCII of each line, like ``xxd``."""
    lines = []
    end = len(data) if limit is None else min(len(data), limit)
    for pos in range(0, end, 16):
        chunk = data[pos : pos + 16]
        hexes = (
            " ".join(f"{b:02x}" for b in chunk[:8]) + "  " + " ".join(f"{b:02x}" for b in chunk[8:])
        )
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{pos:08x}  {hexes:<48}  {ascii_}")
    return "\n".join(lines)


HEX_LINE_MIN = 61  # a `hex_dump` line: offset, 2, 16 bytes in hex (48), 2, ASCII (1 to 16)


def hex_dump_columns(line: str) -> list[str] | None:
    """A `hex_dump` line cut into its columns, the spaces between them kept, so that joined
    they give the line back: [offset, "  ", bytes 0-7, "  ", bytes 8-15, "  ", ASCII of 0-7,
    ASCII of 8-15]; None for a line that is not one."""
    if len(line) < HEX_LINE_MIN or len(line) > HEX_LINE_MIN + 15:
        return None
    ascii_ = line[60:]
    return [line[:8], line[8:10], line[10:33], line[33:35], line[35:58], line[58:60]] + [
        ascii_[:8],
        ascii_[8:],
    ]


def _pretty_json(data: bytes) -> str | None:
    """Indented JSON when `data` is a JSON object or array, else None."""
    if len(data) > JSON_MAX_BYTES or data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        # JSON escapes every control character itself; a lone surrogate (``"\\ud800"``)
        # comes back as an escape from `printable`
        return printable(json.dumps(json.loads(data), indent=2, ensure_ascii=False))
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        return None


def _cut(text: str, limit: int | None) -> tuple[str, bool]:
    if limit is None or len(text) <= limit:
        return text, False
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > limit // 2 else limit], True


def show_value(
    data: bytes | None,
    mode: str = "auto",
    limit: int | None = TRUNCATE_CHARS,
    decoder: ValueDecoder | None = None,
):
    """Render a value (or a key) for display; `limit` None shows it all. With a `decoder`,
    bytes in the schema registry's wire format are shown decoded (auto mode), or in hex with
    the reason they could not be."""
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    if mode == "auto" and decoder is not None and decoder.handles(data):
        return _show_decoded(data, decoder, limit)
    if mode == "hex" or (mode == "auto" and is_binary(data)):
        byte_limit = None if limit is None else max(16, limit // 80 * 16)
        text = hex_dump(data, byte_limit)
        return Shown("hex", text, size, byte_limit is not None and size > byte_limit)
    if mode == "auto":
        pretty = _pretty_json(data)
        if pretty is not None:
            text, truncated = _cut(pretty, limit)
            return Shown("json", text, size, truncated)
    # decode no more than needed: a character is at most 4 bytes
    raw = data if limit is None else data[: limit * 4]
    text = printable(raw.decode("utf-8", errors="replace"))
    text, truncated = _cut(text, limit)
    return Shown("text", text, size, truncated or len(raw) < size)


def _show_decoded(data: bytes, decoder: ValueDecoder, limit: int | None) -> Shown:
    try:
        decoded = decoder.decode(data)
    except Undecodable as exc:
        byte_limit = None if limit is None else max(16, limit // 80 * 16)
        text = hex_dump(data, byte_limit)
        truncated = byte_limit is not None and len(data) > byte_limit
        return Shown("hex", text, len(data), truncated, reason=printable(str(exc)))
    pretty = printable(json.dumps(decoded.value, indent=2, ensure_ascii=False, default=str))
    text, truncated = _cut(pretty, limit)
    note = SchemaNote(
        decoded.schema_id,
        decoded.schema_type,
        decoded.subject,
        decoded.version,
        decoded.message,
        decoded.mapping,
    )
    return Shown("schema", text, len(data), truncated, schema=note)


def show_short(data: bytes | None, mode: str = "auto", decoder: ValueDecoder | None = None):
    """A key or header value on one line: text when it is text, compact hex otherwise (a
    wire-format key decoded, with a `decoder`)."""
    if data is None:
        return Shown("null", "null", 0)
    if mode == "auto" and decoder is not None and decoder.handles(data):
        shown = _show_decoded(data, decoder, None)
        if shown.schema is not None:
            one_line = json.dumps(json.loads(shown.text), ensure_ascii=False)
            return dataclasses.replace(
                shown, text=one_line[:SHORT_CHARS], truncated=len(one_line) > SHORT_CHARS
            )
    if mode == "hex" or (mode == "auto" and is_binary(data)):
        text = data[: SHORT_CHARS // 2].hex(" ")
        return Shown("hex", text, len(data), len(data) > SHORT_CHARS // 2)
    text = printable(data[: SHORT_CHARS * 4].decode("utf-8", errors="replace"))
    return Shown("text", text[:SHORT_CHARS], len(data), len(text) > SHORT_CHARS)


def show_headers(headers, mode: str = "auto", *, short: bool = True) -> list[tuple[str, Shown]]:
    """Header names (text, made printable) with their values: one line each when `short`,
    else in full."""
    if short:
        return [(printable(k), show_short(v, mode)) for k, v in headers]
    return [(printable(k), show_value(v, mode, limit=None)) for k, v in headers]
