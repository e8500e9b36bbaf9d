"""Export what a browse query selects as JSON Lines or CSV, streamed, and read a JSON Lines
export back as records to produce.

An export walks the query's range forward, page after page through any ``browse`` callable
(``Cluster.browse``), to the end offsets taken when it started (records written meanwhile are not
included), so memory stays one page whatever the size. Records come in the browser's order
(merged across partitions by timestamp; in offset order within each partition).

JSON Lines (``.jsonl``), one JSON object per line, UTF-8:

    line 1   {"tidelog_export": {"version": 1, "topic", "exported_at", "filter": {...},
              "range": [{"partition", "from", "to"}, ...], "encoding": "..."}}
             the query (expression, contains/equals filters, partition, start) and, per
             partition, the offsets [from, to) the export covered
    records  {"partition", "offset", "timestamp" (ms since the epoch), "key", "value",
              "headers": [{"name", "value"}, ...]}
             key, value and header values are text when their bytes are UTF-8, else they are
             written as "key_base64" / "value_base64" (standard base64, padded) instead; a
             null key, value (tombstone) or header value is null. A key or value in the schema
             registry's wire format is always written as base64 (its exact bytes), and, when
             it could be read, also decoded: "value_decoded" (JSON) with "value_schema"
             {"id", "type", "subject", "version"} (and "key_decoded", "key_schema"); an
             import writes the exact bytes and ignores the decoded forms
    last     {"tidelog_export_end": {"records", "scanned", "complete", "error"?}}: a file
             without it was cut short

CSV (``.csv``, RFC 4180, UTF-8): line 1 is ``# tidelog export: {the same JSON}`` (skip it:
``tail -n +2``, pandas ``skiprows=1``), then a header row, one row per record, and a last line
``# tidelog export end: {...}``. Columns: partition, offset, timestamp (ms), timestamp_utc (ISO
8601), key, key_encoding, value, value_encoding (``utf-8``, ``base64`` or ``null``), headers
(the JSON array of the JSON Lines form), then key_decoded, value_decoded and value_schema: the
JSON of the JSON Lines form's fields for a key or value read through the schema registry,
empty otherwise.

`parse_jsonl` reads a JSON Lines export (or any file of such record lines; the first and last
lines are optional) into `ProduceRequest`s, all or nothing: every bad line is reported with its
number and nothing is returned for writing.
"""

from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import io
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from streams.cluster.browse import BrowsedRecord, BrowseRequest, BrowseResult

ENCODING_NOTE = (
    "key, value and header values are UTF-8 text; bytes that are not UTF-8 are in key_base64 / "
    "value_base64 (standard base64) instead; null is null"
)
FORMATS = ("jsonl", "csv")
PAGE = 1000
CHUNK_BYTES = 64 * 1024  # what one piece of the streamed file holds, about
MAX_IMPORT_ERRORS = 20
_MAX_TIMESTAMP_MS = 253_402_300_799_999
_RECORD_FIELDS = {
    "partition",
    "offset",
    "timestamp",
    "key",
    "key_base64",
    "value",
    "value_base64",
    "headers",
    "key_decoded",
    "key_schema",
    "value_decoded",
    "value_schema",
}


def _field(name: str, data: bytes | None) -> dict:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(data).decode("ascii")}


class RecordDecoder(Protocol):
    """Reads a topic's keys or values with a schema (``streams.schemas.mapping.PartDecoder``:
    the wire format, or the topic's mapped schema); `decode` raises ValueError."""

    def handles(self, data: bytes | None) -> bool: ...

    def decode(self, data: bytes) -> Any: ...


def _schema_field(name: str, data: bytes | None, decoder: RecordDecoder | None) -> dict:
    if decoder is None or data is None or not decoder.handles(data):
        return _field(name, data)
    exact = {f"{name}_base64": base64.b64encode(data).decode("ascii")}
    try:
        d = decoder.decode(data)
    except ValueError:
        return exact
    schema = {"id": d.schema_id, "type": d.schema_type, "subject": d.subject, "version": d.version}
    if d.mapping:
        schema["mapping"] = d.mapping
    return exact | {f"{name}_decoded": d.value, f"{name}_schema": schema}


def record_object(
    r: BrowsedRecord,
    value_decoder: RecordDecoder | None = None,
    key_decoder: RecordDecoder | None = None,
) -> dict:
    """One record as the JSON Lines export writes it."""
    return {
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp_ms,
        **_schema_field("key", r.key, key_decoder),
        **_schema_field("value", r.value, value_decoder),
        "headers": [{"name": k, **_field("value", v)} for k, v in r.headers],
    }


