"""Export (JSON Lines, CSV; streamed, the query and range in the file and the audit log; a setting
turns it off) and import (preview, then confirm; bad lines write nothing) of the message pages."""

from __future__ import annotations

import base64
import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from brokerui.audit.models import AuditEntry

T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC

# record i: partition i % 2; odd bytes on purpose: a binary key, a tombstone, a null header
# value, text with a newline, a quote and non-ASCII, JSON values
SPECIAL = {
    3: (b"\xff\x00k", b'{"amount": 3}', [("bin", b"\x80\x81")]),
    4: (b"k4", None, [("nullh", None)]),
    5: (None, 'line one\nline "two" — Zoë'.encode(), []),
}


def _fill(store, topic: str, partitions: int = 2, n: int = 24) -> None:
    store.create_topic(topic, partitions=partitions)
    for i in range(n):
        key, value, headers = SPECIAL.get(
            i, (f"k{i}".encode(), json.dumps({"amount": i}).encode(), [("seq", str(i).encode())])
        )
        store.append(
            topic,
            value,
            key=key,
            headers=headers,
            partition=i % partitions,
            timestamp_ms=T0 + i * 1000,
        )


@pytest.fixture
def payments(broker):
    _fill(broker.store, "payments")
    return "payments"


def _export(client, topic="payments", **params):
    return client.get(reverse("console:messages_export", args=[topic]), params)


def _lines(response) -> list[bytes]:
    assert response.streaming
    return b"".join(response.streaming_content).splitlines(keepends=True)


def test_jsonl_export_streams_the_query_with_its_range_and_exact_bytes(viewer_client, payments):
    response = _export(viewer_client, seek="newest", q="has(value.amount) && value.amount >= 3")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"].startswith('attachment; filename="payments-')
    lines = _lines(response)
    meta = json.loads(lines[0])["tidelog_export"]
    assert meta["topic"] == "payments"
    assert meta["filter"]["expression"] == "has(value.amount) && value.amount >= 3"
    assert meta["filter"]["start"] == "newest"
    assert meta["range"] == [
        {"partition": 0, "from": 0, "to": 12},
        {"partition": 1, "from": 0, "to": 12},
    ]
    assert "base64" in meta["encoding"]
    records = [json.loads(line) for line in lines[1:-1]]
    # oldest first across partitions (by timestamp): 3 (binary key), 6, 7, ... 23
    assert [r["offset"] * 2 + r["partition"] for r in records] == [3, *range(6, 24)]
    first = records[0]
    assert base64.b64decode(first["key_base64"]) == b"\xff\x00k" and "key" not in first
    assert first["value"] == '{"amount": 3}' and first["timestamp"] == T0 + 3000
    assert first["headers"] == [
        {"name": "bin", "value_base64": base64.b64encode(b"\x80\x81").decode()}
    ]
    end = json.loads(lines[-1])["tidelog_export_end"]
    assert end == {"records": 19, "scanned": 24, "complete": True}

    entry = AuditEntry.objects.get(action="records.export")
    assert entry.target == "topic payments"
    assert entry.after["format"] == "jsonl"
    assert entry.after["filter"]["expression"] == meta["filter"]["expression"]
    assert entry.after["range"] == meta["range"]


def test_csv_export_has_a_documented_first_line_and_one_row_per_record(viewer_client, payments):
    response = _export(viewer_client, format="csv", seek="oldest", partition="1")
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode("utf-8")
    first, rest = text.split("\r\n", 1)
    assert first.startswith("# tidelog export: ")
    meta = json.loads(first.removeprefix("# tidelog export: "))
    assert meta["range"] == [{"partition": 1, "from": 0, "to": 12}]
    body, end = rest.rsplit("# tidelog export end: ", 1)
    assert json.loads(end)["complete"] is True
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == 12
    assert rows[1]["key_encoding"] == "base64" and rows[1]["value"] == '{"amount": 3}'
    assert rows[2]["key_encoding"] == "null"
    assert rows[2]["value"] == 'line one\nline "two" — Zoë'
    assert rows[0]["timestamp_utc"] == "2026-01-01T00:00:01.000Z"
    assert json.loads(rows[0]["headers"]) == [{"name": "seq", "value": "1"}]


def test_an_operator_setting_turns_export_off(viewer_client, payments, settings):
    page = viewer_client.get(reverse("console:messages", args=["payments"]), {"seek": "oldest"})
    assert b"Export all matches" in page.content
    settings.TIDELOG_EXPORT_ENABLED = False
    response = _export(viewer_client, seek="oldest")
    assert response.status_code == 403
    assert "turned off" in response.content.decode()
    page = viewer_client.get(reverse("console:messages", args=["payments"]), {"seek": "oldest"})
    assert b"Export all matches" not in page.content
    assert not AuditEntry.objects.filter(action="records.export").exists()


def _upload(client, topic: str, data: bytes, keep: bool = True, name: str = "in.jsonl"):
    url = reverse("console:messages_import", args=[topic])
    post = {"file": SimpleUploadedFile(name, data, "application/x-ndjson")}
    if keep:
        post["keep_partitions"] = "1"
    return client.post(url, post)


def _token(response) -> str:
    import re

    return re.search(r'name="token" value="([0-9a-f]+)"', response.content.decode())[1]


