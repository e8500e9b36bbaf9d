"""Values written through the schema registry, read everywhere: the message browser and the
record page decode Avro, Protobuf and JSON Schema (with subject, version and id), undecodable
bytes fall back to hex with the reason, CEL filters see the decoded fields, and a JSON Lines
export carries the decoded value beside the exact bytes."""

from __future__ import annotations

import base64
import csv
import html
import io
import json

import pytest
from django.urls import reverse
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from brokerui.console.messages.display import show_short, show_value
from streams.schemas.wire import encode_header

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "customer", "type": "string"},
    ],
}


def _avro(schema_id: int, datum: dict) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(ORDER), datum)
    return encode_header(schema_id) + buf.getvalue()


@pytest.fixture
def orders(broker):
    """`orders`: 6 Avro records through the registry (amounts 0, 5, ..., 25), then one with
    an unknown schema id and one truncated."""
    schema_id = broker.schemas.register("orders-value", json.dumps(ORDER)).id
    broker.store.create_topic("orders", partitions=1)
    for i in range(6):
        value = _avro(schema_id, {"id": f"o-{i}", "amount": 5.0 * i, "customer": f"c{i % 2}"})
        broker.store.append("orders", value, key=f"o-{i}".encode(), partition=0)
    broker.store.append("orders", encode_header(999) + b"\x02x", key=b"bad-id", partition=0)
    broker.store.append(
        "orders",
        _avro(schema_id, {"id": "x", "amount": 1.0, "customer": "c"})[:8],
        key=b"cut",
        partition=0,
    )
    return schema_id


def _page(client, **params) -> str:
    response = client.get(reverse("console:messages", args=["orders"]), params)
    assert response.status_code == 200, response.content[:500]
    return html.unescape(response.content.decode())


def test_the_browser_shows_avro_decoded_with_its_schema(viewer_client, orders):
    page = _page(viewer_client, seek="oldest", size=50)
    assert '"customer": "c1"' in page and '"amount": 25.0' in page
    assert "Avro (orders-value v1, schema id 1)" in page
    # the undecodable ones: hex, with the reason
    assert "schema id 999: Schema 999 not found" in page
    assert "truncated: the Avro payload ends before its record" in page


def test_cel_filters_read_the_decoded_fields(viewer_client, orders):
    page = _page(viewer_client, seek="oldest", q='value.amount >= 15.0 && value.customer == "c1"')
    assert '"id": "o-3"' in page and '"id": "o-5"' in page
    assert '"id": "o-1"' not in page and '"id": "o-4"' not in page


def test_the_record_page_decodes_in_full(viewer_client, orders):
    response = viewer_client.get(reverse("console:message", args=["orders", 0, 2]))
    page = html.unescape(response.content.decode())
    assert '"amount": 10.0' in page and "Avro (orders-value v1, schema id 1)" in page
    response = viewer_client.get(reverse("console:message", args=["orders", 0, 6]))
    page = html.unescape(response.content.decode())
    assert "Shown in hex: schema id 999" in page


def test_the_jsonl_export_has_the_decoded_value_and_the_exact_bytes(viewer_client, orders, broker):
    response = viewer_client.get(
        reverse("console:messages_export", args=["orders"]), {"seek": "oldest"}
    )
    lines = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    records = lines[1:-1]
    first = records[0]
    assert first["value_decoded"] == {"id": "o-0", "amount": 0.0, "customer": "c0"}
    assert first["value_schema"] == {
        "id": 1,
        "type": "AVRO",
        "subject": "orders-value",
        "version": 1,
    }
    stored = broker.store.read("orders", 0, 0, 1)[0].value
    assert base64.b64decode(first["value_base64"]) == stored
    assert "value_decoded" not in records[6] and base64.b64decode(records[6]["value_base64"])


def test_the_csv_export_has_decoded_columns(viewer_client, orders):
    response = viewer_client.get(
        reverse("console:messages_export", args=["orders"]), {"seek": "oldest", "format": "csv"}
    )
    text = b"".join(response.streaming_content).decode("utf-8")
    body = text.split("\r\n", 1)[1].rsplit("# tidelog export end: ", 1)[0]
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows[0]["value_encoding"] == "base64"  # the exact bytes stay
    assert json.loads(rows[0]["value_decoded"]) == {"id": "o-0", "amount": 0.0, "customer": "c0"}
    assert json.loads(rows[0]["value_schema"])["subject"] == "orders-value"
    assert rows[6]["value_decoded"] == "" and rows[0]["key_decoded"] == ""  # unknown id; raw key


def test_display_without_a_registry_shows_bytes(orders):
    data = _avro(orders, {"id": "o", "amount": 1.0, "customer": "c"})
    assert show_value(data).kind == "hex"
    assert show_short(data).kind == "hex"


def test_a_wire_format_key_is_decoded_on_one_line(broker):
    schema_id = broker.schemas.register("k", json.dumps({"type": "string"})).id
    key = encode_header(schema_id) + b"\x06abc"
    shown = show_short(key, decoder=broker.schemas.decoder)
    assert (shown.kind, shown.text) == ("schema", '"abc"')


def _produce(client, **fields):
    form = {"topic": "orders", "encoding": "schema", "count": "1", **fields}
    return client.post(reverse("console:produce", args=["orders"]), form)


def test_produce_with_a_schema_checks_the_value_before_writing(operator_client, orders, broker):
    end = broker.store.offsets("orders", 0)[1]
    response = _produce(operator_client, key="o-9", value='{"id": "o-9", "amount": 2.5}')
    page = html.unescape(response.content.decode())
    assert response.status_code == 400 and "does not fit the schema" in page and "customer" in page
    assert broker.store.offsets("orders", 0)[1] == end  # nothing written
    response = _produce(operator_client, key="o-9", value="{not json")
    assert response.status_code == 400 and "is not JSON" in html.unescape(response.content.decode())
    response = _produce(operator_client, value="{}", value_subject="nope-value")
    assert response.status_code == 400 and "nope-value version latest" in html.unescape(
        response.content.decode()
    )
    good = '{"id": "o-9", "amount": 2.5, "customer": "c9"}'
    response = _produce(operator_client, key="o-9", value=good, value_version="1")
    assert response.status_code == 200, response.content[:300]
    written = broker.store.read("orders", 0, end, 1)[0]
    assert written.key == b"o-9" and written.value[:5] == encode_header(orders)
    assert broker.schemas.decoder.value(written.value) == json.loads(good)


def test_produce_with_a_schema_one_record_per_line(operator_client, orders, broker):
    end = broker.store.offsets("orders", 0)[1]
    lines = "\n".join(
        json.dumps({"id": f"n{i}", "amount": float(i), "customer": "c"}) for i in range(3)
    )
    response = _produce(operator_client, value=lines, per_line="on")
    assert response.status_code == 200
    got = [
        broker.schemas.decoder.value(r.value)["id"] for r in broker.store.read("orders", 0, end, 10)
    ]
    assert got == ["n0", "n1", "n2"]