@dataclasses.dataclass
class ExportSummary:
    records: int = 0
    scanned: int = 0
    complete: bool = False
    error: str | None = None

    def as_dict(self) -> dict:
        out = {"records": self.records, "scanned": self.scanned, "complete": self.complete}
        return out | ({"error": self.error} if self.error else {})


class ExportRun:
    """One export: `request` (forward, with `until` set to the end offsets to stop at) is run
    page after page through `browse`. The first page is read at once, so a bad query fails
    before anything is sent; `meta` is the file's first line."""

    def __init__(
        self,
        browse: Callable[[BrowseRequest], BrowseResult],
        request: BrowseRequest,
        query: dict,
        now: datetime | None = None,
        value_decoder: RecordDecoder | None = None,
        key_decoder: RecordDecoder | None = None,
    ):
        self.browse, self.request = browse, request
        self.decoders = (value_decoder, key_decoder)
        self.first = browse(request)
        ends = dict(request.until)
        self.range = [
            {"partition": p, "from": start, "to": max(start, ends.get(p, start))}
            for p, start in self.first.start
        ]
        self.meta = {
            "version": 1,
            "topic": request.topic,
            "exported_at": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
            "filter": query,
            "range": self.range,
            "encoding": ENCODING_NOTE,
        }
        self.summary = ExportSummary()

    def records(self) -> Iterator[BrowsedRecord]:
        """Every selected record; `summary` says how it went (an error ends it early)."""
        result, req = self.first, self.request
        while True:
            self.summary.scanned += result.examined
            for r in result.records:
                self.summary.records += 1
                yield r
            if result.next_cursor is None:
                self.summary.complete = True
                return
            req = dataclasses.replace(req, cursor=result.next_cursor)
            try:
                result = self.browse(req)
            except Exception as exc:  # noqa: BLE001 - said in the file's last line
                self.summary.error = f"{type(exc).__name__}: {exc}"
                return

    def jsonl(self) -> Iterator[bytes]:
        """The JSON Lines file in pieces of about CHUNK_BYTES."""
        buf = bytearray(_json_line({"tidelog_export": self.meta}))
        for r in self.records():
            buf += _json_line(record_object(r, *self.decoders))
            if len(buf) >= CHUNK_BYTES:
                yield bytes(buf)
                buf.clear()
        buf += _json_line({"tidelog_export_end": self.summary.as_dict()})
        yield bytes(buf)

    def csv(self) -> Iterator[bytes]:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n")

        def flush() -> bytes:
            text = buf.getvalue()
            buf.seek(0)
            buf.truncate()
            return text.encode("utf-8")

        buf.write("# tidelog export: " + json.dumps(self.meta, ensure_ascii=False) + "\r\n")
        writer.writerow(
            [
                "partition",
                "offset",
                "timestamp",
                "timestamp_utc",
                "key",
                "key_encoding",
                "value",
                "value_encoding",
                "headers",
                "key_decoded",
                "value_decoded",
                "value_schema",
            ]
        )
        yield flush()
        for r in self.records():
            obj = record_object(r, *self.decoders)
            when = datetime.fromtimestamp(r.timestamp_ms / 1000, UTC)
            writer.writerow(
                [
                    r.partition,
                    r.offset,
                    r.timestamp_ms,
                    when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    *_csv_field(obj, "key"),
                    *_csv_field(obj, "value"),
                    json.dumps(obj["headers"], ensure_ascii=False),
                    _csv_json(obj.get("key_decoded"), "key_decoded" in obj),
                    _csv_json(obj.get("value_decoded"), "value_decoded" in obj),
                    _csv_json(obj.get("value_schema"), "value_schema" in obj),
                ]
            )
            if buf.tell() >= CHUNK_BYTES:
                yield flush()
        end = json.dumps(self.summary.as_dict())
        buf.write(f"# tidelog export end: {end}\r\n")
        yield flush()


def _csv_json(value, present: bool) -> str:
    return json.dumps(value, ensure_ascii=False) if present else ""


def _csv_field(obj: dict, name: str) -> tuple[str, str]:
    if f"{name}_base64" in obj:
        return obj[f"{name}_base64"], "base64"
    return ("", "null") if obj[name] is None else (obj[name], "utf-8")


