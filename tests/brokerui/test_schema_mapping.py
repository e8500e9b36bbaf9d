"""The console's schema mappings: an operator maps a topic's values (or keys) to a registered
version, an Avro schema pasted in, or an uploaded Protobuf descriptor set, and the message
browser, the record page, filters and exports read them decoded; bad input is the form again
with the reason (nothing kept), viewers only read, and every change is audited."""

from __future__ import annotations

import html
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from brokerui.audit.models import AuditEntry
from tests.protosets import compile_descriptor_set, message_class

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
PROTO = """syntax = "proto3";
package acme;
message Envelope { message Item { string sku = 1; int32 quantity = 2; } repeated Item items = 1; }
"""


def _avro(datum: dict) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(ORDER), datum)
    return buf.getvalue()


@pytest.fixture(scope="module")
def descriptor_set(tmp_path_factory) -> bytes:
    directory = tmp_path_factory.mktemp("proto")
    return compile_descriptor_set(
        directory, {"envelope.proto": PROTO}, "envelope.proto"
    ).read_bytes()


@pytest.fixture
def raw_orders(broker):
    """`raw-orders`: plain Avro (no wire-format header) values, 4 records."""
    broker.schemas.register("raw-orders-value", json.dumps(ORDER))
    broker.store.create_topic("raw-orders", partitions=1)
    for i in range(4):
        value = _avro({"id": f"o-{i}", "amount": 10.0 * i})
        broker.store.append("raw-orders", value, key=f"o-{i}".encode(), partition=0)
    return "raw-orders"


def _url(topic: str) -> str:
    return reverse("console:topic_schema_mapping", args=[topic])


def _browse(client, topic: str, **params) -> str:
    response = client.get(reverse("console:messages", args=[topic]), {"seek": "oldest", **params})
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def test_a_registered_version_maps_plain_avro_and_every_page_reads_it(operator_client, raw_orders):
    assert '"amount": 20.0' not in _browse(operator_client, raw_orders)  # hex before
    response = operator_client.post(
        _url(raw_orders),
        {"part": "value", "source": "registry", "subject": "raw-orders-value", "version": "latest"},
    )
    assert response.status_code == 302
    page = html.unescape(operator_client.get(_url(raw_orders)).content.decode())
    assert "raw-orders-value v1 (schema id 1)" in page and 'data-part="value"' in page

    page = _browse(operator_client, raw_orders)
    assert '"amount": 20.0' in page and '"id": "o-3"' in page
    assert "Avro (mapped, no wire format: raw-orders-value v1 (schema id 1))" in page
    page = _browse(operator_client, raw_orders, q="value.amount > 15.0")
    assert '"id": "o-2"' in page and '"id": "o-1"' not in page

    record = operator_client.get(reverse("console:message", args=[raw_orders, 0, 1]))
    assert '"amount": 10.0' in html.unescape(record.content.decode())

    export = operator_client.get(
        reverse("console:messages_export", args=[raw_orders]), {"seek": "oldest"}
    )
    lines = [json.loads(x) for x in b"".join(export.streaming_content).splitlines()][1:-1]
    assert [r["value_decoded"]["id"] for r in lines] == ["o-0", "o-1", "o-2", "o-3"]
    assert lines[0]["value_schema"]["mapping"] == "raw-orders-value v1 (schema id 1)"

    topic_page = html.unescape(
        operator_client.get(reverse("console:topic", args=[raw_orders])).content.decode()
    )
    assert "Schema mapping: value" in topic_page

    (entry,) = AuditEntry.objects.filter(action="topic.schema_mapping")
    assert entry.target == "topic raw-orders" and entry.username == "olivia"  # the operator fixture


