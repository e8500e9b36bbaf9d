"""Topics mapped to a schema without the wire format (streams.schemas.mapping): plain Avro
read with a registered version or a schema given as text, Protobuf read with a descriptor set
made by protoc (nested and imported messages, well-known types), the book kept on disk, and
every reader (CEL filters, exports, panels, saved searches) reading mapped topics decoded;
bad input is a clear MappingError, unreadable bytes an Undecodable saying why."""

from __future__ import annotations

import base64
import io
import json

import pytest
from fastavro import schemaless_writer
from fastavro.schema import parse_schema

from streams.cluster.expressions import CelLanguage
from streams.cluster.transfer import record_object
from streams.log.store import LogStore
from streams.processing.panels import PanelJobs, PanelSpec
from streams.processing.panels.sample import check_sample
from streams.processing.testing import ManualClock
from streams.schemas import SchemaRegistry
from streams.schemas.mapping import (
    MappedValues,
    MappingBook,
    MappingError,
    TopicReading,
    avro_mapping,
    descriptor_set_mapping,
    descriptor_set_messages,
    registry_mapping,
)
from streams.schemas.registry import SchemaLog
from streams.schemas.wire import Undecodable, encode_header
from tests.protosets import compile_descriptor_set, message_class

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "total", "type": "double"},
        {"name": "country", "type": "string"},
        {"name": "ts", "type": "long"},
    ],
}
T0 = 1_700_000_000_000

COMMON_PROTO = """syntax = "proto3";
package acme.common;
message Money { string currency = 1; int64 cents = 2; }
"""
ORDERS_PROTO = """syntax = "proto3";
package acme.orders;
import "common.proto";
import "google/protobuf/timestamp.proto";
message Header { string source = 1; }
message Order {
  message Line { string sku = 1; int32 quantity = 2; }
  string id = 1;
  acme.common.Money total = 2;
  repeated Line lines = 3;
  google.protobuf.Timestamp placed = 4;
  map<string, string> tags = 5;
}
"""


class MemoryLog(SchemaLog):
    def __init__(self):
        self.rows: list[tuple[bytes, bytes | None]] = []

    def records(self):
        return list(self.rows)

    def append(self, key, value):
        self.rows.append((key, value))


def _avro(datum: dict, schema: dict = ORDER) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return buf.getvalue()


def _order(i: int) -> dict:
    return {"id": f"o-{i}", "total": 10.0 * i, "country": "DE" if i % 2 else "FR", "ts": T0 + i}


@pytest.fixture(scope="module")
def descriptor_set(tmp_path_factory) -> bytes:
    """orders.proto (importing common.proto and a well-known type) through protoc."""
    files = {"common.proto": COMMON_PROTO, "orders.proto": ORDERS_PROTO}
    return compile_descriptor_set(
        tmp_path_factory.mktemp("proto"), files, "orders.proto"
    ).read_bytes()


def _order_class(data: bytes, name: str = "acme.orders.Order"):
    return message_class(data, name)


@pytest.fixture
def registry():
    return SchemaRegistry(MemoryLog())


# ------------------------------------------------------------------ decoding