def test_export_then_import_round_trips_byte_exact(operator_client, broker, payments):
    exported = _lines(_export(operator_client, seek="oldest"))
    broker.store.create_topic("copy", partitions=2)

    preview = _upload(operator_client, "copy", b"".join(exported))
    assert preview.status_code == 200
    body = preview.content.decode()
    assert 'data-preview-count="24"' in body
    assert body.count("data-preview-line=") == 20  # the first 20 are shown
    assert broker.store.offsets("copy", 0) == (0, 0)  # nothing written before the confirmation

    done = operator_client.post(
        reverse("console:messages_import", args=["copy"]),
        {"token": _token(preview), "action": "confirm"},
    )
    assert done.status_code == 200
    assert b'data-imported="24"' in done.content

    again = _lines(_export(operator_client, topic="copy", seek="oldest"))
    assert again[1:] == exported[1:]  # every record line and the end line, byte for byte
    entry = AuditEntry.objects.get(action="records.import")
    assert entry.target == "topic copy"
    assert entry.after["records"] == 24 and entry.after["file"] == "in.jsonl"
    assert entry.after["exported"]["topic"] == "payments"
    assert entry.after["exported"]["range"] == json.loads(exported[0])["tidelog_export"]["range"]


def test_a_file_with_bad_lines_is_refused_whole_with_line_numbers(operator_client, broker):
    broker.store.create_topic("target", partitions=1)
    lines = [
        b'{"key": "a", "value": "1", "timestamp": 1767225600000}',
        b'{"key": "b", "value": "2"',
        b'{"key": "c", "value": "3", "partition": 4}',
        b'{"key": "d", "value_base64": "***"}',
        b'{"key": "e", "valeu": "5"}',
        b'{"key": "f", "value": "6"}',
    ]
    response = _upload(operator_client, "target", b"\n".join(lines))
    assert response.status_code == 400
    body = response.content.decode()
    assert "nothing was imported" in body
    errors = [e for e in body.split("<li data-import-error>")[1:]]
    assert [e.split(":")[0] for e in errors] == ["line 2", "line 3", "line 4", "line 5"]
    assert "partition 4, but the topic has 1" in body
    assert "not valid base64" in body and "unknown field “valeu”" in body
    assert broker.store.offsets("target", 0) == (0, 0)
    assert not AuditEntry.objects.filter(action="records.import").exists()
    assert 'name="token"' not in body  # no confirmation offered


def test_cancel_writes_nothing_and_viewers_cannot_import(operator_client, viewer, broker):
    broker.store.create_topic("target", partitions=1)
    preview = _upload(operator_client, "target", b'{"key": "a", "value": "1"}\n', keep=False)
    response = operator_client.post(
        reverse("console:messages_import", args=["target"]),
        {"token": _token(preview), "action": "cancel"},
    )
    assert b"nothing was written" in response.content
    assert broker.store.offsets("target", 0) == (0, 0)
    operator_client.force_login(viewer)
    assert _upload(operator_client, "target", b'{"value": "1"}\n').status_code == 403


def test_under_asgi_the_export_is_streamed_piece_by_piece(viewer, broker, monkeypatch):
    """Daphne serves the console: given a sync iterator Django would read it whole into memory
    before sending, so the export hands it an async one, and pieces leave while pages remain."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    from streams.cluster import transfer

    broker.store.create_topic("big", partitions=1)
    for i in range(3000):
        broker.store.append("big", b"v" * 100, key=b"k%d" % i, timestamp_ms=T0 + i)
    monkeypatch.setattr(transfer, "PAGE", 500)  # 6 pages
    pages: list[int] = []
    real = transfer.ExportRun.records

    def counting(self):
        for r in real(self):
            if r.offset % 500 == 0:  # a page begins
                pages.append(r.offset)
            yield r

    monkeypatch.setattr(transfer.ExportRun, "records", counting)

    async def first_piece_then_rest():
        client = AsyncClient()
        await client.aforce_login(viewer)
        response = await client.get(
            reverse("console:messages_export", args=["big"]), {"seek": "oldest"}
        )
        assert response.is_async  # Django iterates it without reading it all first
        it = aiter(response.streaming_content)
        first = await anext(it)
        seen_after_first = len(pages)
        rest = [piece async for piece in it]
        return first, seen_after_first, rest

    first, seen_after_first, rest = async_to_sync(first_piece_then_rest)()
    assert seen_after_first < 6  # the first piece left before the last page was read
    lines = (first + b"".join(rest)).splitlines()
    assert len(lines) == 3002 and json.loads(lines[-1])["tidelog_export_end"]["records"] == 3000


def test_a_file_over_the_import_limit_is_refused_and_old_previews_are_removed(
    operator_client, broker, monkeypatch, settings
):
    import os
    import time
    from pathlib import Path

    from brokerui.console.messages import views

    broker.store.create_topic("target", partitions=1)
    monkeypatch.setattr(views, "IMPORT_MAX_BYTES", 100)
    response = _upload(operator_client, "target", b'{"value": "x"}\n' * 10)
    assert response.status_code == 400
    assert "at most 100 bytes" in response.content.decode()

    monkeypatch.setattr(views, "IMPORT_MAX_BYTES", 1 << 20)
    _upload(operator_client, "target", b'{"value": "x"}\n')
    pending = list((Path(settings.TIDELOG_DATA_DIR) / "imports").glob("*.jsonl"))
    assert len(pending) == 1
    hours_ago = time.time() - 2 * 3600
    os.utime(pending[0], (hours_ago, hours_ago))
    _upload(operator_client, "target", b'{"value": "y"}\n')
    assert not pending[0].exists()
