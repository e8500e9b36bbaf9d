"""Conformance: confluent-kafka's own schema_registry client and its Avro, Protobuf and JSON
Schema serializers and deserializers against Tidelog's registry, over HTTP; and Tidelog's
decoder (`streams.schemas.wire`) reading what those serializers wrote, value for value."""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streams.schemas.wire import SchemaDecoder, Undecodable, encode_header, read_indexes

EVERY_AVRO_TYPE = {
    "type": "record",
    "name": "Everything",
    "namespace": "shop.test",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "maybe", "type": ["null", "string"], "default": None},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "inner",
            "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]},
        },
    ],
}


def ctx(topic: str, field=MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


def test_avro_every_type_round_trips(client, registry):
    serialize = AvroSerializer(client, json.dumps(EVERY_AVRO_TYPE))
    deserialize = AvroDeserializer(client)
    datum = {
        "b": True,
        "i": -7,
        "l": 2**40,
        "f": 1.5,
        "d": 2.25,
        "s": "héllo",
        "raw": b"\x00\xff",
        "n": None,
        "color": "BLUE",
        "tags": ["a", "b"],
        "counts": {"x": 1},
        "maybe": "yes",
        "fx": b"abcd",
        "price": decimal.Decimal("12.34"),
        "day": datetime.date(2026, 12, 6),
        "at": datetime.datetime(2026, 12, 6, 1, 2, 3, 123000, tzinfo=datetime.UTC),
        "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "inner": {"x": 3},
    }
    data = serialize(datum, ctx("everything"))
    assert data[:5] == encode_header(1)
    assert deserialize(data, ctx("everything")) == datum
    # the registry holds it as Confluent does: subject <topic>-value, version 1, id 1
    latest = client.get_latest_version("everything-value")
    assert (latest.schema_id, latest.version, latest.schema.schema_type) == (1, 1, "AVRO")
    # Tidelog's decoder reads the same values, in JSON's types
    decoded = SchemaDecoder(registry).decode(data)
    assert (decoded.schema_id, decoded.subject, decoded.version) == (1, "everything-value", 1)
    assert decoded.value["price"] == "12.34" and decoded.value["raw"] == "AP8="
    assert decoded.value["day"] == "2026-12-06" and decoded.value["inner"] == {"x": 3}
    assert decoded.value["uid"] == "12345678-1234-5678-1234-567812345678"


def test_avro_references_and_use_latest_version(client, registry):
    money = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Money",
                "namespace": "shop",
                "fields": [{"name": "cents", "type": "long"}],
            }
        ),
        "AVRO",
    )
    assert client.register_schema("money", money) == 1
    order = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Order",
                "namespace": "shop",
                "fields": [
                    {"name": "id", "type": "string"},
                    {"name": "total", "type": "shop.Money"},
                ],
            }
        ),
        "AVRO",
        [SchemaReference("shop.Money", "money", 1)],
    )
    assert client.register_schema("orders-value", order) == 2
    # a serializer that writes with the subject's latest version, registering nothing
    serialize = AvroSerializer(
        client,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    data = serialize({"id": "o-1", "total": {"cents": 250}}, ctx("orders"))
    assert data[:5] == encode_header(2)
    assert AvroDeserializer(client)(data, ctx("orders")) == {"id": "o-1", "total": {"cents": 250}}
    assert SchemaDecoder(registry).value(data) == {"id": "o-1", "total": {"cents": 250}}
    got = client.get_latest_version("orders-value")
    assert [(r.name, r.subject, r.version) for r in got.schema.references] == [
        ("shop.Money", "money", 1)
    ]
    assert client.get_referenced_by("money", 1) == [2]


def test_avro_compatibility_through_the_client(client):
    v1 = {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}
    client.register_schema("a-value", Schema(json.dumps(v1), "AVRO"))
    v2 = {**v1, "fields": v1["fields"] + [{"name": "y", "type": "int"}]}
    assert client.test_compatibility("a-value", Schema(json.dumps(v2), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("a-value", Schema(json.dumps(v2), "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (409, 409)
    client.set_compatibility("a-value", "FORWARD")
    assert client.get_compatibility("a-value") == "FORWARD"
    assert client.register_schema("a-value", Schema(json.dumps(v2), "AVRO")) == 2
    assert client.get_versions("a-value") == [1, 2]
    assert client.delete_version("a-value", 1) == 1
    assert client.delete_subject("a-value") == [2]
    assert client.delete_subject("a-value", permanent=True) == [1, 2]
    assert client.get_subjects() == []


COMMON_PROTO = """
syntax = "proto3";
package shop.common;
message Money {
  int64 cents = 1;
  string currency = 2;
}
"""

SHOP_PROTO = """
syntax = "proto3";
package shop;
import "{common}.proto";
import "google/protobuf/timestamp.proto";

message Order {
  message Line {
    string sku = 1;
    int32 quantity = 2;
    shop.common.Money price = 3;
  }
  string id = 1;
  repeated Line lines = 2;
  google.protobuf.Timestamp placed_at = 3;
}

message Refund {
  string order_id = 1;
  shop.common.Money amount = 2;
  enum Reason { UNKNOWN = 0; DAMAGED = 1; LATE = 2; }
  Reason reason = 3;
}
"""


@pytest.fixture(scope="module")
def shop_pb2(tmp_path_factory):
    """Python classes generated by protoc from two .proto files, one importing the other
    (once: generated classes live in protobuf's default pool, where a name is defined once)."""
    tmp_path = tmp_path_factory.mktemp("proto")
    common, shop = "tidelog_test_common", "tidelog_test_shop"
    (tmp_path / f"{common}.proto").write_text(COMMON_PROTO)
    (tmp_path / f"{shop}.proto").write_text(SHOP_PROTO.replace("{common}", common))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{tmp_path}",
            f"--python_out={tmp_path}",
            f"{common}.proto",
            f"{shop}.proto",
        ],
        check=True,
        cwd=tmp_path,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(f"{shop}_pb2"), importlib.import_module(f"{common}_pb2")
    finally:
        sys.path.remove(str(tmp_path))


def test_protobuf_nested_and_imported_messages(client, registry, shop_pb2):
    shop, common = shop_pb2
    conf = {"use.deprecated.format": False}
    # a nested message: message indexes [0, 0]
    line = shop.Order.Line(sku="A-1", quantity=2, price=common.Money(cents=999, currency="EUR"))
    serialize_line = ProtobufSerializer(shop.Order.Line, client, conf)
    data = serialize_line(line, ctx("lines"))
    assert read_indexes(data, 5)[0] == (0, 0)
    assert ProtobufDeserializer(shop.Order.Line, conf)(data, ctx("lines")) == line
    # the import was registered as a subject of its own, referenced by the schema
    latest = client.get_latest_version("lines-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("tidelog_test_common.proto", "tidelog_test_common.proto", 1)
    ]
    # a second top-level message: indexes [1]
    refund = shop.Refund(order_id="o-1", amount=common.Money(cents=5), reason=shop.Refund.LATE)
    data = ProtobufSerializer(shop.Refund, client, conf)(refund, ctx("refunds"))
    assert read_indexes(data, 5)[0] == (1,)
    assert ProtobufDeserializer(shop.Refund, conf)(data, ctx("refunds")) == refund
    decoded = SchemaDecoder(registry).decode(data)
    assert decoded.message == "shop.Refund"
    assert decoded.value == {"order_id": "o-1", "amount": {"cents": "5"}, "reason": "LATE"}
    # the first message, with a well-known type: index [0], written as a single 0 byte
    order = shop.Order(id="o-2", lines=[line])
    order.placed_at.FromSeconds(1_700_000_000)
    data = ProtobufSerializer(shop.Order, client, conf)(order, ctx("orders"))
    assert data[5] == 0
    assert ProtobufDeserializer(shop.Order, conf)(data, ctx("orders")) == order
    value = SchemaDecoder(registry).value(data)
    assert value["placed_at"] == "2023-11-14T22:13:20Z" and value["lines"][0]["sku"] == "A-1"
    # format=serialized gives the descriptor the deserializer builds its classes from
    raw = client.get_schema(latest.schema_id, fmt="serialized")
    assert raw.schema_type == "PROTOBUF" and not raw.schema_str.lstrip().startswith("syntax")


def test_protobuf_message_index_out_of_range_is_a_clear_error(client, registry, shop_pb2):
    shop, _ = shop_pb2
    conf = {"use.deprecated.format": False}
    data = ProtobufSerializer(shop.Refund, client, conf)(shop.Refund(order_id="x"), ctx("r"))
    schema_id = int.from_bytes(data[1:5], "big")
    bad = encode_header(schema_id, (5,)) + data[6:]
    with pytest.raises(Undecodable, match=r"message index \[5\] is out of range"):
        SchemaDecoder(registry).decode(bad)


def test_protobuf_text_registered_by_hand_reads_what_the_serializer_wrote(client, registry):
    text = 'syntax = "proto3";\npackage t;\nmessage Ping { string who = 1; int32 n = 2; }\n'
    schema_id = client.register_schema("ping-value", Schema(text, "PROTOBUF"))
    again = client.register_schema("ping-value", Schema(text + "\n\n", "PROTOBUF"))
    assert again == schema_id  # same schema, same id
    assert client.get_schema(schema_id).schema_str == text  # as registered
    serialized = registry.schema(schema_id)  # and as the deserializer asks for it
    from streams.schemas.rest import RestRequest, handle

    answer = handle(
        registry, RestRequest("GET", f"/schemas/ids/{schema_id}", {"format": "serialized"})
    )
    import base64

    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer.body["schema"]))
    assert [m.name for m in file.message_type] == ["Ping"] and serialized.schema_type == "PROTOBUF"
    # what a ProtobufDeserializer without generated classes would read, Tidelog reads
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    ping = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Ping"))(who="me", n=3)
    data = encode_header(schema_id, (0,)) + ping.SerializeToString()
    assert SchemaDecoder(registry).value(data) == {"who": "me", "n": 3}


def test_json_schema_round_trips(client, registry):
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Click",
        "type": "object",
        "properties": {"page": {"type": "string"}, "ms": {"type": "integer", "minimum": 0}},
        "required": ["page"],
        "additionalProperties": False,
    }
    serialize = JSONSerializer(json.dumps(schema), client)
    data = serialize({"page": "/home", "ms": 12}, ctx("clicks"))
    assert data[:5] == encode_header(1)
    assert JSONDeserializer(json.dumps(schema), schema_registry_client=client)(
        data, ctx("clicks")
    ) == {"page": "/home", "ms": 12}
    assert SchemaDecoder(registry).value(data) == {"page": "/home", "ms": 12}
    from confluent_kafka.serialization import SerializationError

    with pytest.raises(SerializationError):  # the serializer validates against the schema
        serialize({"ms": -1}, ctx("clicks"))


def test_json_schema_references(client, registry):
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    client.register_schema("address", Schema(json.dumps(address), "JSON"))
    person = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}},
    }
    ref = SchemaReference("address.json", "address", 1)
    schema = Schema(json.dumps(person), "JSON", [ref])
    client.register_schema("people-value", schema)
    serialize = JSONSerializer(
        schema, client, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    data = serialize({"name": "Ann", "home": {"city": "Oslo"}}, ctx("people"))
    assert SchemaDecoder(registry).value(data) == {"name": "Ann", "home": {"city": "Oslo"}}


def test_undecodable_bytes_say_why(registry):
    decoder = SchemaDecoder(registry)
    with pytest.raises(Undecodable, match="not in the schema registry's wire format"):
        decoder.decode(b'{"plain": "json"}')
    with pytest.raises(Undecodable, match="under the 5 of its header"):
        decoder.decode(b"\x00\x00")
    with pytest.raises(Undecodable, match="schema id 42"):
        decoder.decode(encode_header(42) + b"x")
    registry.register(
        "t-value",
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}),
    )
    with pytest.raises(Undecodable, match="truncated"):
        decoder.decode(encode_header(1) + b"\x10ab")  # a string of 8 bytes, 2 there