def test_plain_avro_is_read_with_a_registered_version(registry):
    first = registry.register("orders-value", json.dumps(ORDER)).id
    v2 = dict(
        ORDER,
        fields=[*ORDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
    )
    second = registry.register("orders-value", json.dumps(v2)).id
    mapping = registry_mapping(
        registry, topic="orders", part="value", subject="orders-value", version="latest"
    )
    assert (mapping.version, mapping.schema_id) == (2, second)  # latest: kept as its number
    old = registry_mapping(
        registry, topic="orders", part="value", subject="orders-value", version=1
    )
    assert old.schema_id == first and old.label == f"orders-value v1 (schema id {first})"

    book = MappingBook(None)
    book.put(old)
    value = TopicReading(registry.decoder, book).value("orders")
    data = _avro(_order(3))
    assert data[0] != 0  # plain Avro: no magic byte, no id
    assert value.handles(data)
    decoded = value.decode(data)
    assert decoded.value == _order(3)
    assert (decoded.subject, decoded.version, decoded.schema_id) == ("orders-value", 1, first)
    assert decoded.mapping == old.label
    assert value.value(data) == _order(3)


def test_an_avro_schema_as_text_and_its_errors():
    mapping = avro_mapping(topic="t", part="key", schema=json.dumps(ORDER))
    book = MappingBook(None)
    book.put(mapping)
    key = TopicReading(None, book).key("t")  # no registry at all: a mapping still reads
    assert key.value(_avro(_order(1))) == _order(1)
    assert TopicReading(None, book).value("t").handles(b"x") is False  # values not mapped

    with pytest.raises(MappingError, match="does not parse") as info:
        avro_mapping(topic="t", part="value", schema='{"type": "record", "name": ')
    assert "line 1" in str(info.value) or "column" in str(info.value)
    with pytest.raises(MappingError, match="key or value"):
        avro_mapping(topic="t", part="headers", schema=json.dumps(ORDER))


def test_unreadable_bytes_say_why():
    book = MappingBook(None)
    book.put(avro_mapping(topic="t", part="value", schema=json.dumps(ORDER)))
    value = TopicReading(None, book).value("t")
    data = _avro(_order(2))
    with pytest.raises(Undecodable, match="truncated"):
        value.decode(data[:-3])
    with pytest.raises(Undecodable, match="bytes are left"):
        value.decode(data + b"\x00\x00")


def test_protobuf_from_an_uploaded_descriptor_set(descriptor_set):
    names = descriptor_set_messages(descriptor_set)
    assert {"acme.orders.Order", "acme.orders.Order.Line", "acme.orders.Header"} <= set(names)
    assert "acme.common.Money" in names and "google.protobuf.Timestamp" in names
    assert not any(n.endswith("TagsEntry") for n in names)  # map entries are not types to pick

    mapping = descriptor_set_mapping(
        topic="orders",
        part="value",
        data=descriptor_set,
        message="acme.orders.Order",
        file_name="orders.desc",
    )
    assert mapping.label == "descriptor set orders.desc"
    book = MappingBook(None)
    book.put(mapping)
    value = TopicReading(None, book).value("orders")

    cls = _order_class(descriptor_set)
    order = cls(id="o-1")
    order.total.currency, order.total.cents = "EUR", 1250
    order.lines.add(sku="A", quantity=2)
    order.placed.FromMilliseconds(T0)
    order.tags["channel"] = "web"
    decoded = value.decode(order.SerializeToString())
    assert decoded.message == "acme.orders.Order" and decoded.schema_type == "PROTOBUF"
    assert decoded.value == {
        "id": "o-1",
        "total": {"currency": "EUR", "cents": "1250"},
        "lines": [{"sku": "A", "quantity": 2}],
        "placed": "2023-11-14T22:13:20Z",
        "tags": {"channel": "web"},
    }
    nested = descriptor_set_mapping(
        topic="lines", part="value", data=descriptor_set, message=".acme.orders.Order.Line"
    )
    book.put(nested)
    line = _order_class(descriptor_set, "acme.orders.Order.Line")(sku="B", quantity=7)
    assert TopicReading(None, book).value("lines").value(line.SerializeToString()) == {
        "sku": "B",
        "quantity": 7,
    }
    with pytest.raises(Undecodable, match="not Protobuf of acme.orders.Order"):
        value.decode(b"\x0a\xff\xff")  # a length past the end


def test_a_descriptor_set_that_is_not_one_or_lacks_the_message(descriptor_set):
    with pytest.raises(MappingError, match="no message type 'acme.orders.Nope'"):
        descriptor_set_mapping(
            topic="t", part="value", data=descriptor_set, message="acme.orders.Nope"
        )
    with pytest.raises(MappingError, match="names its message type"):
        descriptor_set_mapping(topic="t", part="value", data=descriptor_set, message="")
    with pytest.raises(MappingError, match="not a Protobuf FileDescriptorSet"):
        descriptor_set_mapping(topic="t", part="value", data=b"\xff\xff\xff", message="a.B")
    with pytest.raises(MappingError, match="holds no files"):
        descriptor_set_mapping(topic="t", part="value", data=b"", message="a.B")
    only_orders = _without_file(descriptor_set, "common.proto")
    with pytest.raises(MappingError, match="imports 'common.proto', which is not known"):
        descriptor_set_mapping(
            topic="t", part="value", data=only_orders, message="acme.orders.Order"
        )


def _without_file(data: bytes, name: str) -> bytes:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(data)
    kept = descriptor_pb2.FileDescriptorSet()
    kept.file.extend(f for f in files.file if f.name != name)
    return kept.SerializeToString()


def test_a_registered_protobuf_version_with_a_message_type(registry):
    text = 'syntax = "proto3"; package p; message A { string x = 1; } message B { int32 n = 1; }'
    registry.register("things-value", text, "PROTOBUF")
    mapping = registry_mapping(
        registry, topic="things", part="value", subject="things-value", version=1, message="p.B"
    )
    book = MappingBook(None)
    book.put(mapping)
    assert TopicReading(registry.decoder, book).value("things").value(b"\x08\x2a") == {"n": 42}
    with pytest.raises(MappingError, match="no message type 'p.C'"):
        registry_mapping(
            registry, topic="things", part="value", subject="things-value", version=1, message="p.C"
        )
    with pytest.raises(MappingError, match="subject 'nope-value' version 1"):
        registry_mapping(registry, topic="t", part="value", subject="nope-value", version=1)


def test_a_mapping_whose_schema_is_gone_reads_nothing_and_says_why():
    log = MemoryLog()
    registry = SchemaRegistry(log)
    registry.register("gone-value", json.dumps(ORDER))
    mapping = registry_mapping(registry, topic="t", part="value", subject="gone-value", version=1)
    registry.delete_subject("gone-value", permanent=False)
    registry.delete_subject("gone-value", permanent=True)
    restarted = SchemaRegistry(log)  # rebuilt from its log, as at a start
    book = MappingBook(None)
    book.put(mapping)
    with pytest.raises(Undecodable, match="cannot be read: schema id 1: Schema 1 not found"):
        TopicReading(restarted.decoder, book).value("t").decode(_avro(_order(1)))


def test_unmapped_topics_read_the_wire_format_as_before(registry):
    schema_id = registry.register("w-value", json.dumps(ORDER)).id
    value = TopicReading(registry.decoder, MappingBook(None)).value("w")
    wire = encode_header(schema_id) + _avro(_order(4))
    assert value.handles(wire) and value.value(wire) == _order(4)
    assert not value.handles(b'{"json": 1}')
    assert TopicReading(None, None).value("w") is None


# ------------------------------------------------------------------ the book


def test_the_book_is_kept_on_disk_and_changes_are_seen_by_running_readers(tmp_path):
    path = tmp_path / "schema-mappings.json"
    book = MappingBook(path)
    value = TopicReading(None, book).value("orders")  # made before the mapping exists
    data = _avro(_order(5))
    assert not value.handles(data)
    book.put(avro_mapping(topic="orders", part="value", schema=json.dumps(ORDER), created_by="ann"))
    assert value.handles(data) and value.value(data) == _order(5)

    again = MappingBook(path)  # a restart
    (kept,) = again.all()
    assert (kept.topic, kept.part, kept.source, kept.created_by) == (
        "orders",
        "value",
        "avro",
        "ann",
    )
    assert not list(tmp_path.glob("*.tmp"))
    assert again.remove("orders", "value") == kept
    assert MappingBook(path).all() == []
    assert again.remove("orders", "value") is None

    path.write_text("not json")
    with pytest.raises(MappingError, match="not a file of schema mappings"):
        MappingBook(path)


# ------------------------------------------------------------------ every reader


@pytest.fixture
def mapped_store(tmp_path):
    store = LogStore.open(tmp_path / "data")
    store.create_topic("orders", partitions=1)
    for i in range(6):
        store.append(
            "orders", _avro(_order(i)), key=f"o-{i}".encode(), partition=0, timestamp_ms=T0 + i
        )
    book = MappingBook(tmp_path / "schema-mappings.json")
    book.put(avro_mapping(topic="orders", part="value", schema=json.dumps(ORDER)))
    yield store, book
    store.close()


def test_cel_filters_and_exports_read_mapped_values(mapped_store):
    store, book = mapped_store
    reading = TopicReading(None, book)
    records = store.read("orders", 0, 0, 10)
    predicate = CelLanguage().compile('value.country == "DE" && value.total > 15.0')
    plain = [predicate.matches(r, 0) for r in records]
    assert plain == [False] * 6  # bytes, without the mapping
    predicate = predicate.reading_with(reading.value("orders"), reading.key("orders"))
    matched = [r.offset for r in records if predicate.matches(r, 0)]
    assert matched == [3, 5] and predicate.errors == 0

    from streams.cluster.browse import BrowsedRecord

    r = records[3]
    browsed = BrowsedRecord("orders", 0, r.offset, r.timestamp_ms, r.key, r.value, ())
    obj = record_object(browsed, reading.value("orders"), reading.key("orders"))
    assert obj["value_decoded"] == _order(3)
    assert base64.b64decode(obj["value_base64"]) == r.value  # the exact bytes too
    assert obj["value_schema"]["mapping"] == "an Avro schema given as text"
    assert obj["key"] == "o-3"  # keys are not mapped: text as before


def test_panels_and_saved_search_serdes_read_mapped_values(mapped_store):
    store, book = mapped_store
    reading = TopicReading(None, book)
    spec = PanelSpec("orders", "sum", value_field="total", group_by="country", time_field="ts")
    values = [r.value for r in store.read("orders", 0, 0, 10)]
    assert check_sample(spec, values, reading.value("orders")) == []
    assert check_sample(spec, values)  # without the mapping: not JSON documents

    jobs = PanelJobs(store, clock=ManualClock(T0 + 60_000), reading=reading)
    jobs.ensure("p", spec)
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert (snap.records_read, snap.parse_errors) == (6, 0)
    assert {r.key: r.values["sum"] for r in snap.results} == {"FR": 60.0, "DE": 90.0}

    serde = MappedValues(book, "orders")
    assert serde.deserialize(values[2]) == _order(2)
    assert serde.deserialize(None) is None


def test_a_broker_reads_its_mapping_book_and_panels_with_it(tmp_path):
    from streams.broker.runtime import MAPPINGS_FILE, Broker

    with Broker.open(tmp_path / "d", metrics=False, health=False) as broker:
        broker.reading.book.put(avro_mapping(topic="t", part="value", schema=json.dumps(ORDER)))
    assert (tmp_path / "d" / MAPPINGS_FILE).exists()
    with Broker.open(tmp_path / "d", metrics=False, health=False) as broker:
        assert broker.reading.value("t").value(_avro(_order(1))) == _order(1)
        from streams.schemas.mapping import process_mappings

        assert process_mappings() is broker.reading.book  # the saved searches' book
    with pytest.raises(MappingError, match="does not parse"):
        avro_mapping(topic="t", part="value", schema='{"type": "nope"}')


def test_a_saved_search_matches_events_of_a_mapped_topic(mapped_store):
    from streams.jobs.saved import SavedSearches
    from streams.schemas.mapping import use_mappings

    store, book = mapped_store
    use_mappings(book)  # as the broker does for the jobs in its process
    try:
        saved = SavedSearches(store)
        search = saved.save(name="big DE", topic="orders", query="country:DE AND total:[25 TO *]")
        for i in range(6, 9):  # o-7 is DE with 70.0; o-6 and o-8 are FR
            store.append("orders", _avro(_order(i)), partition=0, timestamp_ms=T0 + i)
        saved.poll_once()
        saved.poll_once()
        events = [m["event"] for m in saved.recent_matches(search.id)]
        assert sorted(e["id"] for e in events) == ["o-3", "o-5", "o-7"]  # DE, total >= 25
        assert _order(7) in events
        assert saved.errors == {}
    finally:
        use_mappings(None)
