"""The job serdes `Avro`, `Protobuf` and `JsonSchema` (``streams.jobs.serde``): round trips
through the registry, Avro's schema resolution to the job's own schema, their errors, the
bytes Confluent's deserializers read, and a job reading Avro on the broker."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streams.jobs.serde import Avro, JsonSchema, Protobuf
from streams.schemas.serdes import SchemaSerdeError

V1 = {
    "type": "record",
    "name": "Payment",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}
V2 = {**V1, "fields": V1["fields"] + [{"name": "method", "type": "string", "default": "CARD"}]}


def test_avro_registers_on_first_use_and_round_trips(registry, client):
    serde = Avro("pay-value", V1, registry=registry)
    data = serde.serialize({"id": "p1", "amount": 2.5})
    assert registry.versions("pay-value") == [1]
    assert serde.deserialize(data) == {"id": "p1", "amount": 2.5}
    assert serde.deserialize(None) is None and serde.serialize(None) is None
    # what Confluent's own deserializer reads from it
    ctx = SerializationContext("pay", MessageField.VALUE)
    assert AvroDeserializer(client)(data, ctx) == {"id": "p1", "amount": 2.5}


def test_avro_resolves_old_records_to_the_jobs_schema(registry):
    old = Avro("pay-value", V1, registry=registry).serialize({"id": "p1", "amount": 1.0})
    reader = Avro("pay-value", V2, registry=registry)
    assert reader.deserialize(old) == {"id": "p1", "amount": 1.0, "method": "CARD"}
    assert registry.versions("pay-value") == [1, 2]  # V2 registered (compatible)
    # without a schema of its own, a serde writes with the latest version
    latest = Avro("pay-value", registry=registry)
    data = latest.serialize({"id": "p2", "amount": 3.0, "method": "VOUCHER"})
    assert int.from_bytes(data[1:5], "big") == registry.latest_id("pay-value")


def test_avro_errors_are_clear(registry):
    serde = Avro("pay-value", V1, registry=registry)
    with pytest.raises(SchemaSerdeError, match="not a record of its schema"):
        serde.serialize({"id": "p1"})
    with pytest.raises(SchemaSerdeError, match="not in the schema registry's wire format"):
        Avro("pay-value", registry=registry).deserialize(b'{"id": 1}')
    with pytest.raises(SchemaSerdeError, match="no schema to write nope-value with"):
        Avro("nope-value", registry=registry).serialize({"id": "x"})
    bad = {**V1, "fields": [{"name": "id", "type": "int"}]}  # id changed type: incompatible
    Avro("pay-value", V1, registry=registry).serialize({"id": "p", "amount": 1.0})
    with pytest.raises(SchemaSerdeError, match="incompatible"):
        Avro("pay-value", bad, registry=registry).serialize({"id": 1})


PROTO = """syntax = "proto3";
package pay;
message Envelope { message Payment { string id = 1; double amount = 2; } Payment p = 1; }
message Refund { string id = 1; int64 cents = 2; }
"""


def test_protobuf_writes_the_named_message_and_reads_dicts(registry):
    serde = Protobuf("refunds-value", PROTO, message="pay.Refund", registry=registry)
    data = serde.serialize({"id": "r1", "cents": 250})
    assert data[5:7] == b"\x02\x02"  # indexes [1]: count 1, index 1, zigzag
    assert serde.deserialize(data) == {"id": "r1", "cents": "250"}  # int64 as text (JSON's)
    nested = Protobuf("pays-value", PROTO, message="Payment", registry=registry)
    data = nested.serialize({"id": "p1", "amount": 2.5})
    assert nested.deserialize(data) == {"id": "p1", "amount": 2.5}
    with pytest.raises(SchemaSerdeError, match="not a pay.Refund"):
        serde.serialize({"nope": 1})


def test_json_schema_validates_what_it_writes(registry):
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}},
        "required": ["n"],
    }
    serde = JsonSchema("counts-value", schema, registry=registry)
    assert serde.deserialize(serde.serialize({"n": 3})) == {"n": 3}
    with pytest.raises(SchemaSerdeError, match=r"invalid at n: -1 is less than the minimum"):
        serde.serialize({"n": -1})


def test_a_job_reads_avro_through_the_registry(tmp_path):
    from streams.broker.runtime import Broker
    from streams.jobs import TEXT, Count, Job

    with Broker.open(tmp_path / "b", metrics=False, health=False) as broker:
        broker.store.create_topic("pay", partitions=1)
        broker.store.create_topic("per-method", partitions=1)
        writer = Avro("pay-value", V2, registry=broker.schemas)
        for i, method in enumerate(["CARD", "CARD", "VOUCHER"]):
            value = writer.serialize({"id": f"p{i}", "amount": 1.0, "method": method})
            broker.store.append("pay", value, key=f"p{i}".encode(), partition=0)
        job = Job("per-method")
        # no registry given: the job uses its broker's (the process default)
        pays = job.stream("pay", key=TEXT, value=Avro("pay-value", V2))
        pays.key_by("method").aggregate(name="n", n=Count()).to("per-method", key=TEXT)
        from streams.jobs.embedded import JobSpec

        broker.jobs.register(JobSpec("per-method", lambda: job))
        broker.jobs.start("per-method")
        deadline = time.monotonic() + 20
        counts: dict = {}
        while time.monotonic() < deadline and counts != {"CARD": 2, "VOUCHER": 1}:
            time.sleep(0.2)
            for r in broker.store.read("per-method", 0, 0, 100):
                counts[r.key.decode()] = json.loads(r.value)["n"]
        assert counts == {"CARD": 2, "VOUCHER": 1}