def test_a_descriptor_set_upload_maps_protobuf(operator_client, broker, descriptor_set):
    broker.store.create_topic("envelopes", partitions=1)
    message = message_class(descriptor_set, "acme.Envelope")()
    message.items.add(sku="A-1", quantity=3)
    broker.store.append("envelopes", message.SerializeToString(), partition=0)

    upload = SimpleUploadedFile("envelope.desc", descriptor_set)
    response = operator_client.post(
        _url("envelopes"),
        {
            "part": "value",
            "source": "descriptor-set",
            "message": "acme.Nope",
            "descriptor_set": upload,
        },
    )
    assert response.status_code == 422  # the form again, with the message types it has
    page = html.unescape(response.content.decode())
    assert "no message type 'acme.Nope'" in page and "acme.Envelope, acme.Envelope.Item" in page
    assert broker.reading.book.get("envelopes", "value") is None  # nothing kept

    upload = SimpleUploadedFile("envelope.desc", descriptor_set)
    response = operator_client.post(
        _url("envelopes"),
        {
            "part": "value",
            "source": "descriptor-set",
            "message": "acme.Envelope",
            "descriptor_set": upload,
        },
    )
    assert response.status_code == 302
    page = _browse(operator_client, "envelopes")
    assert (
        '"sku": "A-1"' in page
        and "Protobuf acme.Envelope (mapped, no wire format: descriptor set envelope.desc)" in page
    )
    (entry,) = AuditEntry.objects.filter(action="topic.schema_mapping")
    after = entry.after if isinstance(entry.after, dict) else json.loads(entry.after)
    assert after["file_name"] == "envelope.desc" and after["bytes"] == len(descriptor_set)
    assert "schema" not in after  # the descriptor set's bytes are not in the audit log


def test_bad_input_is_the_form_again_and_nothing_is_kept(operator_client, raw_orders, broker):
    cases = [
        ({"source": "avro", "schema": '{"type": "record", "name": '}, "does not parse"),
        ({"source": "avro", "schema": ""}, "paste the Avro schema"),
        (
            {"source": "registry", "subject": "nope-value", "version": "1"},
            "subject 'nope-value' version 1",
        ),
        ({"source": "registry", "subject": ""}, "name the subject"),
        ({"source": "descriptor-set", "message": "a.B"}, "upload the descriptor set"),
        ({"source": "elsewhere"}, "not 'elsewhere'"),
        ({"source": "avro", "part": "headers", "schema": json.dumps(ORDER)}, "not 'headers'"),
    ]
    for fields, reason in cases:
        response = operator_client.post(_url(raw_orders), {"part": "value", **fields})
        assert response.status_code == 422, fields
        assert reason in html.unescape(response.content.decode()), fields
    assert broker.reading.book.all() == []
    assert not AuditEntry.objects.filter(action__startswith="topic.schema_mapping").exists()
    assert operator_client.get(_url("no-such-topic")).status_code == 404


def test_viewers_read_operators_unmap_behind_a_confirmation(operator, viewer, raw_orders, broker):
    from django.test import Client

    operator_client, viewer_client = Client(), Client()
    operator_client.force_login(operator)
    viewer_client.force_login(viewer)
    operator_client.post(
        _url(raw_orders), {"part": "value", "source": "avro", "schema": json.dumps(ORDER)}
    )
    page = html.unescape(viewer_client.get(_url(raw_orders)).content.decode())
    assert "an Avro schema given as text" in page and "mapping-form" not in page
    assert (
        viewer_client.post(
            _url(raw_orders), {"part": "key", "source": "avro", "schema": json.dumps(ORDER)}
        ).status_code
        == 403
    )
    unmap = reverse("console:topic_schema_unmap", args=[raw_orders, "value"])
    assert viewer_client.post(unmap).status_code == 403

    confirm = operator_client.get(unmap)
    assert confirm.status_code == 200 and "unmap-button" in confirm.content.decode()
    assert broker.reading.book.get(raw_orders, "value") is not None  # a GET changes nothing
    assert operator_client.post(unmap).status_code == 302
    assert broker.reading.book.get(raw_orders, "value") is None
    (entry,) = AuditEntry.objects.filter(action="topic.schema_mapping_delete")
    assert entry.target == "topic raw-orders"
    assert '"amount": 20.0' not in _browse(operator_client, raw_orders)  # bytes again
