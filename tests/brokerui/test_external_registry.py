"""The console on an external cluster with an external schema registry
(``TIDELOG_CLUSTER`` and ``TIDELOG_SCHEMA_REGISTRY`` with HTTP Basic): Tidelog's own registry,
in its own store and behind a password, plays that external registry. Values written by
Confluent's serializer to the external cluster are shown decoded, filtered and exported; a
job worker's serde reads through the same registry."""

from __future__ import annotations

import html
import json
import time

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from django.urls import reverse

from streams.cluster import ProduceRequest
from streams.log import LogStore
from streams.protocol.security import Role
from streams.schemas import RegistryConfig, RegistryServer, SchemaRegistry, StoreSchemaLog
from streams.schemas.remote import RemoteRegistry

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}  # fmt: skip


class OnePassword:
    """A registry authenticator with one operator, as a secured external registry."""

    def check_password(self, user: str, password: str, address: str) -> bool:
        return (user, password) == ("sr-user", "sr-secret")

    def user_for_token(self, token: str) -> str | None:
        return None

    def role(self, user: str) -> Role:
        return Role.OPERATOR


@pytest.fixture
def external_registry(tmp_path):
    store = LogStore.open(tmp_path / "registry")
    config = RegistryConfig(port=0, authenticator=OnePassword())
    server = RegistryServer(SchemaRegistry(StoreSchemaLog(store)), config).start()
    yield server
    server.stop()
    store.close()


@pytest.fixture
def with_registry(settings, external, external_registry):
    settings.TIDELOG_SCHEMA_REGISTRY = external_registry.url
    settings.TIDELOG_SCHEMA_REGISTRY_AUTH = "sr-user:sr-secret"
    return external


def test_the_console_reads_the_external_clusters_avro_with_the_external_registry(
    operator_client, with_registry, external_registry
):
    topic = f"orders-{time.time_ns() % 10**9}"
    with_registry.create_topic(name=topic, partitions=1)
    client = SchemaRegistryClient(
        {"url": external_registry.url, "basic.auth.user.info": "sr-user:sr-secret"}
    )
    serialize = AvroSerializer(client, json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [serialize({"id": f"o-{i}", "amount": float(i)}, ctx) for i in range(4)]
    with_registry.produce(topic=topic, records=[ProduceRequest(v, partition=0) for v in values])

    url = reverse("console:messages", args=[topic])
    page = html.unescape(operator_client.get(url, {"seek": "oldest"}).content.decode())
    # (an external cluster's first page holds what its first fetch gave: the oldest record)
    assert '"id": "o-0"' in page and f"Avro ({topic}-value v1, schema id 1)" in page
    page = html.unescape(
        operator_client.get(url, {"seek": "oldest", "q": 'value.id == "o-0"'}).content.decode()
    )
    assert '"id": "o-0"' in page
    page = html.unescape(
        operator_client.get(url, {"seek": "oldest", "q": 'value.id == "o-9"'}).content.decode()
    )
    assert '"id": "o-0"' not in page and "evaluation" not in page.lower()
    export = operator_client.get(
        reverse("console:messages_export", args=[topic]), {"seek": "oldest"}
    )
    lines = [json.loads(x) for x in b"".join(export.streaming_content).splitlines()]
    assert [r["value_decoded"]["id"] for r in lines[1:-1]] == ["o-0", "o-1", "o-2", "o-3"]


def test_a_wrong_registry_password_shows_bytes_with_the_reason(
    settings, operator_client, with_registry
):
    settings.TIDELOG_SCHEMA_REGISTRY_AUTH = "sr-user:wrong"
    topic = f"orders-{time.time_ns() % 10**9}"
    with_registry.create_topic(name=topic, partitions=1)
    data = b"\x00\x00\x00\x00\x01" + b"\x06o-1" + b"\x00" * 8
    with_registry.produce(topic=topic, records=[ProduceRequest(data, partition=0)])
    url = reverse("console:messages", args=[topic])
    page = html.unescape(operator_client.get(url, {"seek": "oldest"}).content.decode())
    assert "schema id 1: Unauthorized" in page


def test_a_serde_reads_through_a_remote_registry(external_registry):
    from streams.jobs.serde import Avro

    remote = RemoteRegistry(external_registry.url, {"basic.auth.user.info": "sr-user:sr-secret"})
    writer = Avro("pay-value", ORDER, registry=remote)
    data = writer.serialize({"id": "p", "amount": 1.5})
    assert Avro("pay-value", registry=remote).deserialize(data) == {"id": "p", "amount": 1.5}
    assert remote.describe(1) == ("pay-value", 1)
