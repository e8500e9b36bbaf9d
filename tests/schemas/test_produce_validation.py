"""Schema validation on the produce path (``confluent.value.schema.validation`` and
``confluent.key.schema.validation``, Confluent Server's topic configs), through the Kafka
port with confluent-kafka's producer and its AvroSerializer against the broker's registry:
records in the wire format with an id of the topic's subject are written; a value that is
not in the wire format, or names an id of another subject, is refused with INVALID_RECORD
and nothing of its record set is written; topics without the setting take anything."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.broker.runtime import Broker
from streams.errors import InvalidConfig
from streams.log import ProducerRecord, compression
from streams.log import records as rb
from streams.protocol import ListenerConfig
from streams.schemas import RegistryConfig

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "n", "type": "long"}]}


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", metrics=False, health=False)
    b.start_kafka_listener(ListenerConfig(port=0))
    b.start_schema_registry(RegistryConfig(port=0))
    yield b
    b.close()


def _bootstrap(broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def _produce(broker, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list:
    """Send `records` in one batch; the delivery error of each (None: written)."""
    producer = Producer(
        {"bootstrap.servers": _bootstrap(broker), "linger.ms": 50, "enable.idempotence": False}
    )
    errors: list = [None] * len(records)

    def done(i):
        return lambda err, _msg: errors.__setitem__(i, err)

    for i, (key, value) in enumerate(records):
        producer.produce(topic, value=value, key=key, on_delivery=done(i))
    assert producer.flush(30) == 0
    return errors


def _serializer(broker, schema: dict):
    host, port = broker.registry_address
    client = SchemaRegistryClient({"url": f"http://{host}:{port}"})
    return AvroSerializer(client, json.dumps(schema))


def _end(broker, topic: str) -> int:
    return broker.store.partition_log(topic, 0).high_watermark


def test_values_must_name_a_schema_of_the_topics_subject(broker):
    broker.store.create_topic("orders", 1, {"confluent.value.schema.validation": "true"})
    serialize = _serializer(broker, ORDER)
    good = serialize({"id": "o-1"}, SerializationContext("orders", MessageField.VALUE))
    assert _produce(broker, "orders", [(b"k", good), (b"k", None)]) == [None, None]
    assert _end(broker, "orders") == 2  # a record in the wire format and a tombstone

    # the same serializer's bytes under another subject's id (an Other registered elsewhere)
    other = _serializer(broker, OTHER)({"n": 1}, SerializationContext("misc", MessageField.VALUE))
    for bad in (b'{"id": "o-2"}', other, b"\x00\x00"):
        errors = _produce(broker, "orders", [(b"k", good), (b"k", bad)])
        assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors), errors
    assert _end(broker, "orders") == 2  # nothing of the refused batches was written

    # a topic without the setting takes anything; keys are not checked unless asked
    broker.store.create_topic("loose", 1)
    assert _produce(broker, "loose", [(b"k", b"plain")]) == [None]


def test_the_refusal_says_which_record_and_why(broker):
    broker.store.create_topic("orders", 1, {"confluent.value.schema.validation": "true"})
    check = broker._listener.record_check  # the check the listener runs, called directly

    def batch(value: bytes) -> bytes:
        return bytes(rb.build_batch([ProducerRecord(value)], now_ms=0, codec=compression.LZ4))

    message = check("orders", 0, batch(b"\x00\x00\x00\x00\x07abc"))
    assert message == (
        "record 0 of the record set: its value names schema id 7, and subject orders-value "
        "has no schema (topic orders has confluent.value.schema.validation=true)"
    )
    assert "wire format" in check("orders", 0, batch(b"{}"))
    assert check("orders", 0, b"\x00" * 70) is None  # a malformed set: left to the append


def test_keys_are_checked_when_asked_and_the_setting_can_be_changed(broker):
    admin = AdminClient({"bootstrap.servers": _bootstrap(broker)})
    for f in admin.create_topics([NewTopic("keyed", 1)]).values():
        f.result(30)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, "keyed", set_config={"confluent.key.schema.validation": "true"}
    )
    for f in admin.alter_configs([resource]).values():
        f.result(30)
    key = _serializer(broker, ORDER)({"id": "k"}, SerializationContext("keyed", MessageField.KEY))
    errors = _produce(broker, "keyed", [(key, b"any value"), (b"raw key", b"v")])
    assert [e is None or e.code() for e in errors] == [
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_RECORD,
    ]  # one record set: the raw key refuses both
    assert _produce(broker, "keyed", [(key, b"any value"), (None, b"v")]) == [None, None]
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "keyed")])
    [config] = described.values()
    assert config.result(30)["confluent.key.schema.validation"].value == "true"


def test_a_bad_setting_is_refused():
    from streams.log.config import TopicConfig

    with pytest.raises(InvalidConfig, match="true or false"):
        TopicConfig.from_mapping({"confluent.value.schema.validation": "yes"})
    assert TopicConfig.from_mapping(
        {"confluent.value.schema.validation": "TRUE"}
    ).schema_validation == (False, True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=8)),
            st.one_of(st.none(), st.binary(max_size=8), st.integers(0, 2**32 - 1)),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([compression.NONE, compression.LZ4]),
)
def test_the_compiled_envelope_scan_agrees_with_the_pure_one(records, codec):
    from streams.schemas import validation

    assert validation._native is not None, "streams/log/_cdecode is not built: run `make native`"
    recs = [
        ProducerRecord(b"\x00" + v.to_bytes(4, "big") + b"x" if isinstance(v, int) else v, key=k)
        for k, v in records
    ]
    batch = bytes(rb.build_batch(recs, now_ms=0, codec=codec))
    h = rb.parse_header(batch)
    body = batch[rb.HEADER_SIZE : h.size]
    if codec:
        body = compression.decompress(codec, body)
    for keys in (False, True):
        assert validation._native(body, keys) == validation._pure(batch, keys)
    assert validation._native(body[:-1], False) is None  # cut short: left to the append
