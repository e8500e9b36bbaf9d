"""The schema registry as the console's server runs it: on the broker, with the console's users
and roles (HTTP Basic and API tokens, as Confluent's clients send them) and every change in the
audit log with source ``registry``."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from rest_framework.authtoken.models import Token

from brokerui.audit.models import AuditEntry

# the registry's threads read the users from their own database connections
pytestmark = pytest.mark.django_db(transaction=True)

AVRO = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})


def _client(broker, **auth) -> SchemaRegistryClient:
    host, port = broker.registry_address
    return SchemaRegistryClient({"url": f"http://{host}:{port}", **auth})


def test_the_broker_serves_the_registry(broker):
    assert broker.registry_address is not None
    from brokerui.broker import registry_summary

    assert "http://127.0.0.1:" in registry_summary(broker)


def test_anonymous_and_wrong_passwords_are_refused(broker, operator):
    with pytest.raises(SchemaRegistryError) as err:
        _client(broker).get_subjects()
    assert (err.value.http_status_code, err.value.error_code) == (401, 40101)
    with pytest.raises(SchemaRegistryError) as err:
        _client(broker, **{"basic.auth.user.info": "olivia:wrong"}).get_subjects()
    assert err.value.http_status_code == 401
    with pytest.raises(SchemaRegistryError) as err:
        _client(
            broker,
            **{
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": "nope",
                "bearer.auth.logical.cluster": "x",
                "bearer.auth.identity.pool.id": "y",
            },
        ).get_subjects()
    assert err.value.http_status_code == 401
    # a failed registry sign-in counts in the console's login throttle, which audits it
    failed = AuditEntry.objects.get(action="user.login_failed")
    assert failed.target == "user olivia" and failed.after["via"] == "schema registry client"


def test_operators_write_and_viewers_read(broker, operator, viewer):
    writer = _client(broker, **{"basic.auth.user.info": "olivia:operator-pass-123"})
    reader = _client(broker, **{"basic.auth.user.info": "victor:viewer-pass-123"})
    assert writer.register_schema("a-value", Schema(AVRO, "AVRO")) == 1
    assert reader.get_subjects() == ["a-value"]
    assert reader.get_latest_version("a-value").schema_id == 1
    with pytest.raises(SchemaRegistryError) as err:
        reader.register_schema("b-value", Schema(AVRO, "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError):
        reader.set_compatibility("a-value", "NONE")
    assert reader.get_subjects() == ["a-value"]


def test_an_api_token_signs_in_as_its_user(broker, operator):
    token = Token.objects.create(user=operator)
    client = _client(
        broker,
        **{
            "bearer.auth.credentials.source": "STATIC_TOKEN",
            "bearer.auth.token": token.key,
            "bearer.auth.logical.cluster": "tidelog",
            "bearer.auth.identity.pool.id": "tidelog",
        },
    )
    assert client.register_schema("a-value", Schema(AVRO, "AVRO")) == 1


def test_every_change_is_audited(broker, operator):
    client = _client(broker, **{"basic.auth.user.info": "olivia:operator-pass-123"})
    client.register_schema("a-value", Schema(AVRO, "AVRO"))
    client.register_schema("a-value", Schema(AVRO, "AVRO"))  # the same: nothing new
    client.set_compatibility("a-value", "FULL")
    client.delete_version("a-value", 1)
    client.delete_subject("a-value", permanent=True)
    entries = list(AuditEntry.objects.filter(source="registry").order_by("id"))
    assert [(e.action, e.target) for e in entries] == [
        ("schema.register", "subject a-value"),
        ("schema.config", "subject a-value"),
        ("schema.delete", "subject a-value version 1"),
        ("schema.subject_delete_permanent", "subject a-value"),
    ]
    assert entries[0].user == operator and entries[0].after["id"] == 1
    assert entries[1].before == {"compatibility": "BACKWARD"}
    assert entries[1].after == {"compatibility": "FULL"}
    assert "127.0.0.1" in entries[0].username and "olivia" in entries[0].username