def _json_line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


# ================================================================================ import


@dataclasses.dataclass(frozen=True)
class ImportedRecord:
    line: int
    partition: int | None  # as exported (None: not given)
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclasses.dataclass
class ParsedImport:
    records: list[ImportedRecord]
    errors: list[str]  # "line N: ..." (at most MAX_IMPORT_ERRORS, then a count)
    meta: dict | None  # the export's first line, when there is one

    @property
    def ok(self) -> bool:
        return not self.errors


class _LineError(ValueError):
    pass


def _bytes(obj: dict, name: str) -> bytes | None:
    """`name` or `name`_base64 of `obj` as bytes (not both; null is None)."""
    b64 = f"{name}_base64"
    if name in obj and b64 in obj:
        raise _LineError(f"give “{name}” or “{b64}”, not both")
    if b64 in obj:
        if not isinstance(obj[b64], str):
            raise _LineError(f"“{b64}” must be a string")
        try:
            return base64.b64decode(obj[b64], validate=True)
        except (ValueError, binascii.Error):
            raise _LineError(f"“{b64}” is not valid base64") from None
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _LineError(f"“{name}” must be a string or null (JSON text goes in as a string)")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
        raise _LineError(f"“{name}” holds a lone surrogate; use “{b64}”") from None


def _record(obj, line: int, partitions: int | None) -> ImportedRecord:
    if not isinstance(obj, dict):
        raise _LineError("not a JSON object")
    unknown = sorted(set(obj) - _RECORD_FIELDS)
    if unknown:
        raise _LineError(f"unknown field “{unknown[0]}”")
    if "value" not in obj and "value_base64" not in obj:
        raise _LineError("no “value” (null for a tombstone) or “value_base64”")
    partition = obj.get("partition")
    if partition is not None:
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise _LineError("“partition” must be a whole number, 0 or more")
        if partitions is not None and partition >= partitions:
            raise _LineError(
                f"partition {partition}, but the topic has {partitions} (0–{partitions - 1})"
            )
    ts = obj.get("timestamp")
    if ts is not None and (
        not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= _MAX_TIMESTAMP_MS
    ):
        raise _LineError("“timestamp” must be milliseconds since 1970 (a whole number)")
    headers = obj.get("headers", [])
    if not isinstance(headers, list):
        raise _LineError("“headers” must be a list of {“name”, “value”}")
    parsed = []
    for i, h in enumerate(headers, 1):
        if not isinstance(h, dict) or not isinstance(h.get("name"), str):
            raise _LineError(f"header {i} must be an object with a string “name”")
        if set(h) - {"name", "value", "value_base64"}:
            raise _LineError(f"header {i}: unknown field “{sorted(set(h) - {'name'})[0]}”")
        try:
            parsed.append((h["name"], _bytes(h, "value")))
        except _LineError as e:
            raise _LineError(f"header {i}: {e}") from None
    return ImportedRecord(
        line, partition, ts, _bytes(obj, "key"), _bytes(obj, "value"), tuple(parsed)
    )


def parse_jsonl(lines: Iterable[bytes], *, partitions: int | None = None) -> ParsedImport:
    """Records of a JSON Lines export (see the module docstring), with every bad line's
    number and reason. `partitions`: the target topic's count, to check partitions against
    (None: partitions are not kept)."""
    out = ParsedImport([], [], None)
    extra = 0
    for number, raw in enumerate(lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            problem = f"line {number}: not UTF-8 (byte {e.start + 1})"
        else:
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
                if isinstance(obj, dict) and "tidelog_export" in obj:
                    if number != 1:
                        raise _LineError("an export's first line in the middle of the file")
                    out.meta = obj["tidelog_export"]
                    continue
                if isinstance(obj, dict) and "tidelog_export_end" in obj:
                    continue
                out.records.append(_record(obj, number, partitions))
                continue
            except json.JSONDecodeError as e:
                problem = f"line {number}: not JSON ({e.msg} at column {e.colno})"
            except _LineError as e:
                problem = f"line {number}: {e}"
        if len(out.errors) < MAX_IMPORT_ERRORS:
            out.errors.append(problem)
        else:
            extra += 1
    if extra:
        out.errors.append(f"… and {extra:,} more bad line{'s' if extra > 1 else ''}")
    if not out.records and not out.errors:
        out.errors.append("the file holds no records")
    return out
